"""EX (strict execution accuracy), the paper's metric (DESIGN §7).

A prediction scores 1 when its result set is identical to the gold's:

- **Columns**: the same column names (as a set: rows are compared as records, column name -> value,
  so the order of the columns does not matter, their names do).
- **Rows**: compared as multisets (duplicates count), or as ordered lists when the *gold* query's
  final projection is ordered: ``is_ordered`` parses the gold and looks at the last top-level RETURN
  clause (outside subqueries and brackets; of the last UNION part) for ``ORDER BY``. An ORDER BY in an
  earlier WITH does not make the result ordered.
- **Values** (``canonical``), recursively: numbers numerically (``1 == 1.0``; floats are compared
  exactly here — EX relaxed has the tolerance); booleans are not numbers; strings as they are;
  temporal values by their ISO strings (that is how ``graphs.values`` delivers them); nodes by labels
  and properties, relationships by type and properties, paths by their sequence of nodes and
  relationships read in either direction (a path equals its reverse); maps key by key; lists as
  multisets (``collect()`` has no defined order); non-finite floats as the strings ``graphs.values``
  uses ("NaN", "Infinity", "-Infinity"); None as null.
- **Both empty**: when neither result has a row, the prediction matches (whatever its columns).

Everything here is a pure function of result sets (the executor's normalized ``columns`` / ``rows``).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Sequence

from cypherturn.errors import InputError
from graphs.cypher_syntax import is_ordered  # defined with the parser: the builder asks it too

__all__ = ["is_ordered", "canonical", "canonical_row", "ex_strict"]


def _float(x: float) -> Any:
    if math.isfinite(x):
        return ("num", x)
    return ("str", "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity"))


def _special(value: dict) -> tuple | None:
    if len(value) != 1:
        return None
    (key, inner), = value.items()
    if key == "~node" and isinstance(inner, dict):
        return ("node", tuple(sorted(str(label) for label in inner.get("labels") or ())),
                _map(inner.get("properties") or {}))
    if key == "~relationship" and isinstance(inner, dict):
        return ("rel", str(inner.get("type")), _map(inner.get("properties") or {}))
    if key == "~path" and isinstance(inner, list):
        forward = tuple(canonical(v) for v in inner)
        return ("path", min(forward, forward[::-1]))
    return None


def _map(value: dict) -> tuple:
    return ("map", tuple(sorted((str(k), canonical(v)) for k, v in value.items())))


def canonical(value: Any) -> tuple:
    """A hashable, totally ordered canonical form of a normalized result value.

    Equal canonical forms mean equal values under EX strict. Numbers keep their Python type
    (``("num", 1) == ("num", 1.0)`` and they hash alike), so EX relaxed can still tell an integer
    from a float.
    """
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("num", value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, dict):
        special = _special(value)
        return special if special is not None else _map(value)
    if isinstance(value, (list, tuple)):
        return ("list", tuple(sorted(canonical(v) for v in value)))
    iso = getattr(value, "isoformat", None) or getattr(value, "iso_format", None)
    if callable(iso):  # an unnormalized temporal value: by its ISO form
        return ("str", iso())
    return ("str", str(value))


def canonical_row(row: Sequence[Any], order: Sequence[int]) -> tuple:
    """The canonical values of ``row`` taken in the column order ``order``."""
    return tuple(canonical(row[i]) for i in order)


def _check(columns: Sequence[str], rows: Sequence[Sequence[Any]], what: str) -> None:
    for n, row in enumerate(rows):
        if len(row) != len(columns):
            raise InputError(f"{what} row {n} has {len(row)} values for {len(columns)} columns")


def ex_strict(gold_columns: Sequence[str], gold_rows: Sequence[Sequence[Any]], pred_columns: Sequence[str],
              pred_rows: Sequence[Sequence[Any]], *, ordered: bool) -> int:
    """1 when the predicted result set equals the gold one (module docstring), else 0.

    ``ordered`` is ``is_ordered(gold_cypher)``: rows are then compared as lists, otherwise as
    multisets. Raises InputError (a ValueError) only for malformed input (a row whose length is not the number of
    columns).
    """
    _check(gold_columns, gold_rows, "gold")
    _check(pred_columns, pred_rows, "predicted")
    if not gold_rows and not pred_rows:
        return 1
    if len(gold_rows) != len(pred_rows) or Counter(gold_columns) != Counter(pred_columns):
        return 0
    gold_order = list(range(len(gold_columns)))
    if len(set(gold_columns)) == len(gold_columns):
        position = {c: i for i, c in enumerate(pred_columns)}
        pred_order = [position[c] for c in gold_columns]
    else:  # duplicate names (hand-made input only; Cypher forbids them): compare positionally
        if list(gold_columns) != list(pred_columns):
            return 0
        pred_order = gold_order
    gold = [canonical_row(r, gold_order) for r in gold_rows]
    pred = [canonical_row(r, pred_order) for r in pred_rows]
    if ordered:
        return int(gold == pred)
    return int(Counter(gold) == Counter(pred))
