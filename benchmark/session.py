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
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Iterator

OPENING = "OPENING"  # turn 1's label; not one of the 13 phenomena

# phenomenon -> (category, chain mode). The 13 are the paper's taxonomy and stay fixed; a question kind
# the generator adds is labelled with the phenomenon whose chain mode it is: a cut by rank ("the three
# of those fleets with the most vessels", ORDER BY ... LIMIT k) is THRESHOLD / value_narrow, a cut by
# value or by date is THRESHOLD too, MIN is AGG_MAX's other extreme, a grouped count ("how many for
# each role?") is AGG_COUNT, a boolean or existence test is FILTER / REFINE. scripts/audit_sessions.py
# (question_kinds) tells the kinds apart from the gold Cypher.
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


_STR, _INT, _OPT_INT = "a string", "an integer", "an integer or null"
_SESSION_FIELDS = {"id": _STR, "world": _STR, "persona": _STR, "turns": "a non-empty list of turns"}
_TURN_FIELDS = {"index": _INT, "utterance": _STR, "gold_cypher": _STR, "gold_columns": "a list of strings",
                "gold_rows": "a list of lists", "phenomenon": _STR, "chain_mode": _STR, "depends_on": _OPT_INT,
                "ambiguity_info": "null or {utterance, clarification} strings",
                "gold_key_values": "a list of objects", "gold_triples": "a list of strings"}
_TURN_OPTIONAL = {"ambiguity_info", "gold_key_values", "gold_triples"}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _field_ok(kind: str, v: Any) -> bool:
    if kind == _STR:
        return isinstance(v, str)
    if kind == _INT:
        return _is_int(v)
    if kind == _OPT_INT:
        return v is None or _is_int(v)
    if kind.startswith("a list of strings"):
        return isinstance(v, list) and all(isinstance(x, str) for x in v)
    if kind == "a list of lists":
        return isinstance(v, list) and all(isinstance(x, list) for x in v)
    if kind == "a list of objects":
        return isinstance(v, list) and all(isinstance(x, dict) for x in v)
    if kind.startswith("null or"):
        return v is None or (isinstance(v, dict) and isinstance(v.get("utterance"), str)
                             and isinstance(v.get("clarification"), str))
    return isinstance(v, list) and bool(v)  # turns


def _check_fields(raw: Any, fields: dict[str, str], optional: set[str], where: str,
                  allowed: set[str] | None = None) -> None:
    if not isinstance(raw, dict):
        raise ValueError(f"{where or 'the line'}: expected a JSON object, got {type(raw).__name__}")
    for name, kind in fields.items():
        if name not in raw:
            if name in optional:
                continue
            raise ValueError(f"field {where}{name} is missing")
        if not _field_ok(kind, raw[name]):
            raise ValueError(f"field {where}{name} must be {kind}, got {json.dumps(raw[name])[:60]}")
    unknown = sorted(set(raw) - set(fields) - (allowed or set()))
    if unknown:
        raise ValueError(f"unknown field {where}{unknown[0]}")


def validate_session(raw: Any) -> None:
    """Raise ValueError naming the first field of a session record that is missing or of the wrong type."""
    _check_fields(raw, _SESSION_FIELDS, set(), "")
    for i, turn in enumerate(raw["turns"]):
        # a field Turn gained later is accepted here even before it gets a type check above
        _check_fields(turn, _TURN_FIELDS, _TURN_OPTIONAL, f"turns[{i}].", {f.name for f in fields(Turn)})


def read_sessions(path: str | Path) -> Iterator[Session]:
    """Sessions from a ``sessions.jsonl`` file (or a build directory holding one); every record is
    validated field by field, and an error names the file, the line and the field."""
    path = Path(path)
    if path.is_dir():
        path = path / "sessions.jsonl"
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if line.strip():
                try:
                    raw = json.loads(line)
                    validate_session(raw)
                    session = Session.from_dict(raw)
                except (ValueError, KeyError, TypeError, RecursionError) as exc:
                    raise ValueError(f"{path}:{lineno}: not a session record ({exc})") from None
                yield session
