"""Schema renaming for SFT: one turn shown again with its world's node labels and relationship types
renamed, consistently in the schema, the users' words and the answer.

A small model trained on six training worlds learns their names by heart: on an unseen world it writes
relationship types that sound like the question (``HOUSTINGS`` for "hosting") and labels from the training
worlds instead of reading the schema. Under renaming a name can only be found in the schema given, so
copying from it is the one thing that pays. Names are drawn from pools that no world uses (benchmark
worlds included: nothing of theirs leaks into training), so a renamed world is a new world to the model.

What changes, and where (the guided turn prompt of ``envs.prompts``):
- every ``:Label`` and ``:TYPE`` (the schema lines, the Cypher answer and a lookup's observation,
  ``[Search] (:Festival {month: 'November'})``, name them all after a colon);
- the label's noun ("film", "films", from ``benchmark.lexicon.Lexicon``) in lower case, on the lines in a
  user's words only (``User: …``, ``Current question …``, ``SEARCH_VALUES <the text as typed>``): result rows
  and capitalised entity names ("Brightwood Studios") keep their stored text.
Properties keep their names (users name them in their own words: "runtime in minutes"); a label whose noun
is also part of a string literal of the answer, a lookup or its observation keeps its name, so the values
stay the stored ones.
"""

from __future__ import annotations

import random
import re
from functools import lru_cache

from benchmark.lexicon import Lexicon, pluralize, split_identifier
from graphs.spec import all_specs

# Nouns and relationship types no world spec uses (checked against every spec at import of the pools).
LABEL_POOL = (
    "Anchor", "Archive", "Arena", "Badge", "Barrel", "Basket", "Beacon", "Bell", "Bottle", "Bridge",
    "Cabin", "Canal", "Candle", "Canyon", "Carriage", "Castle", "Cellar", "Chapel", "Charter", "Circle",
    "Cliff", "Clock", "Club", "Coin", "Comet", "Compass", "Contract", "Cottage", "Crate", "Crystal",
    "Dock", "Drum", "Engine", "Estate", "Falcon", "Farm", "Ferry", "Field", "Forge", "Fountain",
    "Garden", "Gate", "Glacier", "Harbor", "Harvest", "Hive", "Island", "Journal", "Kettle", "Kiln",
    "Ladder", "Lagoon", "Lantern", "Ledger", "Lighthouse", "Lodge", "Market", "Meadow", "Mill", "Mine",
    "Mirror", "Monument", "Mural", "Needle", "Nest", "Oasis", "Orchard", "Outpost", "Palace", "Parcel",
    "Pavilion", "Pier", "Pilgrim", "Planet", "Plaza", "Portal", "Quarry", "Raft", "Ranch", "Relic",
    "Ribbon", "River", "Saddle", "Satchel", "Scroll", "Sculpture", "Signal", "Spring", "Stable", "Stadium",
    "Statue", "Summit", "Tavern", "Tower", "Tractor", "Trail", "Tunnel", "Valley", "Vault", "Village",
    "Vineyard", "Voyage", "Wagon", "Well", "Windmill", "Workshop",
)
TYPE_POOL = (
    "ADJOINS", "ANCHORS", "ATTENDS", "BACKS", "BORDERS", "BUILDS", "CARRIES", "CHOOSES", "CLAIMED_BY",
    "CROSSES", "DEFENDS", "DELIVERS", "DEPENDS_ON", "DRAWS_FROM", "EMPLOYS", "ENDORSES", "FEEDS", "FOLLOWS",
    "FUNDS", "GUARDS", "HANDLES", "HAS_PART", "INCLUDES", "INSPECTS", "JOINS", "KEEPS", "LINKED_TO",
    "LOCATED_IN", "LOOKS_AFTER", "MAINTAINS", "MANAGES", "MEASURES", "MOVES_TO", "NAMED_AFTER", "NEIGHBORS",
    "OBSERVES", "OVERSEES", "OWNS", "PART_OF", "PLANS", "POINTS_TO", "PRECEDES", "PROTECTS", "PROVIDES",
    "REACHES", "RECORDS", "REPAIRS", "REPORTS_TO", "RESTS_ON", "RUNS", "SENDS", "SERVES", "SHARES",
    "SIGNED_BY", "SITS_IN", "SPONSORS", "SUPPLIES", "SUPPORTS", "TENDS", "TIED_TO", "TOUCHES", "TRACKS",
    "TRIGGERS", "USES", "VISITS", "WATCHES", "WEARS", "WRAPS",
)


# the lines that carry a user's own words: the conversation's, the question's, and a lookup of the text as typed
USERS_WORDS = ("User: ", "Current question (", "SEARCH_VALUES ")


@lru_cache(maxsize=1)
def _pools() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The pools less every label and relationship type of any world spec."""
    specs = all_specs()
    labels = {label for s in specs for label in s.labels}
    types = {t for s in specs for t in s.relationship_types}
    return tuple(x for x in LABEL_POOL if x not in labels), tuple(x for x in TYPE_POOL if x not in types)


def _literals(text: str) -> str:
    """The string literals of a Cypher text, lower-cased and joined (to check nouns against)."""
    return " ".join(m.group(1).lower() for m in re.finditer(r"'((?:[^'\\]|\\.)*)'", text))


def renaming(world: str, rng: random.Random, *, answer: str = "") -> tuple[dict[str, str], dict[str, str]]:
    """A random renaming of ``world``: ({old label: new}, {old type: new}), new names all distinct. A label
    whose noun occurs in a string literal of ``answer`` is left out (module docstring)."""
    lex = Lexicon.for_world(world)
    labels, types = _pools()
    literals = _literals(answer)
    keep = {label for label in lex.spec.labels
            if any(re.search(rf"\b{re.escape(form)}\b", literals) for form in _noun_forms(label, lex))}
    old_labels = [label for label in lex.spec.labels if label not in keep]
    old_types = lex.spec.relationship_types
    return (dict(zip(old_labels, rng.sample(labels, len(old_labels)))),
            dict(zip(old_types, rng.sample(types, len(old_types)))))


def _noun_forms(label: str, lex: Lexicon | None) -> tuple[str, str]:
    if lex is not None:
        return lex.noun(label, plural=False), lex.noun(label)
    singular = split_identifier(label)
    return singular, pluralize(singular)


def rename_text(text: str, world: str, labels: dict[str, str], types: dict[str, str], *,
                users_lines: bool) -> str:
    """``text`` with every ``:Name`` of ``labels``/``types`` renamed; with ``users_lines``, the labels' lower-case
    nouns renamed too on the lines in a user's words (``User: …``, ``Current question …``, and a lookup of the
    text as typed, ``SEARCH_VALUES …``)."""
    names = {**labels, **types}
    if names:
        pattern = re.compile(r"(?<=:)(" + "|".join(sorted(map(re.escape, names), key=len, reverse=True)) + r")\b")
        text = pattern.sub(lambda m: names[m.group(1)], text)
    if not users_lines or not labels:
        return text
    lex = Lexicon.for_world(world)
    words: dict[str, str] = {}
    for old, new in labels.items():
        (old_one, old_many), (new_one, new_many) = _noun_forms(old, lex), _noun_forms(new, None)
        words[old_many], words[old_one] = new_many, new_one
    word = re.compile(r"\b(" + "|".join(sorted(map(re.escape, words), key=len, reverse=True)) + r")\b")
    out = []
    for line in text.split("\n"):
        if line.startswith(USERS_WORDS):
            line = word.sub(lambda m: words[m.group(1)], line)
        out.append(line)
    return "\n".join(out)


def _sorted_schema(text: str) -> str:
    """The schema's indented lines re-sorted as the schema renders them (labels by name, relationships by
    type), so that the order does not give the old names away."""
    lines = text.split("\n")
    out: list[str] = []
    block: list[str] = []

    def key(line: str) -> str:
        m = re.search(r"-\[:(\w+)", line) or re.search(r"\(:(\w+)", line)
        return m.group(1) if m else line

    for line in lines + [""]:
        if line.startswith("  ("):
            block.append(line)
            continue
        out += sorted(block, key=key)
        block = []
        out.append(line)
    return "\n".join(out[:-1])


def named_texts(messages: list[dict[str, str]]) -> str:
    """What of a guided turn conversation names stored values: its answers and lookups, and the lookups'
    observations (``[Search] (:Label {property: 'value'})``); ``renaming`` keeps a label whose noun is in one."""
    return "\n".join(m["content"] for m in messages
                     if m["role"] == "assistant" or m["content"].startswith("[Search]"))


def renamed_conversation(messages: list[dict[str, str]], world: str, rng: random.Random | None = None, *,
                         names: tuple[dict[str, str], dict[str, str]] | None = None) -> list[dict[str, str]]:
    """A guided turn conversation (system, user turn prompt, its lookups and their observations, the answer)
    with the world renamed: the system message as it is, the user message's schema and users' lines, the
    lookups' words and observed labels, the answer. ``names``: the renaming to apply (``renaming``), else one
    drawn with ``rng``."""
    labels, types = names if names is not None else renaming(world, rng, answer=named_texts(messages))
    out = []
    for m in messages:
        if m["role"] == "system":
            out.append(dict(m))
        else:
            text = rename_text(m["content"], world, labels, types, users_lines=True)
            out.append({**m, "content": _sorted_schema(text) if m["role"] == "user" else text})
    return out
