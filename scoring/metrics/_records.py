"""Turn records: what the environment writes, one JSON object per turn, and what the session-level
metrics read.

Keys: ``session_id, world, persona, turn_index`` (0-based), ``phenomenon, chain_mode, depends_on,
protocol`` ("guided" | "agentic"), ``prediction`` (str or None), ``gold_cypher``, ``ex`` (0/1, or None
when the turn could not be scored because of an infrastructure error), ``ex_relaxed``, ``psjs``,
``actions`` (list of ``{"type", "payload"}``), ``budget_left`` (int or None), ``cliff`` (bool),
``infra_error`` (str or None), ``output_text``.

**Unscored turns** (``ex`` is None, or ``infra_error`` is set) are excluded from every score and
counted (``excluded_turns`` in the results). A cliff turn (``cliff`` true: the shared budget ran out,
the prediction is None) is a scored EX = 0 turn; one written with ``ex`` None and no ``infra_error``
is read as EX = 0 (and ``ex_relaxed`` 0, ``psjs`` 0.0). Turn positions are reported 1-based (``turn_index + 1``,
the paper's T1, T2, ...).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterable, Mapping

from benchmark.session import is_chain_dependent as session_rule


def fix(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """The record, with a cliff turn written as ``ex`` None read as a scored 0 (module docstring)."""
    if record.get("cliff") and record.get("ex") is None and not record.get("infra_error"):
        out = dict(record)
        out["ex"] = 0
        for key, zero in (("ex_relaxed", 0), ("psjs", 0.0)):
            if out.get(key) is None:
                out[key] = zero
        return out
    return record


def is_scored(record: Mapping[str, Any]) -> bool:
    return record.get("ex") is not None and not record.get("infra_error")


def split_scored(records: Iterable[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], int]:
    """(the scored records, how many were excluded as unscored)."""
    kept, excluded = [], 0
    for r in map(fix, records):
        if is_scored(r):
            kept.append(r)
        else:
            excluded += 1
    return kept, excluded


def by_session(records: Iterable[Mapping[str, Any]]) -> "OrderedDict[str, list[Mapping[str, Any]]]":
    """Records grouped by session id (first-seen order), each group sorted by turn index."""
    groups: OrderedDict[str, list] = OrderedDict()
    for r in map(fix, records):
        groups.setdefault(str(r["session_id"]), []).append(r)
    for turns in groups.values():
        turns.sort(key=lambda r: int(r["turn_index"]))
    return groups


def turn_position(record: Mapping[str, Any]) -> int:
    return int(record["turn_index"]) + 1


def is_chain_dependent(record: Mapping[str, Any]) -> bool:
    """The session codec's one rule (``benchmark.session.is_chain_dependent``) on a turn record."""
    return session_rule(record.get("chain_mode"))


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
