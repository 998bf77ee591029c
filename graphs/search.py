"""SEARCH_VALUES: find stored property values that match a user's phrasing (entity resolution).

The cascade (each stage runs only when the earlier ones found nothing), case-insensitive throughout:

1. ``contains``: the value contains the whole query;
2. ``prefix``: the value starts with the query's leading characters (the first half of the query,
   at least 3 characters), which catches misspelled endings ("Someim Khuyaeno" -> "Someim Khuyaend");
3. ``words``: for a multi-word query, the value contains any of its words of 3+ characters, ranked by
   how many of them it contains.

At most ``limit`` (10) distinct values are returned, sorted within a stage. The label and property
must exist in the world's schema (checked against the database); the query text only ever travels
as a parameter.

``search_graph`` is the same lookup without a label or property: every short string value of the
world, whichever node label and property holds it, ranked by closeness to the query (exact, then
containing it, then by edit similarity). An agent that does not yet know where a name is stored (a
small model often picks the wrong label or property) gets the label, the property and the stored
spelling in one observation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher

from cypherturn.errors import InfrastructureError, InputError
from graphs.cypher_syntax import string_literal
from graphs.executor import executor
from graphs.schema import introspect

MAX_QUERY_CHARS = 200
GRAPH_VALUE_CHARS = 80  # search_graph looks at values up to this long: names and categories, not prose
GRAPH_MAX_VALUES = 50_000  # the worlds hold about 1,000 such values each
MIN_SIMILARITY = 0.6  # search_graph: a value neither equal to nor containing the query must be this close


class SearchError(InputError):
    """Bad SEARCH_VALUES input: unknown label or property, empty or oversized query."""


class SearchUnavailable(InfrastructureError):
    """The database could not answer the search (infrastructure, not the caller's input)."""


@dataclass(frozen=True)
class SearchResult:
    values: list
    stage: str | None  # contains | prefix | words | None when nothing matched


def _run(world: str, cypher: str, params: dict, max_rows: int = 1000) -> list:
    result = executor(world).run(cypher, params=params, timeout=30.0, max_rows=max_rows)
    if result.error is not None:
        raise SearchUnavailable(f"SEARCH_VALUES failed on {world}: {result.error.kind}: {result.error.message}")
    return result.rows


def _check_query(query: object) -> str:
    if not isinstance(query, str) or not query.strip():
        raise SearchError("SEARCH_VALUES needs a non-empty 'query' string")
    if len(query) > MAX_QUERY_CHARS:
        raise SearchError(f"the search query is over {MAX_QUERY_CHARS} characters")
    return query.strip().lower()


def search_values(world: str, label: str, property: str, query: str, *, limit: int = 10) -> SearchResult:
    """Run the cascade for ``query`` over ``label.property`` values of ``world``."""
    q = _check_query(query)
    schema = introspect(world)
    if label not in schema.nodes:
        raise SearchError(f"unknown label {label!r}; labels: {', '.join(schema.nodes)}")
    if property not in schema.property_names(label):
        raise SearchError(f"unknown property {property!r} of {label}; properties: "
                          f"{', '.join(schema.property_names(label))}")
    match = f"MATCH (n:`{label}`) WHERE n[$prop] IS NOT NULL WITH DISTINCT n[$prop] AS v, toLower(toString(n[$prop])) AS s "
    rows = _run(world, match + "WHERE s CONTAINS $q RETURN v ORDER BY v LIMIT $limit",
                {"prop": property, "q": q, "limit": limit})
    if rows:
        return SearchResult([r[0] for r in rows], "contains")
    prefix = q[:max(3, len(q) // 2)]
    rows = _run(world, match + "WHERE s STARTS WITH $q RETURN v ORDER BY v LIMIT $limit",
                {"prop": property, "q": prefix, "limit": limit})
    if rows:
        return SearchResult([r[0] for r in rows], "prefix")
    words = [w for w in re.split(r"\W+", q) if len(w) >= 3]
    if len(words) > 1:
        rows = _run(world, match + "WITH v, size([w IN $words WHERE s CONTAINS w]) AS hits WHERE hits > 0 "
                                   "RETURN v ORDER BY hits DESC, v LIMIT $limit",
                    {"prop": property, "words": words, "limit": limit})
        if rows:
            return SearchResult([r[0] for r in rows], "words")
    return SearchResult([], None)


@dataclass(frozen=True)
class GraphMatch:
    """A stored value and where it is stored."""
    label: str
    property: str
    value: str

    def pattern(self) -> str:
        """The match as a Cypher node pattern, ``(:Label {property: 'value'})``: the form an answer uses."""
        return f"(:{self.label} {{{self.property}: {string_literal(self.value)}}})"


def closeness(query: str, value: str) -> float:
    """How close a stored value is to the (lower-cased) query: 3 equal, 2-3 containing it (the tighter the
    higher), 1-2 contained in it as whole words (3 characters at least), else the edit similarity (0-1; below
    MIN_SIMILARITY, an upper bound of it, which is all the ranking needs)."""
    s = value.lower()
    if s == query:
        return 3.0
    if query in s:
        return 2.0 + len(query) / len(s)
    if len(s) >= 3 and s in query and re.search(rf"(?<!\w){re.escape(s)}(?!\w)", query):  # whole words of it
        return 1.0 + len(s) / len(query)
    matcher = SequenceMatcher(None, query, s, autojunk=False)
    bound = min(matcher.real_quick_ratio(), matcher.quick_ratio())  # cheap upper bounds of ratio()
    return bound if bound < MIN_SIMILARITY else matcher.ratio()


# world -> its (label, property, value) rows: read once per process, as the worlds are read-only while
# served (a whole scan costs 0.3-1 s on 2 busy cores; the ranking after it about 10 ms); load_world forgets
_GRAPH_VALUES: dict[str, list] = {}


def forget_graph_values(world: str | None = None) -> None:
    """Drop ``search_graph``'s copy of ``world``'s values (every world's when None): after a (re)load."""
    if world is None:
        _GRAPH_VALUES.clear()
    else:
        _GRAPH_VALUES.pop(world, None)


def search_graph(world: str, query: str, *, limit: int = 10) -> list[GraphMatch]:
    """The stored string values of ``world`` closest to ``query`` (any label, any property; values up to
    GRAPH_VALUE_CHARS long), closest first, at most ``limit``; those neither equal to nor containing the
    query (nor contained in it) must have an edit similarity of at least MIN_SIMILARITY."""
    q = _check_query(query)
    rows = _GRAPH_VALUES.get(world)
    if rows is None:
        rows = _run(world, "MATCH (n) UNWIND keys(n) AS k WITH labels(n)[0] AS label, k, n[k] AS v "
                           "WHERE v IS :: STRING AND size(v) <= $chars RETURN DISTINCT label, k, v",
                    {"chars": GRAPH_VALUE_CHARS}, max_rows=GRAPH_MAX_VALUES)
        _GRAPH_VALUES[world] = rows
    scored = [(closeness(q, v), label, k, v) for label, k, v in rows]
    scored = [t for t in scored if t[0] >= MIN_SIMILARITY]
    scored.sort(key=lambda t: (-t[0], t[1], t[2], t[3]))
    return [GraphMatch(label, k, v) for _, label, k, v in scored[:limit]]
