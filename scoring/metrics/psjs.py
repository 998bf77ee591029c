"""PSJS: provenance subgraph Jaccard similarity (DESIGN §7).

The provenance of a query is the set of element ids of the nodes and relationships that its MATCH
patterns bind, in the rows that reach its result: before projection and aggregation, but after its
filters, ``LIMIT``s and ``DISTINCT``s. PSJS is the Jaccard similarity of the gold's and the
prediction's provenance: 1.0 for queries that traverse exactly the same subgraph however they are
written (renamed variables, a pattern read in the other direction, a WHERE instead of an inline
property map, a pattern split over two MATCH clauses), less when they walk other paths. Two empty
provenances (e.g. two queries without MATCH) are identical: 1.0.

**How** (parser-based; ``rewrite_provenance``): the query is tokenized and split into UNION parts
and clauses by the Cypher toolkit ``graphs.cypher_syntax`` (brackets matched, keywords inside
strings, comments, labels and property keys ignored), then rewritten so that it also returns the ids:

- every pattern of every ``MATCH`` / ``OPTIONAL MATCH`` gets a path variable (``__ct_p1 = (a)-->(b)``,
  or its own when it has one): a path holds all its nodes and relationships, including the anonymous
  ones and the intermediate elements of variable-length, shortest-path and quantified patterns;
- every projection (``WITH``, the final ``RETURN``) gets one more item that carries the ids of the
  paths bound since the previous projection, plus what that projection carried: in a plain
  projection the per-row list ``[x IN nodes(p) | elementId(x)] + ...``; in an aggregating or
  ``DISTINCT`` projection the flattened ``collect(DISTINCT p)`` of each source (adding an aggregate
  does not change the grouping, and ``DISTINCT`` over grouping keys is the grouping itself), so
  the ids survive aggregation without changing the rows;
- ``CALL { ... }`` subqueries are rewritten the same way (their RETURN gets its own column, which the
  enclosing query then carries); the parts of a UNION all return the same column; pattern predicates
  and ``EXISTS`` / ``COUNT`` / ``COLLECT`` subquery expressions are filters, not bindings, and are left
  alone, as are pattern comprehensions.

The rewritten query runs through the safe executor (its guards apply) and the ids of every row are
unioned. ``psjs`` never raises for a query the executor accepts: a text that cannot be rewritten or
a rewrite that fails to run yields 0.0 with a ``reason``; only an infrastructure failure (error kind
``unavailable``) raises ``InfrastructureError``, because that is no verdict on the query.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

from graphs.cypher_syntax import (CypherParseError, find_top, is_keyword, parse, projection_is_aggregating,
                                  split_clauses, split_union)
from cypherturn.errors import InfrastructureError

__all__ = ["rewrite_provenance", "jaccard", "provenance", "psjs", "psjs_from_provenance", "PSJSResult", "Provenance",
           "PROV_COLUMN", "PROVENANCE_MAX_ROWS"]

PROV_COLUMN = "__ct_prov"
PROVENANCE_MAX_ROWS = 1_000_000


def jaccard(a: set | frozenset, b: set | frozenset) -> float:
    """|a ∩ b| / |a ∪ b|; two empty sets -> 1.0."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


class _Rewriter:
    def __init__(self, query: str):
        self.query = query
        self.toks, self.pairs = parse(query)
        self.edits: list[tuple[int, str]] = []  # (character offset, text to insert there)
        self.counter = itertools.count(1)
        taken = {t.text for t in self.toks if t.kind in ("word", "quoted")}
        self.prefix = "__ct_"
        while any(w.startswith(self.prefix) for w in taken if w != PROV_COLUMN):
            self.prefix = "_" + self.prefix

    def fresh(self, kind: str) -> str:
        return f"{self.prefix}{kind}{next(self.counter)}"

    # -- expressions ------------------------------------------------------------------------------
    def _path_ids(self, path: str) -> str:
        x = self.fresh("x")
        return (f"[{x} IN coalesce(nodes({path}), []) | elementId({x})] + "
                f"[{x} IN coalesce(relationships({path}), []) | elementId({x})]")

    def plain(self, sources: list[tuple[str, str]]) -> str:
        parts = [self._path_ids(name) if kind == "path" else f"coalesce({name}, [])" for kind, name in sources]
        return " + ".join(parts) if parts else "[]"

    def aggregated(self, sources: list[tuple[str, str]]) -> str:
        parts = []
        for kind, name in sources:
            acc, item = self.fresh("a"), self.fresh("q")
            if kind == "path":
                body = self._path_ids(item)
            else:
                body = item
            parts.append(f"reduce({acc} = [], {item} IN collect(DISTINCT {name}) | {acc} + {body})")
        return " + ".join(parts) if parts else "[]"

    # -- clauses ----------------------------------------------------------------------------------
    def query_body(self, s: int, e: int, column: str, subquery: bool) -> bool:
        """Rewrite the (UNION-ed) query in tokens [s, e); every final RETURN gets ``column``.
        Returns whether it has a RETURN (a unit subquery has none)."""
        returns = [self.part(ps, pe, column, subquery) for ps, pe in split_union(self.toks, self.pairs, s, e)]
        return any(returns)

    def part(self, s: int, e: int, column: str, subquery: bool) -> bool:
        toks, pairs = self.toks, self.pairs
        sources: list[tuple[str, str]] = []
        has_return = False
        for clause in split_clauses(toks, pairs, s, e):
            kw = clause.keyword
            if kw in ("MATCH", "OPTIONAL MATCH"):
                sources.extend(("path", name) for name in self.match(clause.body, clause.end))
            elif kw in ("CALL", "OPTIONAL CALL"):
                name = self.call(clause.body, clause.end)
                if name is not None:
                    sources.append(("list", name))
            elif kw == "WITH":
                if sources:
                    name = self.fresh("w")
                    self.projection(clause.body, clause.end, sources, name, is_with=True)
                    sources = [("list", name)]
            elif kw == "RETURN":
                self.projection(clause.body, clause.end, sources, column, is_with=False)
                has_return = True
                sources = []
        return has_return

    def match(self, s: int, e: int) -> list[str]:
        """Name every pattern of a MATCH clause body [s, e); returns the path variables."""
        toks, pairs = self.toks, self.pairs
        where = find_top(toks, pairs, s, e, "WHERE", "USING")
        end = where if where is not None else e
        names = []
        start = s
        bounds = []
        i = s
        while i < end:
            t = toks[i]
            if t.kind == "punct" and t.text in "([{":
                i = pairs[i] + 1
                continue
            if t.text == ",":
                bounds.append((start, i))
                start = i + 1
            i += 1
        bounds.append((start, end))
        for ps, pe in bounds:
            if ps >= pe:
                raise CypherParseError("empty pattern in MATCH")
            if pe - ps >= 2 and toks[ps].kind in ("word", "quoted") and toks[ps + 1].text == "=":
                names.append(toks[ps].text)
            else:
                name = self.fresh("p")
                self.edits.append((toks[ps].start, f"{name} = "))
                names.append(name)
        return names

    def call(self, s: int, e: int) -> str | None:
        """A CALL clause body [s, e): rewrite a subquery; None for a procedure call or a unit subquery."""
        toks, pairs = self.toks, self.pairs
        i = s
        if i < e and toks[i].text == "(":  # CALL (a, b) { ... }: the variable scope clause
            i = pairs[i] + 1
        if i >= e or toks[i].text != "{":
            return None  # a procedure call
        close = pairs[i]
        name = self.fresh("s")
        return name if self.query_body(i + 1, close, name, subquery=True) else None

    def projection(self, s: int, e: int, sources: list[tuple[str, str]], name: str, *, is_with: bool) -> None:
        """Add ``<ids> AS name`` to the items of a WITH / RETURN whose body is tokens [s, e)."""
        toks, pairs = self.toks, self.pairs
        distinct = s < e and toks[s].upper == "DISTINCT" and is_keyword(toks, s)
        stops = ("ORDER", "SKIP", "LIMIT", "OFFSET") + (("WHERE",) if is_with else ())
        stop = find_top(toks, pairs, s, e, *stops)
        items_end = stop if stop is not None else e
        if items_end <= s + int(distinct):
            raise CypherParseError("a projection without items")
        aggregating = distinct or projection_is_aggregating(toks, pairs, s, items_end)
        expr = self.aggregated(sources) if aggregating else self.plain(sources)
        self.edits.append((toks[items_end - 1].end, f", {expr} AS {name}"))

    def run(self) -> str:
        if not self.toks:
            raise CypherParseError("empty query")
        self.query_body(0, len(self.toks), PROV_COLUMN, subquery=False)
        text = self.query[:self.toks[-1].end]  # without a trailing ';' or comment
        for offset, insert in sorted(self.edits, key=lambda x: x[0], reverse=True):
            text = text[:offset] + insert + text[offset:]
        return text


def rewrite_provenance(cypher: str) -> str:
    """The query rewritten to also return, in column ``PROV_COLUMN``, the element ids of what its
    patterns bound (module docstring). Raises ``CypherParseError`` when the text cannot be rewritten."""
    if not isinstance(cypher, str):
        raise CypherParseError("the query must be text")
    return _Rewriter(cypher).run()


@dataclass
class Provenance:
    ids: frozenset[str] | None    # None when it could not be computed
    reason: str | None = None     # why not, or a note
    rewritten: str | None = None
    elapsed_ms: float = 0.0


def provenance(world: str, cypher: str, *, runner: Callable, timeout: float = 120.0) -> Provenance:
    """The provenance id set of one query on ``world``. ``runner(world, query, timeout)`` returns a
    ``QueryResult`` (the judge's: ``scoring.Judge.provenance_runner``). Raises only ``InfrastructureError``."""
    try:
        rewritten = rewrite_provenance(cypher)
    except CypherParseError as exc:
        return Provenance(None, f"cannot rewrite: {exc}")
    result = runner(world, rewritten, timeout)
    if result.error is not None:
        if result.error.kind == "unavailable":
            raise InfrastructureError(result.error.message)
        return Provenance(None, f"rewritten query failed ({result.error.kind}): {result.error.message}",
                          rewritten, result.elapsed_ms)
    if PROV_COLUMN not in result.columns:
        return Provenance(frozenset(), "no final RETURN: empty provenance", rewritten, result.elapsed_ms)
    col = result.columns.index(PROV_COLUMN)
    ids: set[str] = set()
    for row in result.rows:
        value = row[col]
        if isinstance(value, list):
            ids.update(v for v in value if isinstance(v, str))
    reason = "truncated: more rows than the provenance row cap" if result.truncated else None
    return Provenance(frozenset(ids), reason, rewritten, result.elapsed_ms)


@dataclass
class PSJSResult:
    score: float
    reason: str | None = None
    gold_size: int | None = None
    pred_size: int | None = None
    intersection: int | None = None

    def to_dict(self) -> dict:
        return {"score": self.score, "reason": self.reason, "gold_size": self.gold_size,
                "pred_size": self.pred_size, "intersection": self.intersection}


def psjs_from_provenance(gold: Provenance, pred: Provenance | None) -> PSJSResult:
    """PSJS from two computed provenances (pure)."""
    if gold.ids is None:
        return PSJSResult(0.0, f"gold: {gold.reason}")
    if pred is None:
        return PSJSResult(0.0, "no prediction", len(gold.ids))
    if pred.ids is None:
        return PSJSResult(0.0, f"prediction: {pred.reason}", len(gold.ids))
    return PSJSResult(jaccard(gold.ids, pred.ids), pred.reason or gold.reason, len(gold.ids), len(pred.ids),
                      len(gold.ids & pred.ids))


def psjs(world: str, gold_cypher: str, pred_cypher: str | None, *, runner: Callable,
         timeout: float = 120.0) -> PSJSResult:
    """PSJS of a prediction against the gold on ``world`` (module docstring). Never raises for a
    query; raises ``InfrastructureError`` when the database is unavailable."""
    gold = provenance(world, gold_cypher, timeout=timeout, runner=runner)
    if pred_cypher is not None and pred_cypher.strip() == gold_cypher.strip():
        pred = gold  # the same text matches the same elements: one query, not two
    else:
        pred = None if pred_cypher is None else provenance(world, pred_cypher, timeout=timeout, runner=runner)
    return psjs_from_provenance(gold, pred)
