"""EX relaxed: the "more forgiving" execution accuracy reported beside strict EX (DESIGN §7), and the
project's one rule of value equality and column alignment (the partial-credit reward's row F1,
``rewards.execution.row_f1``, uses the same ``align_columns``).

Differences from strict EX (``scoring.metrics.ex``), everything else being the same (canonical
values, rows as multisets unless the gold's final RETURN has ORDER BY, both empty -> 1):

- **Column names are ignored.** Columns are matched by their value vectors instead: every gold column
  must be matched by a *distinct* predicted column, and the predicted rows restricted to the matched
  columns must equal the gold rows (as multisets, or position by position when ordered).
- **Extra predicted columns are allowed** (``allow_extra_columns=True``, the default): a prediction
  that returns the asked-for values plus, say, an id or a count still scores 1. The row count must
  still be the gold's, so a missing DISTINCT is not forgiven. Pass ``allow_extra_columns=False`` to
  require as many columns as the gold.
- **Float tolerance** (``close``): two numbers match when both are integers and equal, or when at
  least one is a float and ``math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)``, recursively inside
  lists, maps, nodes, relationships and paths. Integers never get the tolerance (a count of 1000001
  is not 1000000).

Column alignment (``align_columns``): a search over assignments of gold columns to distinct predicted
columns for the one under which the most gold rows find an equal predicted row (``common_count``;
position by position when ordered). EX relaxed asks for a *complete* alignment (every row paired, as
many rows on both sides); row F1 takes a complete one when there is one, else the best incomplete one.
Gold columns are assigned in their order, each trying the predicted columns by how many of its values
they pair, most first (column order among equals); an assignment pairs no more rows than its weakest
column, which prunes the search. The first complete assignment in that order is EX relaxed's (so the
score depends neither on the order of the rows nor on hash order); at most ``MAX_ASSIGNMENTS``
complete assignments are tried (more only happens with many interchangeable columns), past which the
score is 0. The search for an incomplete one stops after ``MAX_PARTIAL_ASSIGNMENTS`` and keeps the best.

Pairing multisets (``common_count``): identical values pair first; the rest pair only when floats are
involved (nothing else gets the tolerance): within groups of the same shape (the value with its
numbers blanked), plain numbers by a sorted two-pointer walk (exact for them: a number's tolerant
partners form an interval), other values by a maximum bipartite matching for up to ``MAX_MATCHING``
items per group, beyond which by the sorted walk.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from scoring.metrics.ex import _check, canonical

__all__ = ["ex_relaxed", "relaxed_column_match", "align_columns", "Alignment", "close", "common_count",
           "multiset_close", "REL_TOL", "ABS_TOL"]

REL_TOL = 1e-6
ABS_TOL = 1e-9
MAX_ASSIGNMENTS = 10_000
MAX_PARTIAL_ASSIGNMENTS = 24  # every assignment of 3 gold columns to 4: row F1 is a reward, cheap matters
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


def _has_float(value: tuple) -> bool:
    tag = value[0]
    if tag == "num":
        return isinstance(value[1], float)
    if tag in ("list", "row", "path"):
        return any(map(_has_float, value[1]))
    if tag == "map":
        return any(_has_float(v) for _, v in value[1])
    if tag in ("node", "rel"):
        return _has_float(value[2])
    return False


def _matching(a: Sequence[tuple], b: Sequence[tuple]) -> int:
    """The size of a maximum matching of ``a`` with ``b`` under ``close`` (Kuhn's algorithm)."""
    adj = [[j for j, y in enumerate(b) if close(x, y)] for x in a]
    match_of_y: list[int] = [-1] * len(b)

    def augment(i: int, seen: list[bool]) -> bool:
        for j in adj[i]:
            if not seen[j]:
                seen[j] = True
                if match_of_y[j] < 0 or augment(match_of_y[j], seen):
                    match_of_y[j] = i
                    return True
        return False

    return sum(augment(i, [False] * len(b)) for i in range(len(a)))


def _walk(a: Sequence[tuple], b: Sequence[tuple]) -> int:
    """Pairs found by walking both sorted lists at once (optimal when partners form intervals)."""
    a, b = sorted(a), sorted(b)
    i = j = pairs = 0
    while i < len(a) and j < len(b):
        if close(a[i], b[j]):
            pairs, i, j = pairs + 1, i + 1, j + 1
        elif a[i] < b[j]:
            i += 1
        else:
            j += 1
    return pairs


def common_count(a: Sequence[tuple], b: Sequence[tuple]) -> int:
    """How many canonical values of ``a`` pair with values of ``b`` under ``close``, each value used once
    (module docstring: identical values first, then the rest within shape groups)."""
    ca, cb = Counter(a), Counter(b)
    exact = sum((ca & cb).values())
    if exact == min(len(a), len(b)):
        return exact
    rest_a, rest_b = list((ca - cb).elements()), list((cb - ca).elements())
    if not any(map(_has_float, rest_a)) and not any(map(_has_float, rest_b)):
        return exact  # only floats get the tolerance
    if len(a) == len(b) and all(close(x, y) for x, y in zip(sorted(a), sorted(b))):
        return len(a)
    groups_a: dict[Any, list[tuple]] = defaultdict(list)
    groups_b: dict[Any, list[tuple]] = defaultdict(list)
    for x in rest_a:
        groups_a[_shape(x)].append(x)
    for y in rest_b:
        groups_b[_shape(y)].append(y)
    pairs = exact
    for key, xs in groups_a.items():
        ys = groups_b.get(key)
        if not ys:
            continue
        small = key != ("num",) and max(len(xs), len(ys)) <= MAX_MATCHING
        pairs += _matching(xs, ys) if small else _walk(xs, ys)
    return pairs


def multiset_close(a: Sequence[tuple], b: Sequence[tuple]) -> bool:
    """Tolerant multiset equality of canonical values."""
    return len(a) == len(b) and common_count(a, b) == len(a)


def _positional_count(a: Sequence[tuple], b: Sequence[tuple]) -> int:
    return sum(close(x, y) for x, y in zip(a, b))


@dataclass(frozen=True)
class Alignment:
    """Gold column ``i`` -> predicted column ``columns[i]``; ``common``: the gold rows paired under it."""

    columns: tuple[int, ...]
    common: int


def _search(counts: list[list[int]], leaf: Callable[[list[int]], int], *, need: int, ceiling: int,
            limit: int) -> Alignment | None:
    """The first assignment with the most common rows (at least ``need``) among at most ``limit`` complete
    ones; candidates by descending column count, then in column order. ``leaf(columns)``: its common rows."""
    k = len(counts)
    order = [sorted(range(len(row)), key=lambda j, row=row: -row[j]) for row in counts]
    best: Alignment | None = None
    tried = 0

    def floor() -> int:
        return need if best is None else best.common + 1

    def visit(i: int, used: list[int], bound: int) -> None:
        nonlocal best, tried
        if i == k:
            tried += 1
            common = leaf(used)
            if common >= floor():
                best = Alignment(tuple(used), common)
            return
        for j in order[i]:
            if tried >= limit or floor() > ceiling:
                return
            if min(bound, counts[i][j]) < floor():
                break  # the rest count no more
            if j not in used:
                used.append(j)
                visit(i + 1, used, min(bound, counts[i][j]))
                used.pop()

    visit(0, [], ceiling)
    return best


def align_columns(gold_columns: Sequence[str], gold_rows: Sequence[Sequence[Any]], pred_columns: Sequence[str],
                  pred_rows: Sequence[Sequence[Any]], *, ordered: bool = False, allow_extra_columns: bool = True,
                  complete: bool = False) -> Alignment | None:
    """The assignment of gold columns to distinct predicted columns under which the most gold rows pair
    with predicted rows (module docstring), or None when none pairs a row, the prediction has fewer
    columns than the gold, or (``allow_extra_columns=False``) another number of columns. ``complete``:
    only an assignment under which the results match (every row paired, as many rows on both sides).
    A complete alignment, when one exists, is always the answer (the first found), so an incomplete
    one comes back exactly when ``ex_relaxed`` (same ``ordered``, ``allow_extra_columns``) scores 0.
    Both results empty -> ``Alignment((), 0)``."""
    _check(gold_columns, gold_rows, "gold")
    _check(pred_columns, pred_rows, "predicted")
    if not gold_rows and not pred_rows:
        return Alignment((), 0)
    k, m, n = len(gold_columns), len(pred_columns), len(gold_rows)
    same_count = n == len(pred_rows)
    if k > m or (not allow_extra_columns and k != m) or (complete and not same_count):
        return None
    ceiling = min(n, len(pred_rows))
    if not ceiling:
        return None
    pairs = _positional_count if ordered else common_count
    gold = [[canonical(v) for v in row] for row in gold_rows]
    pred = [[canonical(v) for v in row] for row in pred_rows]
    pred_cols = [[row[j] for row in pred] for j in range(m)]
    counts: list[list[int]] = []  # counts[i][j]: values of gold column i that predicted column j pairs
    for i in range(k):
        counts.append([pairs([row[i] for row in gold], p) for p in pred_cols])
        if complete and max(counts[i], default=0) < n:
            return None
    gold_rows_c = [("row", tuple(r)) for r in gold]

    def leaf(used: list[int]) -> int:
        return pairs(gold_rows_c, [("row", tuple(row[j] for j in used)) for row in pred])

    if same_count:  # ordered: columns that all match position by position make rows that do
        found = _search(counts, (lambda used: n) if ordered else leaf, need=n, ceiling=n, limit=MAX_ASSIGNMENTS)
        if found is not None or complete:
            return found
    return _search(counts, leaf, need=1, ceiling=ceiling, limit=MAX_PARTIAL_ASSIGNMENTS)


def relaxed_column_match(gold_columns: Sequence[str], gold_rows: Sequence[Sequence[Any]],
                         pred_columns: Sequence[str], pred_rows: Sequence[Sequence[Any]], *, ordered: bool,
                         allow_extra_columns: bool = True) -> list[int] | None:
    """The first assignment (gold column i -> predicted column ``result[i]``) under which the results
    match (module docstring), or None. Both results empty -> ``[]``."""
    found = align_columns(gold_columns, gold_rows, pred_columns, pred_rows, ordered=ordered,
                          allow_extra_columns=allow_extra_columns, complete=True)
    return None if found is None else list(found.columns)


def ex_relaxed(gold_columns: Sequence[str], gold_rows: Sequence[Sequence[Any]], pred_columns: Sequence[str],
               pred_rows: Sequence[Sequence[Any]], *, ordered: bool, allow_extra_columns: bool = True) -> int:
    """1 when the prediction matches the gold under the relaxed rules (module docstring), else 0."""
    match = relaxed_column_match(gold_columns, gold_rows, pred_columns, pred_rows, ordered=ordered,
                                 allow_extra_columns=allow_extra_columns)
    return int(match is not None)
