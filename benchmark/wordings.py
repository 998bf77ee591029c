"""The utterance wordings: ``benchmark/wordings.yaml`` loaded once, checked and read-only.

The file is data (its own comments say what each section means); :mod:`benchmark.templates` renders
it. :func:`load_wordings` reads a wordings file into :class:`Wordings` (tuples, frozensets and
read-only mappings) and raises :class:`WordingsError` naming the file and the entry on a malformed one:
an unknown or missing section, family, persona or register, a wording that is not a non-empty string
or whose ``{placeholders}`` do not parse, an unknown wrapper annotation.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping

import yaml

from cypherturn.errors import InputError

REGISTERS = ("plain", "terse", "tech", "nonnative")
SECTIONS = ("questions", "parts", "topic_shift_leads", "personas", "clarifications")
# the optional parts around a later turn's core, per register (see the file's "parts" section)
PARTS = ("openers", "tails")
# a wrapper's annotations: which turns it may open (turn) and which questions it may follow (fits)
TURNS = ("first", "later")
FITS = ("listing", "figure")


class WordingsError(InputError):
    """A wordings file is malformed; the message names the file and the offending entry."""


@dataclass(frozen=True)
class Wordings:
    questions: Mapping[str, Mapping[str, tuple[str, ...]]]  # family -> register -> core wordings
    topic_shift_leads: tuple[str, ...]
    registers: Mapping[str, str]  # persona -> register
    wrappers: Mapping[str, tuple[str, ...]]  # persona -> wrappers, in the file's order
    first_turn_only: frozenset[str]
    later_turns_only: frozenset[str]
    listing_only: frozenset[str]
    figure_only: frozenset[str]
    clarifications: Mapping[str, str]  # ambiguous family -> the user's answer to a clarifying question
    openers: Mapping[str, tuple[str, ...]]  # register -> short openers said before a later turn's core
    tails: Mapping[str, tuple[str, ...]]  # register -> short tails said after a core


def default_path() -> Path:
    return Path(str(resources.files("benchmark") / "wordings.yaml"))


_FORMATTER = string.Formatter()


class _Reader:
    """Checks one file's entries; every error names the file and where in it."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, where: str, message: str) -> WordingsError:
        return WordingsError(f"wordings file {self.path}, {where}: {message}")

    def mapping(self, raw: Any, where: str, keys: Iterable[str] | None = None) -> dict:
        if not isinstance(raw, dict) or not raw:
            raise self.fail(where, "must be a non-empty mapping")
        if keys is not None:
            keys = tuple(keys)
            unknown = [k for k in raw if k not in keys]
            missing = [k for k in keys if k not in raw]
            if unknown or missing:
                raise self.fail(where, f"unknown {unknown} / missing {missing}; expected exactly {list(keys)}")
        return raw

    def wording(self, raw: Any, where: str) -> str:
        if not isinstance(raw, str) or not raw.strip():
            raise self.fail(where, f"a wording must be a non-empty string, got {raw!r}")
        try:
            list(_FORMATTER.parse(raw))
        except ValueError as exc:
            raise self.fail(where, f"{raw!r}: {exc}") from exc
        return raw

    def wordings(self, raw: Any, where: str) -> tuple[str, ...]:
        if not isinstance(raw, list) or not raw:
            raise self.fail(where, "must be a non-empty list of wordings")
        return tuple(self.wording(w, f"{where}[{i}]") for i, w in enumerate(raw))


def _questions(r: _Reader, raw: Any, families: Iterable[str]) -> dict[str, Mapping[str, tuple[str, ...]]]:
    """family -> register -> core wordings, every family and every register present."""
    questions: dict[str, Mapping[str, tuple[str, ...]]] = {}
    for family, regs in r.mapping(raw, "questions", families).items():
        regs = r.mapping(regs, f"questions.{family}", REGISTERS)
        questions[family] = MappingProxyType({reg: r.wordings(regs[reg], f"questions.{family}.{reg}")
                                              for reg in REGISTERS})
    return questions


def _wrapper(r: _Reader, w: Any, at: str, annotated: dict[str, set[str]]) -> str:
    """One wrapper's text; a wrapper given as a mapping adds its text to the sets its ``turn`` and
    ``fits`` annotations name."""
    if isinstance(w, dict):
        w = r.mapping(w, at)
        unknown = [k for k in w if k not in ("text", "turn", "fits")]
        if unknown or "text" not in w:
            raise r.fail(at, f"a wrapper mapping has 'text' and optionally 'turn', 'fits'; got {list(w)}")
        for key, allowed in (("turn", TURNS), ("fits", FITS)):
            if key in w and w[key] not in allowed:
                raise r.fail(f"{at}.{key}", f"{w[key]!r} is not one of {list(allowed)}")
            if key in w:
                annotated[w[key]].add(r.wording(w["text"], at))
        w = w["text"]
    text = r.wording(w, at)
    if "{core}" not in text and "{lc}" not in text:
        raise r.fail(at, f"{text!r}: a wrapper holds {{core}} or {{lc}}")
    return text


def _parts(r: _Reader, raw: Any, annotated: dict[str, set[str]]):
    """(register -> openers, register -> tails); a tail given as a mapping {text, fits} adds its text
    to the set its ``fits`` names, as a wrapper's does."""
    raw = r.mapping(raw, "parts", PARTS)
    out = []
    for part in PARTS:
        regs = r.mapping(raw[part], f"parts.{part}", REGISTERS)
        by_register = {}
        for reg in REGISTERS:
            where = f"parts.{part}.{reg}"
            if not isinstance(regs[reg], list) or not regs[reg]:
                raise r.fail(where, "must be a non-empty list")
            texts = []
            for i, w in enumerate(regs[reg]):
                at = f"{where}[{i}]"
                if isinstance(w, dict) and part == "tails":
                    w = r.mapping(w, at)
                    if [k for k in w if k not in ("text", "fits")] or "text" not in w or w.get("fits", FITS[0]) not in FITS:
                        raise r.fail(at, f"a tail mapping has 'text' and optionally 'fits' ({list(FITS)}); got {w}")
                    if "fits" in w:
                        annotated[w["fits"]].add(r.wording(w["text"], at))
                    w = w["text"]
                text = r.wording(w, at)
                if "{" in text:
                    raise r.fail(at, f"{text!r}: a part is literal text, no slots")
                texts.append(text)
            by_register[reg] = tuple(texts)
        out.append(MappingProxyType(by_register))
    return out[0], out[1]


def _personas(r: _Reader, raw: Any, personas: Iterable[str]):
    """(persona -> register, persona -> wrappers, annotation -> the wrapper texts it marks)."""
    registers: dict[str, str] = {}
    wrappers: dict[str, tuple[str, ...]] = {}
    annotated: dict[str, set[str]] = {"first": set(), "later": set(), "listing": set(), "figure": set()}
    for persona, style in r.mapping(raw, "personas", personas).items():
        where = f"personas.{persona}"
        style = r.mapping(style, where, ("register", "wrappers"))
        if style["register"] not in REGISTERS:
            raise r.fail(f"{where}.register", f"{style['register']!r} is not one of {list(REGISTERS)}")
        registers[persona] = style["register"]
        if not isinstance(style["wrappers"], list) or not style["wrappers"]:
            raise r.fail(f"{where}.wrappers", "must be a non-empty list")
        wrappers[persona] = tuple(_wrapper(r, w, f"{where}.wrappers[{i}]", annotated)
                                  for i, w in enumerate(style["wrappers"]))
    # an annotation belongs to a wrapper's text: one used by two personas would carry it to both
    counts: dict[str, int] = {}
    for texts in wrappers.values():
        for t in texts:
            counts[t] = counts.get(t, 0) + 1
    for t in sorted(set().union(*annotated.values())):
        if counts[t] > 1:
            raise r.fail("personas", f"the annotated wrapper {t!r} appears {counts[t]} times; it must be unique")
    return registers, wrappers, annotated


def load_wordings(path: str | Path | None = None, *, families: Iterable[str], personas: Iterable[str],
                  ambiguous: Iterable[str]) -> Wordings:
    """The wordings of ``path`` (default: the shipped ``benchmark/wordings.yaml``), checked to name
    exactly ``families`` (their questions), ``personas`` and the ``ambiguous`` families (their
    clarifications)."""
    path = default_path() if path is None else Path(path)
    r = _Reader(path)
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except OSError as exc:
        raise WordingsError(f"wordings file {path}: cannot read it: {exc}") from exc
    except yaml.YAMLError as exc:
        raise WordingsError(f"wordings file {path}: not valid YAML: {exc}") from exc
    raw = r.mapping(raw, "top level", SECTIONS)
    questions = _questions(r, raw["questions"], families)
    registers, wrappers, annotated = _personas(r, raw["personas"], personas)
    openers, tails = _parts(r, raw["parts"], annotated)
    clarifications = r.mapping(raw["clarifications"], "clarifications", ambiguous)
    return Wordings(
        questions=MappingProxyType(questions),
        topic_shift_leads=r.wordings(raw["topic_shift_leads"], "topic_shift_leads"),
        registers=MappingProxyType(registers),
        wrappers=MappingProxyType(wrappers),
        first_turn_only=frozenset(annotated["first"]),
        later_turns_only=frozenset(annotated["later"]),
        listing_only=frozenset(annotated["listing"]),
        figure_only=frozenset(annotated["figure"]),
        clarifications=MappingProxyType({f: r.wording(w, f"clarifications.{f}") for f, w in clarifications.items()}),
        openers=openers,
        tails=tails,
    )
