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
     "gold_triples": ["(:Emperor)-[:GOVERNS]->(:Province)", ...],
     "typed_names": [{"label": "Emperor", "property": "name", "stored": "Quabro Tasherk",
                      "typed": "Quabro Tashrek", "kind": "typo"}]}        # optional, [] when none

``typed_names`` lists the names the utterance says as a user types them (``kind``: ``typo``, ``partial``
or ``case``; :mod:`benchmark.typed_names`): the utterance has ``typed``, the gold the ``stored`` value,
and SEARCH_VALUES on ``label``/``property`` with ``typed`` was verified to return it. Builds made before
the field existed have none.

For an ambiguous turn, ``ambiguity_info.utterance`` is the under-specified wording the user actually
says (the environment shows it instead of ``utterance``), ``clarification`` is the scripted answer to
a clarifying question, and ``utterance`` is the fully specified request.

**Rows** (the one codec for Arrow: the Hugging Face export, the training rows, the rewards' columns).
Arrow needs one type per column, but gold rows hold arbitrary JSON and key-value ``value``s mix types,
so ``Turn.to_row()`` stores those as JSON text (``encode_json``: compact, key order kept, so the round
trip is lossless)::

    {"index", "utterance", "gold_cypher", "gold_columns", "gold_rows_json", "phenomenon", "chain_mode",
     "depends_on", "ambiguity_info_json" (null when not ambiguous),
     "gold_key_values": [{"label", "property", "value_json"}, ...], "gold_triples",
     "typed_names": [{"label", "property", "stored", "typed", "kind"}, ...]}

and ``Turn.from_row`` reverses it (``Turn.from_row(t.to_row()) == t``); ``Session.to_row`` adds
``id, world, persona, num_turns`` and the list of turn rows. A reader that holds one column only (a
reward reading ``gold_rows_json`` or ``gold_key_values``) decodes it with ``decode_json`` /
``key_value_from_row``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, TypeVar

from benchmark.typed_names import valid_record
from cypherturn.errors import InputError

T = TypeVar("T")

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


# the chain modes that answer about the prior set without changing it (DESIGN §5: an aggregation turn leaves the
# active entity set unchanged)
AGGREGATION_MODES = frozenset({"aggregate", "agg_numeric"})


def is_chain_dependent(chain_mode: str) -> bool:
    """Whether a turn of this chain mode builds on an earlier turn's result set: every mode but the
    opening's (``none``) and a topic shift's. The one rule; turn records carry ``chain_mode`` too."""
    return chain_mode not in ("none", "topic_shift")


# -- the row codec (module docstring, "Rows") ----------------------------------------------------------
KEY_VALUE_FIELDS = ("label", "property", "value")


def encode_json(value: Any) -> str:
    """A JSON value as the text a row stores: compact, non-ASCII kept, map key order kept (it is part of
    the value and must survive the round trip)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def decode_json(text: str) -> Any:
    """The value ``encode_json`` (or any JSON writer) stored."""
    return json.loads(text)


def key_value_to_row(kv: dict[str, Any], *, where: str = "") -> dict[str, str]:
    """A gold key-value ``{label, property, value}`` as its row ``{label, property, value_json}``.
    Raises InputError for other keys: a typed struct cannot hold them, and they must not be lost silently."""
    if not isinstance(kv, dict) or sorted(kv) != sorted(KEY_VALUE_FIELDS):
        keys = sorted(kv) if isinstance(kv, dict) else type(kv).__name__
        raise InputError(f"{where + ': ' if where else ''}gold_key_values entry has keys {keys}, "
                         f"expected {list(KEY_VALUE_FIELDS)}")
    return {"label": kv["label"], "property": kv["property"], "value_json": encode_json(kv["value"])}


def key_value_from_row(row: dict[str, Any]) -> dict[str, Any]:
    """The gold key-value ``{label, property, value}`` of a row ``{label, property, value_json}``."""
    return {"label": row["label"], "property": row["property"], "value": decode_json(row["value_json"])}


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
    # names said as users type them (issue 20; benchmark.typed_names): {label, property, stored, typed, kind}
    typed_names: list[dict[str, str]] = field(default_factory=list)

    @property
    def chain_dependent(self) -> bool:
        return is_chain_dependent(self.chain_mode)

    def to_row(self, *, where: str = "") -> dict[str, Any]:
        """The turn as a flat, Arrow-safe row (module docstring, "Rows"); ``where`` names the turn in an
        error."""
        where = where or f"turn {self.index}"
        return {
            "index": self.index,
            "utterance": self.utterance,
            "gold_cypher": self.gold_cypher,
            "gold_columns": list(self.gold_columns),
            "gold_rows_json": encode_json(self.gold_rows),
            "phenomenon": self.phenomenon,
            "chain_mode": self.chain_mode,
            "depends_on": self.depends_on,
            "ambiguity_info_json": None if self.ambiguity_info is None else encode_json(self.ambiguity_info),
            "gold_key_values": [key_value_to_row(kv, where=where) for kv in self.gold_key_values],
            "gold_triples": list(self.gold_triples),
            "typed_names": [dict(r) for r in self.typed_names],
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "Turn":
        """The turn a ``to_row`` row holds."""
        return cls(
            index=row["index"],
            utterance=row["utterance"],
            gold_cypher=row["gold_cypher"],
            gold_columns=list(row["gold_columns"]),
            gold_rows=decode_json(row["gold_rows_json"]),
            phenomenon=row["phenomenon"],
            chain_mode=row["chain_mode"],
            depends_on=row["depends_on"],
            ambiguity_info=None if row["ambiguity_info_json"] is None else decode_json(row["ambiguity_info_json"]),
            gold_key_values=[key_value_from_row(kv) for kv in row["gold_key_values"]],
            gold_triples=list(row["gold_triples"]),
            typed_names=[dict(r) for r in row.get("typed_names") or []],  # absent in a dataset saved before it
        )

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

    def to_row(self) -> dict[str, Any]:
        """The session as one Arrow-safe row: ``id, world, persona, num_turns`` and ``turns`` (``Turn.to_row``)."""
        return {"id": self.id, "world": self.world, "persona": self.persona, "num_turns": len(self.turns),
                "turns": [t.to_row(where=f"session {self.id} turn {t.index}") for t in self.turns]}

    def chain_depth(self, index: int) -> int:
        """How many steps turn ``index``'s gold takes on top of a fresh query: 0 for an opening or a topic shift;
        for any other turn, one more than the depth of the set it builds on. An aggregation leaves its set as it
        was (DESIGN §5), so a turn that builds on an aggregation builds on that turn's own set: "how many of
        those?" after "which of those are critical?" after an opening is depth 2, and so is the turn after it
        that narrows the critical ones again."""
        source = self.set_turn(index)
        return 0 if source is None else self.chain_depth(source) + 1

    def set_turn(self, index: int) -> int | None:
        """The earlier turn whose result is the set turn ``index`` builds on: None for an opening or a topic shift;
        otherwise the turn it depends on, or, where that turn is an aggregation (which leaves its set as it was,
        DESIGN §5), the turn whose set that one counts, and so on back. Its gold is the query a follow-up's gold
        takes further: "how many of those?" after "which of those are critical?" builds on the second's set."""
        turn = self.turns[index]
        if not turn.chain_dependent or turn.depends_on is None:
            return None
        source = turn.depends_on
        while self.turns[source].chain_mode in AGGREGATION_MODES and self.turns[source].depends_on is not None:
            source = self.turns[source].depends_on
        return source

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "Session":
        """The session a ``to_row`` row holds (``num_turns`` is derived, so it is not read back)."""
        return cls(id=row["id"], world=row["world"], persona=row["persona"],
                   turns=[Turn.from_row(t) for t in row["turns"]])

    @classmethod
    def from_dict(cls, raw: dict) -> "Session":
        return cls(id=raw["id"], world=raw["world"], persona=raw["persona"],
                   turns=[Turn(**t) for t in raw["turns"]])


def worlds_interleaved(items: Iterable[T], world: Callable[[T], str] = lambda s: s.world) -> list[T]:
    """``items`` with the worlds taken in turn (each world's first item, then each world's second, ...; worlds
    in order of first appearance), so that the first N of a build, which lists its worlds one after the
    other, cover every world instead of one."""
    by_world: dict[str, list[T]] = {}
    for item in items:
        by_world.setdefault(world(item), []).append(item)
    return [group[i] for i in range(max(map(len, by_world.values()), default=0))
            for group in by_world.values() if i < len(group)]


def write_sessions(path: str | Path, sessions: Iterable[Session]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for s in sessions:
            f.write(s.to_json() + "\n")


_STR, _INT, _OPT_INT = "a string", "an integer", "an integer or null"
_TYPED_NAMES = "a list of {label, property, stored, typed, kind} strings (kind typo, partial or case)"
_SESSION_FIELDS = {"id": _STR, "world": _STR, "persona": _STR, "turns": "a non-empty list of turns"}
_TURN_FIELDS = {"index": _INT, "utterance": _STR, "gold_cypher": _STR, "gold_columns": "a list of strings",
                "gold_rows": "a list of lists", "phenomenon": _STR, "chain_mode": _STR, "depends_on": _OPT_INT,
                "ambiguity_info": "null or {utterance, clarification} strings",
                "gold_key_values": "a list of objects", "gold_triples": "a list of strings",
                "typed_names": _TYPED_NAMES}
_TURN_OPTIONAL = {"ambiguity_info", "gold_key_values", "gold_triples", "typed_names"}


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
    if kind == _TYPED_NAMES:
        return isinstance(v, list) and all(valid_record(x) for x in v)
    if kind == "a list of objects":
        return isinstance(v, list) and all(isinstance(x, dict) for x in v)
    if kind.startswith("null or"):
        return v is None or (isinstance(v, dict) and isinstance(v.get("utterance"), str)
                             and isinstance(v.get("clarification"), str))
    return isinstance(v, list) and bool(v)  # turns


def _check_fields(raw: Any, fields: dict[str, str], optional: set[str], where: str,
                  allowed: set[str] | None = None) -> None:
    if not isinstance(raw, dict):
        raise InputError(f"{where or 'the line'}: expected a JSON object, got {type(raw).__name__}")
    for name, kind in fields.items():
        if name not in raw:
            if name in optional:
                continue
            raise InputError(f"field {where}{name} is missing")
        if not _field_ok(kind, raw[name]):
            raise InputError(f"field {where}{name} must be {kind}, got {json.dumps(raw[name])[:60]}")
    unknown = sorted(set(raw) - set(fields) - (allowed or set()))
    if unknown:
        raise InputError(f"unknown field {where}{unknown[0]}")


def validate_session(raw: Any) -> None:
    """Raise InputError (a ValueError) naming the first field of a session record that is missing or of
    the wrong type."""
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
                    raise InputError(f"{path}:{lineno}: not a session record ({exc})") from None
                yield session
