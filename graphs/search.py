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
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cypherturn.errors import InfrastructureError, InputError
from graphs.executor import executor
from graphs.schema import introspect

MAX_QUERY_CHARS = 200


class SearchError(InputError):
    """Bad SEARCH_VALUES input: unknown label or property, empty or oversized query."""


class SearchUnavailable(InfrastructureError):
    """The database could not answer the search (infrastructure, not the caller's input)."""


@dataclass(frozen=True)
class SearchResult:
    values: list
    stage: str | None  # contains | prefix | words | None when nothing matched


def _run(world: str, cypher: str, params: dict) -> list:
    result = executor(world).run(cypher, params=params, timeout=30.0, max_rows=1000)
    if result.error is not None:
        raise SearchUnavailable(f"SEARCH_VALUES failed on {world}: {result.error.kind}: {result.error.message}")
    return result.rows


def search_values(world: str, label: str, property: str, query: str, *, limit: int = 10) -> SearchResult:
    """Run the cascade for ``query`` over ``label.property`` values of ``world``."""
    if not isinstance(query, str) or not query.strip():
        raise SearchError("SEARCH_VALUES needs a non-empty 'query' string")
    if len(query) > MAX_QUERY_CHARS:
        raise SearchError(f"the search query is over {MAX_QUERY_CHARS} characters")
    schema = introspect(world)
    if label not in schema.nodes:
        raise SearchError(f"unknown label {label!r}; labels: {', '.join(schema.nodes)}")
    if property not in schema.property_names(label):
        raise SearchError(f"unknown property {property!r} of {label}; properties: "
                          f"{', '.join(schema.property_names(label))}")
    q = query.strip().lower()
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
