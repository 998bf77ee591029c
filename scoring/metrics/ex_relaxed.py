"""EX relaxed: the "more forgiving" execution accuracy reported beside strict EX (DESIGN §7).

Differences from strict EX (``scoring.metrics.ex``), everything else being the same (canonical
values, rows as multisets unless the gold's final RETURN has ORDER BY, both empty -> 1):

- **Column names are ignored.** Columns are matched by their value vectors instead: every gold column
  must be matched by a *distinct* predicted column, and the predicted rows restricted to the matched
  columns must equal the gold rows (as multisets, or position by position when ordered).
- **Extra predicted columns are allowed** (``allow_extra_columns=True``, the default): a prediction
  that returns the asked-for values plus, say, an id or a count still scores 1. The row count must
  still be the gold's, so a missing DISTINCT is not forgiven. Pass ``allow_extra_columns=False`` to
  require as many columns as the gold.
- **Float tolerance**: two numbers match when both are integers and equal, or when at least one is
  a float and ``math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)``, recursively inside lists, maps,
  nodes, relationships and paths. Integers never get the tolerance (a count of 1000001 is not
  1000000).

Determinism: the matching is a search over assignments of gold columns to predicted columns in
column order (gold columns in their order, candidates in predicted-column order), and the score is
whether *some* assignment works, so it depends neither on the order of the rows nor on hash order.
Candidates are first filtered per column (same multiset of values, or same sequence when ordered);
the joint check of an assignment compares whole rows. At most ``MAX_ASSIGNMENTS`` complete
assignments are tried (more only happens with many interchangeable columns); past that the score is 0.
Multisets are compared by sorting canonical values and pairing them; when float tolerance makes the
sorted pairing fail, an exact bipartite matching decides for up to ``MAX_MATCHING`` items, beyond
which the sorted pairing's answer stands.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any, Sequence

from scoring.metrics.ex import _check, canonical

__all__ = ["ex_relaxed", "relaxed_column_match", "close", "REL_TOL", "ABS_TOL"]

REL_TOL = 1e-6
ABS_TOL = 1e-9
MAX_ASSIGNMENTS = 10_000
MAX_MATCHING = 500


def _num_close(a: Any, b: Any) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)


def close(a: tuple, b: tuple) -> bool:
    """Tolerant equality of two canonical values (``scoring.metrics.ex.canonical``)."""
    if a == b:
        return True
    tag = a[0]
    if tag != b[0]:
        return False
    if tag == "num":
        return _num_close(a[1], b[1])
    if tag == "list":
        return multiset_close(a[1], b[1])
    if tag == "map":
        return len(a[1]) == len(b[1]) and all(ka == kb and close(va, vb) for (ka, va), (kb, vb) in zip(a[1], b[1]))
    if tag in ("node", "rel"):
        return a[1] == b[1] and close(a[2], b[2])
    if tag == "path":
        return _seq_close(a[1], b[1]) or _seq_close(a[1], b[1][::-1])
    if tag == "row":
        return _seq_close(a[1], b[1])
    return False


def _seq_close(a: Sequence[tuple], b: Sequence[tuple]) -> bool:
    return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))


def _shape(value: tuple) -> Any:
    """The value with every number blanked: tolerant-equal values always share their shape."""
    tag = value[0]
    if tag == "num":
        return ("num",)
    if tag in ("list", "row"):
        return (tag, tuple(sorted((_shape(v) for v in value[1]), key=repr)) if tag == "list"
                else tuple(_shape(v) for v in value[1]))
    if tag == "map":
        return ("map", tuple((k, _shape(v)) for k, v in value[1]))
    if tag in ("node", "rel"):
        return (tag, value[1], _shape(value[2]))
    if tag == "path":
        fwd = tuple(_shape(v) for v in value[1])
        return ("path", min(fwd, fwd[::-1], key=repr))
    return value


def _bipartite(a: Sequence[tuple], b: Sequence[tuple]) -> bool:
    """Whether a perfect matching under ``close`` exists (Kuhn's algorithm within shape groups)."""
    groups_a: dict[Any, list[tuple]] = defaultdict(list)
    groups_b: dict[Any, list[tuple]] = defaultdict(list)
    for x in a:
        groups_a[repr(_shape(x))].append(x)
    for y in b:
        groups_b[repr(_shape(y))].append(y)
    if {k: len(v) for k, v in groups_a.items()} != {k: len(v) for k, v in groups_b.items()}:
        return False
    for key, xs in groups_a.items():
        ys = groups_b[key]
        adj = [[j for j, y in enumerate(ys) if close(x, y)] for x in xs]
        match_of_y: list[int] = [-1] * len(ys)

        def augment(i: int, seen: list[bool]) -> bool:
            for j in adj[i]:
                if not seen[j]:
                    seen[j] = True
                    if match_of_y[j] < 0 or augment(match_of_y[j], seen):
                        match_of_y[j] = i
                        return True
            return False

        for i in range(len(xs)):
            if not augment(i, [False] * len(ys)):
                return False
    return True


def multiset_close(a: Sequence[tuple], b: Sequence[tuple]) -> bool:
    """Tolerant multiset equality of canonical values."""
    if len(a) != len(b):
        return False
    if Counter(a) == Counter(b):
        return True
    sa, sb = sorted(a), sorted(b)
    if all(close(x, y) for x, y in zip(sa, sb)):
        return True
    if len(a) > MAX_MATCHING:
        return False
    return _bipartite(sa, sb)


def relaxed_column_match(gold_columns: Sequence[str], gold_rows: Sequence[Sequence[Any]],
                         pred_columns: Sequence[str], pred_rows: Sequence[Sequence[Any]], *, ordered: bool,
                         allow_extra_columns: bool = True) -> list[int] | None:
    """The first assignment (gold column i -> predicted column ``result[i]``) under which the results
    match (module docstring), or None. Both results empty -> ``[]``."""
    _check(gold_columns, gold_rows, "gold")
    _check(pred_columns, pred_rows, "predicted")
    if not gold_rows and not pred_rows:
        return []
    k, m = len(gold_columns), len(pred_columns)
    if len(gold_rows) != len(pred_rows) or k > m or (not allow_extra_columns and k != m):
        return None
    gold = [[canonical(v) for v in row] for row in gold_rows]
    pred = [[canonical(v) for v in row] for row in pred_rows]
    gold_cols = [[row[i] for row in gold] for i in range(k)]
    pred_cols = [[row[j] for row in pred] for j in range(m)]
    candidates = []
    for g in gold_cols:
        if ordered:
            cands = [j for j, p in enumerate(pred_cols) if _seq_close(g, p)]
        else:
            cands = [j for j, p in enumerate(pred_cols) if multiset_close(g, p)]
        if not cands:
            return None
        candidates.append(cands)
    gold_rows_c = [("row", tuple(r)) for r in gold]
    tried = 0

    def search(i: int, used: list[int]) -> list[int] | None:
        nonlocal tried
        if i == k:
            tried += 1
            if ordered:
                return list(used)  # every column matched position by position: rows match
            projected = [("row", tuple(row[j] for j in used)) for row in pred]
            return list(used) if multiset_close(gold_rows_c, projected) else None
        for j in candidates[i]:
            if j in used:
                continue
            if tried >= MAX_ASSIGNMENTS:
                return None
            used.append(j)
            found = search(i + 1, used)
            used.pop()
            if found is not None:
                return found
        return None

    return search(0, [])


def ex_relaxed(gold_columns: Sequence[str], gold_rows: Sequence[Sequence[Any]], pred_columns: Sequence[str],
               pred_rows: Sequence[Sequence[Any]], *, ordered: bool, allow_extra_columns: bool = True) -> int:
    """1 when the prediction matches the gold under the relaxed rules (module docstring), else 0."""
    match = relaxed_column_match(gold_columns, gold_rows, pred_columns, pred_rows, ordered=ordered,
                                 allow_extra_columns=allow_extra_columns)
    return int(match is not None)
