"""Deterministic graph generator: (spec, seed, scale) -> the same graph and checksum, every time.

Each property and each relationship type draws from its own random stream, seeded from
(seed, label or type, property), so adding a property to a spec does not reshuffle the others.
Only ``random.Random`` methods whose output is fixed across Python versions for an integer seed are
used (``random``, ``randint``/``randrange``, ``choice``, ``sample``, ``shuffle``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import random
from dataclasses import dataclass, field
from typing import Any

from cypherturn.errors import InputError
from graphs.checksum import graph_checksum
from graphs.spec import PropertySpec, RelationshipSpec, WorldSpec, _to_date

_ONSETS = ["b", "br", "c", "d", "dr", "f", "g", "gr", "h", "k", "kh", "l", "m", "n", "p", "qu", "r",
           "s", "sh", "t", "th", "tr", "v", "z", "zh", "y", "ph", "st"]
_VOWELS = ["a", "e", "i", "o", "u", "a", "e", "o", "ae", "ia"]
_CODAS = ["", "", "", "n", "r", "l", "s", "th", "x", "m", "nd", "rk"]
_SIMILAR_SUFFIXES = ["a", "o", "en", "is", "ar", "ov", "el"]


@dataclass
class Relationship:
    type: str
    source_label: str
    source: int  # index into Graph.nodes[source_label]
    target_label: str
    target: int
    properties: dict[str, Any]


@dataclass
class Graph:
    """A generated world: node property maps per label (in generation order) and relationships."""

    spec: WorldSpec
    seed: int
    scale: float
    nodes: dict[str, list[dict[str, Any]]]
    relationships: list[Relationship] = field(default_factory=list)

    @property
    def node_count(self) -> int:
        return sum(len(v) for v in self.nodes.values())

    @property
    def relationship_count(self) -> int:
        return len(self.relationships)

    def key_of(self, label: str, index: int) -> Any:
        return self.nodes[label][index][self.spec.node(label).key]

    def checksum(self) -> str:
        nodes = [(idx, [label], props) for label, rows in self.nodes.items()
                 for idx, props in ((f"{label}:{i}", p) for i, p in enumerate(rows))]
        rels = [(r.type, f"{r.source_label}:{r.source}", f"{r.target_label}:{r.target}", r.properties)
                for r in self.relationships]
        return graph_checksum(nodes, rels)


def _stream(seed: int, *parts: str) -> random.Random:
    digest = hashlib.sha256(":".join([str(seed), *parts]).encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def scaled(count: int, scale: float) -> int:
    return max(1, round(count * scale))


def _word(rng: random.Random) -> str:
    syllables = rng.choice((2, 2, 2, 2, 3))
    text = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables))
    return (text + rng.choice(_CODAS)).capitalize()


def _names(prop: PropertySpec, count: int, rng: random.Random) -> list[str]:
    """Unique invented names; a share ``similar`` are near-copies of an earlier name.

    A near-copy changes the ending of one invented word only (never the pattern's fixed words), so
    "Temple of Varos" may gain a sibling "Temple of Varen".
    """
    names: list[str] = []
    parts_of: list[list[tuple[str, bool]]] = []  # per name: (text, invented?) pieces
    seen: set[str] = set()
    while len(names) < count:
        if parts_of and rng.random() < prop.similar:
            parts = list(rng.choice(parts_of))
            invented = [i for i, (text, inv) in enumerate(parts) if inv and len(text) > 3]
            if not invented:
                continue
            i = rng.choice(invented)
            parts[i] = (parts[i][0][:-1] + rng.choice(_SIMILAR_SUFFIXES), True)
        else:
            pieces = rng.choice(prop.patterns).split("{w}")
            parts = [(pieces[0], False)]
            for fixed in pieces[1:]:
                parts.append((_word(rng), True))
                parts.append((fixed, False))
        candidate = "".join(text for text, _ in parts)
        if candidate not in seen:
            seen.add(candidate)
            names.append(candidate)
            parts_of.append(parts)
    return names


def _value(prop: PropertySpec, rng: random.Random) -> Any:
    if prop.values:
        if prop.weights:
            # cumulative-weight pick written out so it only depends on rng.random()
            total = float(sum(prop.weights))
            x = rng.random() * total
            acc = 0.0
            for value, weight in zip(prop.values, prop.weights):
                acc += weight
                if x < acc:
                    return value
            return prop.values[-1]
        return rng.choice(prop.values)
    if prop.type == "int":
        return rng.randint(int(prop.min), int(prop.max))
    if prop.type == "float":
        return round(prop.min + (prop.max - prop.min) * rng.random(), prop.decimals)
    if prop.type == "bool":
        return rng.random() < prop.p
    if prop.type == "date":
        lo, hi = _to_date("", "", prop.min), _to_date("", "", prop.max)
        return lo + dt.timedelta(days=rng.randint(0, (hi - lo).days))
    raise AssertionError(f"no generator for {prop}")  # parse_spec rejects this earlier


def _property_columns(props: tuple[PropertySpec, ...], count: int, seed: int,
                      owner: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{} for _ in range(count)]
    for prop in props:
        rng = _stream(seed, owner, prop.name)
        if prop.gen == "name":
            column: list[Any] = _names(prop, count, rng)
        elif prop.gen == "serial":
            column = [prop.pattern.format(n=i + 1) for i in range(count)]
        else:
            column = [_value(prop, rng) for _ in range(count)]
        nulls = _stream(seed, owner, prop.name, "null")
        for row, value in zip(rows, column):
            if prop.null_rate and nulls.random() < prop.null_rate:
                continue
            row[prop.name] = value
    return rows


def _level_sizes(n: int, levels: int) -> list[int]:
    """Level sizes growing by ~2x from the top, each at least 1, summing to n (n >= levels)."""
    weights = [2 ** k for k in range(levels)]
    sizes = [max(1, int(n * w / sum(weights))) for w in weights]
    sizes[-1] += n - sum(sizes)
    while sizes[-1] < 1:  # tiny n: borrow from the widest upper level
        j = max(range(levels - 1), key=lambda k: sizes[k])
        sizes[j] -= 1
        sizes[-1] += 1
    return sizes


def _sample_excluding(rng: random.Random, n: int, k: int, excluded: int | None) -> list[int]:
    """k distinct ints from range(n) without ``excluded``, in O(k) (no candidate list)."""
    if excluded is None:
        return sorted(rng.sample(range(n), min(k, n)))
    picks = rng.sample(range(n - 1), min(k, n - 1))
    return sorted(p + 1 if p >= excluded else p for p in picks)


def _edges(rel: RelationshipSpec, n_source: int, n_target: int, rng: random.Random) -> list[tuple[int, int]]:
    same = rel.source == rel.target
    edges: list[tuple[int, int]] = []
    if rel.levels is not None:
        levels = min(rel.levels, n_source)
        sizes = _level_sizes(n_source, levels)
        starts = [sum(sizes[:k]) for k in range(levels)]
        for k in range(1, levels):
            for node in range(starts[k], starts[k] + sizes[k]):
                parent = starts[k - 1] + rng.randrange(sizes[k - 1])
                extra = rng.randint(*rel.per_source) - 1
                # extra links go to any higher level (indices below this level's start)
                targets = {parent, *_sample_excluding(rng, starts[k], extra, parent)}
                edges.extend((node, t) for t in sorted(targets))
        return edges
    if rel.per_source is not None:
        for s in range(n_source):
            targets = _sample_excluding(rng, n_target, rng.randint(*rel.per_source), s if same else None)
            edges.extend((s, t) for t in targets)
        return edges
    for t in range(n_target):
        sources = _sample_excluding(rng, n_source, rng.randint(*rel.per_target), t if same else None)
        edges.extend((s, t) for s in sources)
    return edges


def generate(spec: WorldSpec, seed: int | None = None, scale: float = 1.0) -> Graph:
    """Generate the world's graph. Same (spec, seed, scale) -> identical graph and checksum."""
    if scale <= 0:
        raise InputError(f"scale must be positive, got {scale}")
    seed = spec.seed if seed is None else int(seed)
    nodes: dict[str, list[dict[str, Any]]] = {}
    for node in spec.nodes:
        nodes[node.label] = _property_columns(node.properties, scaled(node.count, scale), seed, node.label)
    graph = Graph(spec=spec, seed=seed, scale=scale, nodes=nodes)
    for rel in spec.relationships:
        rng = _stream(seed, "rel", rel.type, rel.source, rel.target)
        pairs = _edges(rel, len(nodes[rel.source]), len(nodes[rel.target]), rng)
        props = _property_columns(rel.properties, len(pairs), seed, f"rel:{rel.type}:{rel.source}:{rel.target}")
        graph.relationships.extend(
            Relationship(rel.type, rel.source, s, rel.target, t, p) for (s, t), p in zip(pairs, props))
    return graph

