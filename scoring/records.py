"""The per-turn trajectory record: what the environment reports when a turn ends, what the evaluator
appends to ``trajectories.jsonl`` (one JSON object per turn) and what the metrics read. The one
description of its keys (the fields of ``TurnRecord``) and of how they are read. It lives here, below
the environment and the reports, so that both sides of the file import it downwards.

Keys: ``session_id, world, persona, turn_index`` (0-based), ``phenomenon, chain_mode, depends_on,
protocol`` ("guided" | "agentic"), ``prediction`` (the scored query or None), ``gold_cypher``, ``ex`` and
``ex_relaxed`` (0/1; None when an infrastructure error prevented scoring), ``psjs`` (filled by the
scorer, None until then), ``actions`` (list of ``{"type", "payload"}``), ``submitted`` (SUBMIT_ANSWER
ended the turn), ``budget_left`` (agentic; None in guided), ``cliff`` (scored None because the shared
budget ran out), ``infra_error`` (str or None), ``output_text`` (the model's raw outputs of the turn).

**Unscored turns** (``ex`` is None, or ``infra_error`` is set) are excluded from every score and
counted (``excluded_turns`` in the results). A cliff turn (``cliff`` true: the shared budget ran out,
the prediction is None) is a scored EX = 0 turn; one written with ``ex`` None and no ``infra_error``
is read as EX = 0 (and ``ex_relaxed`` 0, ``psjs`` 0.0): ``fix``. Turn positions are reported 1-based
(``turn_index + 1``, the paper's T1, T2, ...).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from benchmark.session import is_chain_dependent as session_rule


@dataclass
class TurnRecord:
    """One turn's record; its fields are the keys (module docstring)."""

    session_id: str
    world: str
    persona: str
    turn_index: int
    phenomenon: str
    chain_mode: str
    depends_on: int | None
    protocol: str
    prediction: str | None
    gold_cypher: str
    ex: int | None
    ex_relaxed: int | None
    actions: list[dict[str, Any]] = field(default_factory=list)
    submitted: bool = False
    budget_left: int | None = None
    cliff: bool = False
    infra_error: str | None = None
    output_text: str = ""
    psjs: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def record_line(record: dict[str, Any]) -> str:
    """One JSON line for any record: text stays readable, and a string UTF-8 cannot hold (a lone
    surrogate from a model's output) is written as a JSON escape, so it reads back unchanged."""
    line = json.dumps(record, ensure_ascii=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(record)
    return line


def append_records(path: str | Path, records: Iterable[dict[str, Any]]) -> None:
    """Append records as JSON lines and flush, so a killed run keeps every finished session."""
    with open(path, "a", encoding="utf-8") as f:
        for r in records:
            f.write(record_line(r) + "\n")
        f.flush()


def read_records(path: str | Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


# -- reading records for the metrics ------------------------------------------------------------

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
