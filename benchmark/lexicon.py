"""The words users say for one world's schema: nouns for labels, phrases for properties and
relationships, and the verbatim text of values.

Built from a :class:`graphs.spec.WorldSpec`. Where the spec gives words (``noun`` on a label, ``phrase``
on a property, ``phrase: {forward, backward}`` on a relationship) they are used; otherwise defaults are
derived: a label ``StarSystem`` is "star system" / "star systems", a property ``tax_rate`` is "tax rate",
an unnamed link is "connected to".

Relationship phrases read in two directions. For ``(:Emperor)-[:GOVERNS]->(:Province)`` with
``phrase: {forward: governed by, backward: governing}``::

    lex.link("GOVERNS", "Emperor", "Province", "forward")   # "provinces governed by them"
    lex.link("GOVERNS", "Emperor", "Province", "backward")  # "emperors governing them"

i.e. ``forward`` names the relationship's targets seen from its sources, ``backward`` its sources seen
from its targets; ``source_label``/``target_label`` are always the relationship's own ``from``/``to``.

:meth:`Lexicon.value` writes a value exactly as later checks look for it: strings as they are, numbers
as ``str(v)`` (``0.35`` -> "0.35", ``1200.0`` -> "1200.0"), booleans as "yes"/"no", dates in ISO form.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from cypherturn.errors import InputError
from graphs.spec import WorldSpec, get_spec

DIRECTIONS = ("forward", "backward")
FALLBACK_LINK = "connected to"

_IRREGULAR_PLURALS = {
    "person": "people", "child": "children", "man": "men", "woman": "women", "mouse": "mice",
    "goose": "geese", "foot": "feet", "tooth": "teeth", "ox": "oxen", "shelf": "shelves",
    "leaf": "leaves", "wolf": "wolves", "knife": "knives", "life": "lives", "half": "halves",
    "thief": "thieves", "elf": "elves", "calf": "calves", "loaf": "loaves", "wife": "wives",
    "species": "species", "series": "series", "sheep": "sheep", "fish": "fish", "deer": "deer",
    "criterion": "criteria", "phenomenon": "phenomena", "datum": "data", "index": "indices",
    "matrix": "matrices", "vertex": "vertices", "cactus": "cacti", "fungus": "fungi",
    "nucleus": "nuclei", "radius": "radii", "hero": "heroes", "potato": "potatoes",
    "tomato": "tomatoes", "echo": "echoes", "volcano": "volcanoes",
}


def split_identifier(identifier: str) -> str:
    """``StarSystem`` -> "star system", ``HTTPServer`` -> "http server", ``tax_rate`` -> "tax rate"."""
    text = identifier.replace("_", " ").replace("-", " ")
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", text)
    text = re.sub(r"(?<=[A-Z])(?=[A-Z][a-z])", " ", text)
    return " ".join(text.split()).lower()


def pluralize(word: str) -> str:
    """English plural of a noun phrase's last word (``star system`` -> ``star systems``)."""
    if not word:
        return word
    head, _, last = word.rpartition(" ")
    prefix = head + " " if head else ""
    lower = last.lower()
    if lower in _IRREGULAR_PLURALS:
        plural = _IRREGULAR_PLURALS[lower]
        if last[:1].isupper():
            plural = plural[:1].upper() + plural[1:]
    elif re.search(r"[^aeiou]y$", lower):
        plural = last[:-1] + "ies"
    elif lower.endswith("sis"):  # analysis -> analyses, diagnosis -> diagnoses
        plural = last[:-2] + "es"
    elif re.search(r"(s|x|z|ch|sh)$", lower):
        plural = last + "es"
    else:
        plural = last + "s"
    return prefix + plural


def format_value(value: Any) -> str:
    """The verbatim text of a value (see the module docstring)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    iso = getattr(value, "iso_format", None)  # neo4j.time.Date and friends
    if callable(iso):
        return str(iso())
    return str(value)


class Lexicon:
    """Words for one world (see the module docstring)."""

    def __init__(self, spec: WorldSpec):
        self.spec = spec
        self._nouns: dict[str, tuple[str, str]] = {}
        for node in spec.nodes:
            if node.noun:
                self._nouns[node.label] = (node.noun[0], node.noun[1])
            else:
                singular = split_identifier(node.label)
                self._nouns[node.label] = (singular, pluralize(singular))
        self._props: dict[tuple[str, str], str] = {}
        for node in spec.nodes:
            for p in node.properties:
                if p.phrase:
                    self._props[(node.label, p.name)] = p.phrase
        for rel in spec.relationships:
            for p in rel.properties:
                if p.phrase:
                    self._props.setdefault((rel.type, p.name), p.phrase)
        self._links: dict[tuple[str, str, str], tuple[str | None, str | None]] = {
            (r.type, r.source, r.target): (r.forward, r.backward) for r in spec.relationships}

    @classmethod
    def for_world(cls, world: str) -> "Lexicon":
        return cls(get_spec(world))

    def noun(self, label: str, plural: bool = True) -> str:
        """How users name nodes of ``label`` ("provinces"; ``plural=False``: "province")."""
        if label not in self._nouns:
            singular = split_identifier(label)
            self._nouns[label] = (singular, pluralize(singular))
        singular, plural_form = self._nouns[label]
        return plural_form if plural else singular

    def prop(self, owner: str, name: str) -> str:
        """How users name property ``name`` of ``owner`` (a label or a relationship type)."""
        phrase = self._props.get((owner, name))
        return phrase if phrase else split_identifier(name)

    def link(self, rel_type: str, source_label: str, target_label: str, direction: str) -> str:
        """The phrase for a relationship read in ``direction`` (see the module docstring)."""
        if direction not in DIRECTIONS:
            raise InputError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
        words = self._links.get((rel_type, source_label, target_label))
        if words is None:
            same_type = [w for (t, _, _), w in self._links.items() if t == rel_type]
            words = same_type[0] if len(same_type) == 1 else (None, None)
        phrase = words[0] if direction == "forward" else words[1]
        return phrase or FALLBACK_LINK

    @staticmethod
    def value(v: Any) -> str:
        """The verbatim text of a value (see the module docstring)."""
        return format_value(v)
