"""The per-turn trajectory record: what the environment reports when a turn ends and what the
evaluator appends to ``trajectories.jsonl`` (one JSON object per turn) for the metrics to read. It lives
here, below the environment and the reports, so that both sides of the file import it downwards.

Keys: session_id, world, persona, turn_index, phenomenon, chain_mode, depends_on, protocol,
prediction (the scored query or null), gold_cypher, ex and ex_relaxed (0/1; null when an
infrastructure error prevented scoring — such turns are excluded from every score and counted),
psjs (filled by the scorer, null until then), actions (list of {type, payload}), submitted
(SUBMIT_ANSWER ended the turn), budget_left (agentic; null in guided), cliff (scored None because
the shared budget ran out), infra_error, output_text (the model's raw outputs of the turn).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator


@dataclass
class TurnRecord:
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
