"""The session format: what `python -m benchmark build` writes, one JSON object per line of
``sessions.jsonl``, and what the environment, the scorer and the rewards read.

A session::

    {"id": "ancient_empire-0007", "world": "ancient_empire", "persona": "journalist",
     "turns": [Turn, ...]}

A turn (``index`` counts from 0; ``depends_on`` is the index of the turn whose result set it builds on,
or null for the opening turn and topic shifts)::

    {"index": 2,
     "utterance": "Which legions are stationed in those provinces?",   # what the user says
     "gold_cypher": "MATCH ... RETURN ...",
     "gold_columns": ["legion"], "gold_rows": [["Legion 07"], ...],      # the executor's normalized rows
     "phenomenon": "EXPAND", "chain_mode": "expand", "depends_on": 1,
     "ambiguity_info": null | {"utterance": "...", "clarification": "..."},
     "gold_key_values": [{"label": "Emperor", "property": "name", "value": "Quabro Tasherk"}, ...],
     "gold_triples": ["(:Emperor)-[:GOVERNS]->(:Province)", ...]}

For an ambiguous turn, ``ambiguity_info.utterance`` is the under-specified wording the user actually
says (the environment shows it instead of ``utterance``), ``clarification`` is the scripted answer to
a clarifying question, and ``utterance`` is the fully specified request.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

OPENING = "OPENING"  # turn 1's label; not one of the 13 phenomena

# phenomenon -> (category, chain mode)
PHENOMENA: dict[str, tuple[str, str]] = {
    "EXPAND": ("navigation", "expand"),
    "RECURSE": ("navigation", "expand"),
    "PIVOT": ("navigation", "pivot"),
    "AGG_COUNT": ("aggregation", "aggregate"),
    "AGG_MAX": ("aggregation", "agg_numeric"),
    "AGG_AVG": ("aggregation", "agg_numeric"),
    "AGG_SUM": ("aggregation", "agg_numeric"),
    "FILTER": ("filtering", "narrow"),
    "REFINE": ("filtering", "narrow"),
    "THRESHOLD": ("filtering", "value_narrow"),
    "COMPOUND": ("filtering", "value_narrow"),
    "CONTRAST": ("discourse", "contrast"),
    "TOPIC_SHIFT": ("discourse", "topic_shift"),
}

CHAIN_MODES = ("none", "topic_shift", "expand", "pivot", "agg_numeric", "aggregate", "contrast",
               "value_narrow", "narrow")

PERSONAS = ("journalist", "student", "product_manager", "novice_user", "data_analyst", "casual_user",
            "impatient_exec", "adversarial_user", "non_native_speaker", "verbose_user")

TECHNICAL_PERSONAS = frozenset({"data_analyst"})  # may name schema identifiers in utterances


@dataclass
class Turn:
    index: int
    utterance: str
    gold_cypher: str
    gold_columns: list[str]
    gold_rows: list[list[Any]]
    phenomenon: str
    chain_mode: str
    depends_on: int | None
    ambiguity_info: dict[str, str] | None = None
    gold_key_values: list[dict[str, Any]] = field(default_factory=list)
    gold_triples: list[str] = field(default_factory=list)

    @property
    def chain_dependent(self) -> bool:
        return self.chain_mode not in ("none", "topic_shift")

    @property
    def shown_utterance(self) -> str:
        """What the user says in the conversation (the ambiguous wording when there is one)."""
        return self.ambiguity_info["utterance"] if self.ambiguity_info else self.utterance


@dataclass
class Session:
    id: str
    world: str
    persona: str
    turns: list[Turn]

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=False, separators=(",", ":"))

    @classmethod
    def from_dict(cls, raw: dict) -> "Session":
        return cls(id=raw["id"], world=raw["world"], persona=raw["persona"],
                   turns=[Turn(**t) for t in raw["turns"]])


def write_sessions(path: str | Path, sessions: Iterable[Session]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for s in sessions:
            f.write(s.to_json() + "\n")


def read_sessions(path: str | Path) -> Iterator[Session]:
    """Sessions from a ``sessions.jsonl`` file (or a build directory holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / "sessions.jsonl"
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield Session.from_dict(json.loads(line))
                except (ValueError, KeyError, TypeError) as exc:
                    raise ValueError(f"{path}:{lineno}: not a session record ({exc})") from exc
