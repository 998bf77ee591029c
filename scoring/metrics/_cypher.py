"""A small clause-level Cypher parser shared by the metrics (EX's ordering rule, PSJS's rewrite).

It works on the tokens of ``graphs.cypher_guard`` (string literals, comments and backtick-quoted names
are single tokens, so a keyword inside them never counts) with their character offsets, matches
brackets, and splits a query into UNION parts and each part into clauses at bracket depth 0 (whatever
sits inside ``(...)``, ``[...]`` or ``{...}`` is opaque unless a caller descends into it, as PSJS does
for ``CALL { ... }`` subqueries). It is not a validator: Neo4j decides what is valid; this module only
has to be right on queries Neo4j accepts, and it raises ``CypherParseError`` (never anything else)
when it cannot make sense of a text.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphs.cypher_guard import _TOKEN  # the guard's token grammar, reused with offsets
from graphs.errors import CypherTurnError

CLAUSE_KEYWORDS = frozenset({"MATCH", "OPTIONAL", "WITH", "RETURN", "UNWIND", "CALL", "UNION", "FINISH",
                             "LOAD", "USE", "CREATE", "MERGE", "SET", "DELETE", "DETACH", "REMOVE",
                             "FOREACH"})
AGGREGATE_FUNCTIONS = frozenset({"count", "collect", "sum", "avg", "min", "max", "stdev", "stdevp",
                                 "percentilecont", "percentiledisc"})
SUBQUERY_EXPRESSIONS = frozenset({"EXISTS", "COUNT", "COLLECT"})  # KEYWORD { ... } in expressions
_OPEN = {"(": ")", "[": "]", "{": "}"}


class CypherParseError(CypherTurnError, ValueError):
    """The text could not be split into clauses (unbalanced brackets, unexpected structure)."""


@dataclass(frozen=True)
class Tok:
    kind: str   # word | quoted | string | number | punct
    text: str
    start: int  # character offsets in the query text
    end: int

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind == "word" else ""


def tokens(query: str) -> list[Tok]:
    """Tokens with offsets, without whitespace and comments (the grammar of ``cypher_guard.tokenize``)."""
    out = []
    for m in _TOKEN.finditer(query):
        kind = m.lastgroup
        if kind in ("space", "comment"):
            continue
        out.append(Tok(kind, m.group(), m.start(), m.end()))
    return out


def bracket_pairs(toks: list[Tok]) -> dict[int, int]:
    """Index of each opening bracket -> index of its closing bracket (and back)."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for i, t in enumerate(toks):
        if t.kind != "punct":
            continue
        if t.text in _OPEN:
            stack.append(i)
        elif t.text in (")", "]", "}"):
            if not stack or _OPEN[toks[stack[-1]].text] != t.text:
                raise CypherParseError(f"unbalanced {t.text!r} at offset {t.start}")
            j = stack.pop()
            pairs[j] = i
            pairs[i] = j
    if stack:
        raise CypherParseError(f"unclosed {toks[stack[-1]].text!r} at offset {toks[stack[-1]].start}")
    return pairs


def is_keyword(toks: list[Tok], i: int, s: int = 0) -> bool:
    """A word used as a keyword: not a property key, label, parameter or map key (as in the guard),
    nor a name given with AS (``RETURN x AS limit``)."""
    if toks[i].kind != "word":
        return False
    prev = toks[i - 1].text if i > s else ""
    nxt = toks[i + 1].text if i + 1 < len(toks) else ""
    return prev not in (".", ":", "$") and prev.upper() != "AS" and nxt != ":"


def top_level(toks: list[Tok], pairs: dict[int, int], s: int, e: int):
    """Indices of the tokens in [s, e) at bracket depth 0 (brackets themselves included)."""
    i = s
    while i < e:
        yield i
        if toks[i].kind == "punct" and toks[i].text in _OPEN:
            i = pairs[i]  # yield the closing bracket next
            yield i
        i += 1


@dataclass
class Clause:
    keyword: str  # MATCH, OPTIONAL MATCH, WITH, RETURN, UNWIND, CALL, OPTIONAL CALL, ...
    start: int    # token index of the keyword
    body: int     # token index just after the keyword (after OPTIONAL MATCH both words)
    end: int      # exclusive


def _clause_keyword_at(toks: list[Tok], i: int, s: int) -> str | None:
    if not is_keyword(toks, i, s):
        return None
    word = toks[i].upper
    if word not in CLAUSE_KEYWORDS:
        return None
    if word == "WITH" and i > s and toks[i - 1].upper in ("STARTS", "ENDS"):
        return None  # the STARTS WITH / ENDS WITH operators
    if word == "OPTIONAL":
        nxt = toks[i + 1].upper if i + 1 < len(toks) else ""
        return f"OPTIONAL {nxt}" if nxt in ("MATCH", "CALL") else None
    if word == "DETACH":
        return "DETACH"
    return word


def split_union(toks: list[Tok], pairs: dict[int, int], s: int, e: int) -> list[tuple[int, int]]:
    """The [start, end) token ranges of the parts of a (possibly UNION-ed) query in [s, e)."""
    parts = []
    start = s
    for i in top_level(toks, pairs, s, e):
        if _clause_keyword_at(toks, i, s) == "UNION":
            parts.append((start, i))
            start = i + 1
            if start < e and toks[start].upper in ("ALL", "DISTINCT"):
                start += 1
    parts.append((start, e))
    return parts


def split_clauses(toks: list[Tok], pairs: dict[int, int], s: int, e: int) -> list[Clause]:
    """The clauses of one UNION part [s, e), split at depth-0 clause keywords."""
    starts: list[tuple[int, str]] = []
    for i in top_level(toks, pairs, s, e):
        kw = _clause_keyword_at(toks, i, s)
        if kw is None:
            continue
        if starts and starts[-1][1].startswith("OPTIONAL") and starts[-1][0] == i - 1:
            continue  # the MATCH/CALL of OPTIONAL MATCH/CALL
        starts.append((i, kw))
    if s < e and (not starts or starts[0][0] != s):
        raise CypherParseError(f"the query does not start with a clause keyword at offset {toks[s].start}")
    clauses = []
    for n, (i, kw) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else e
        body = i + (2 if kw.startswith("OPTIONAL") else 1)
        clauses.append(Clause(kw, i, body, end))
    return clauses


def find_top(toks: list[Tok], pairs: dict[int, int], s: int, e: int, *words: str) -> int | None:
    """The first depth-0 keyword among ``words`` in [s, e) (``ORDER`` only when followed by ``BY``)."""
    for i in top_level(toks, pairs, s, e):
        if toks[i].upper in words and is_keyword(toks, i, s):
            if toks[i].upper == "ORDER" and not (i + 1 < e and toks[i + 1].upper == "BY"):
                continue
            return i
    return None


def parse(query: str) -> tuple[list[Tok], dict[int, int]]:
    """Tokens and bracket pairs of a query; a trailing ``;`` is dropped."""
    toks = tokens(query)
    if toks and toks[-1].text == ";":
        toks = toks[:-1]
    return toks, bracket_pairs(toks)


def final_return(query: str) -> tuple[list[Tok], dict[int, int], Clause] | None:
    """The last top-level RETURN clause (outside subqueries and brackets), or None."""
    toks, pairs = parse(query)
    if not toks:
        return None
    s, e = split_union(toks, pairs, 0, len(toks))[-1]
    last = None
    for i in top_level(toks, pairs, s, e):
        if _clause_keyword_at(toks, i, s) == "RETURN":
            last = i
    if last is None:
        return None
    return toks, pairs, Clause("RETURN", last, last + 1, e)


def projection_is_aggregating(toks: list[Tok], pairs: dict[int, int], s: int, e: int) -> bool:
    """Whether projection items in [s, e) call an aggregate function (outside subquery expressions)."""
    i = s
    while i < e:
        t = toks[i]
        if t.kind == "word" and t.upper in SUBQUERY_EXPRESSIONS and i + 1 < e and toks[i + 1].text == "{":
            i = pairs[i + 1] + 1  # EXISTS { }, COUNT { }, COLLECT { }: their own scope
            continue
        if (t.kind == "word" and t.text.lower() in AGGREGATE_FUNCTIONS and i + 1 < e and toks[i + 1].text == "("
                and (i == 0 or toks[i - 1].text != ".")):
            return True
        i += 1
    return False
