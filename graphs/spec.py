"""World specs: the declarative description of one synthetic property graph.

A spec is a YAML file in ``graphs/specs/`` (one per world). Its format::

    world: ancient_empire          # identifier, equal to the file name without .yaml
    title: Ancient Empire
    split: benchmark               # benchmark | training
    seed: 1101                     # default generator seed
    topology: directed cycle ...   # one line saying what structure the world exercises
    nodes:
      - label: Emperor
        count: 24                  # multiplied by the scale factor
        key: name                  # the unique display property (indexed, used to link edges)
        noun: [emperor, emperors]  # optional: how users name it (default: from the label)
        properties:
          - {name: name, type: string, gen: name, patterns: ["{w} {w}"], similar: 0.1}
          - {name: born, type: int, min: -300, max: 200}
          - {name: treasury, type: float, min: 1000, max: 90000, decimals: 2}
          - {name: dynasty, type: string, values: [Aurel, Corvin], weights: [2, 1]}
          - {name: epithet, type: string, values: [the Bold, the Wise], null_rate: 0.4}
          - {name: deified, type: bool, p: 0.3}
          - {name: legions, type: int, min: 1, max: 30, additive: true}  # a sum means something
          - {name: cohort, type: int, min: 1, max: 9, comparable: false}  # an ordinal: no max/avg
          - {name: crowned, type: date, min: "0900-01-01", max: "0990-12-31"}
          - {name: code, type: string, gen: serial, pattern: "EMP-{n:03d}"}
    relationships:
      - type: RULES
        from: Emperor
        to: Province
        per_target: [1, 1]         # every Province gets exactly one ruler   (or per_source: [a, b])
        phrase: {forward: governed by, backward: governing}  # optional, for utterances (see below)
        properties:
          - {name: since, type: int, min: 100, max: 900}
      - type: SERVES_UNDER         # a self-relationship laid out in levels (hierarchies, citations)
        from: Official
        to: Official
        layered: {levels: 6, per_source: [1, 1]}
      - type: ALLIED_WITH          # symmetric: stored once per pair, read in both directions
        from: Emperor
        to: Emperor
        symmetric: true
        per_source: [0, 2]

Value generators: ``gen: name`` (invented words filling ``patterns``; ``similar`` is the share of
names derived from another name of the same label, for entity-resolution practice), ``gen: serial``
(``pattern`` formatted with the 1-based index ``n``), ``values`` (categorical, optional ``weights``),
numeric ``min``/``max`` (``decimals`` for floats), ``p`` for booleans, ``min``/``max`` ISO dates.
``null_rate`` makes a property optional: that share of nodes lack it. Numeric properties may say what
aggregates mean for them: ``additive: true`` (a total over several entities means something: a
population, a budget; not an age, a year or a rating) and ``comparable: false`` (max, min and average
mean nothing: a jersey number). The session generator sums only additive properties and takes
max/min/avg only over comparable ones. ``size: true`` marks a property that measures how big an entity is
(a population, a capacity, a crew, a length): only those are meant by "the big ones" / "the small ones".
``top_is_low: true`` marks a rank where 1 is the top (a court rank): "top" and "bottom" run against the
number, so no wording that leaves the property out ranks or cuts by it. Neither changes the graph.
A self-relationship may be ``symmetric: true`` (an alliance:
each pair is stored once, in either direction, and every query reads it both ways). Edge strategies:
``per_source: [a, b]`` (each source links to a..b distinct targets), ``per_target: [a, b]`` (each target
is reached from a..b distinct sources), ``layered`` (self-relationships only: nodes sit in ``levels``
levels; each node below the top links to one node of the level above plus up to ``per_source[1] - 1``
more in any higher level, so the longest chain has exactly ``levels - 1`` hops).

Words for utterances (optional; the session generator derives defaults): ``noun`` on a label, ``phrase``
on a property ("reign length"), and ``phrase: {forward, backward}`` on a relationship, read as
"<target nouns> FORWARD <sources>" ("provinces governed by them") and "<source nouns> BACKWARD
<targets>" ("emperors governing them").
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from cypherturn.errors import InputError
from cypherturn.lru import LRUCache

SPLITS = ("benchmark", "training")
TYPES = ("string", "int", "float", "bool", "date")


class SpecError(InputError):
    """A world spec is malformed; the message names the world and the offending entry."""


@dataclass(frozen=True)
class PropertySpec:
    name: str
    type: str
    gen: str | None = None  # name | serial | None (values / numeric / bool / date by type)
    values: tuple[Any, ...] = ()
    weights: tuple[float, ...] = ()
    min: Any = None
    max: Any = None
    decimals: int = 2
    p: float = 0.5
    patterns: tuple[str, ...] = ()
    pattern: str | None = None
    similar: float = 0.0
    null_rate: float = 0.0
    phrase: str | None = None  # how users say it ("reign length"); default: the name without underscores
    additive: bool = False  # a sum over several entities means something (population, budget; not age, year)
    comparable: bool = True  # max / min / avg mean something (false for ordinals such as a jersey number)
    size: bool = False  # how big an entity is (population, capacity, crew): "the big ones" means more of it
    top_is_low: bool = False  # 1 is the top (a court rank): "high" and "low" read against the number


@dataclass(frozen=True)
class NodeSpec:
    label: str
    count: int
    key: str
    properties: tuple[PropertySpec, ...]
    noun: tuple[str, str] | None = None  # (singular, plural) as users say it; default from the label


@dataclass(frozen=True)
class RelationshipSpec:
    type: str
    source: str
    target: str
    per_source: tuple[int, int] | None = None
    per_target: tuple[int, int] | None = None
    levels: int | None = None  # layered strategy
    properties: tuple[PropertySpec, ...] = ()
    # How users say the link: "<targets> {forward} <sources>" and "<sources> {backward} <targets>",
    # e.g. GOVERNS (Emperor->Province): forward "governed by", backward "governing".
    forward: str | None = None
    backward: str | None = None
    symmetric: bool = False  # A-[R]->B means the same as B-[R]->A (alliances): queries read it both ways


@dataclass(frozen=True)
class WorldSpec:
    world: str
    title: str
    split: str
    seed: int
    topology: str
    nodes: tuple[NodeSpec, ...]
    relationships: tuple[RelationshipSpec, ...] = field(default=())

    def node(self, label: str) -> NodeSpec:
        for node in self.nodes:
            if node.label == label:
                return node
        raise KeyError(label)

    @property
    def labels(self) -> list[str]:
        return [n.label for n in self.nodes]

    @property
    def relationship_types(self) -> list[str]:
        return sorted({r.type for r in self.relationships})


def _fail(world: str, where: str, message: str) -> SpecError:
    return SpecError(f"world spec {world!r}, {where}: {message}")


def _pair(world: str, where: str, value: Any) -> tuple[int, int]:
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or not all(isinstance(v, int) and v >= 0 for v in value) or value[0] > value[1]):
        raise _fail(world, where, f"expected [min, max] of non-negative integers, got {value!r}")
    return int(value[0]), int(value[1])


def _property(world: str, where: str, raw: dict) -> PropertySpec:
    if not isinstance(raw, dict) or "name" not in raw or "type" not in raw:
        raise _fail(world, where, f"a property needs 'name' and 'type', got {raw!r}")
    where = f"{where}.{raw['name']}"
    known = set(PropertySpec.__dataclass_fields__)
    unknown = set(raw) - known
    if unknown:
        raise _fail(world, where, f"unknown keys {sorted(unknown)}")
    if raw["type"] not in TYPES:
        raise _fail(world, where, f"type must be one of {TYPES}, got {raw['type']!r}")
    kwargs = dict(raw)
    for key in ("values", "weights", "patterns"):
        if key in kwargs:
            kwargs[key] = tuple(kwargs[key])
    prop = PropertySpec(**kwargs)
    if prop.gen not in (None, "name", "serial"):
        raise _fail(world, where, f"gen must be 'name' or 'serial', got {prop.gen!r}")
    if prop.gen == "name" and (prop.type != "string" or not prop.patterns):
        raise _fail(world, where, "gen: name needs type string and a non-empty 'patterns' list")
    if prop.gen == "serial" and (prop.type != "string" or not prop.pattern):
        raise _fail(world, where, "gen: serial needs type string and a 'pattern'")
    if prop.gen is None and not prop.values and prop.type in ("int", "float", "date"):
        if prop.min is None or prop.max is None:
            raise _fail(world, where, f"a {prop.type} property needs 'min' and 'max' (or 'values')")
        if prop.type == "date":
            lo, hi = _to_date(world, where, prop.min), _to_date(world, where, prop.max)
            if lo > hi:
                raise _fail(world, where, "min is after max")
        elif prop.min > prop.max:
            raise _fail(world, where, "min is greater than max")
    if prop.gen is None and prop.type == "string" and not prop.values:
        raise _fail(world, where, "a string property needs 'values', gen: name or gen: serial")
    if prop.weights and len(prop.weights) != len(prop.values):
        raise _fail(world, where, "'weights' must have one entry per value")
    if not isinstance(prop.additive, bool) or not isinstance(prop.comparable, bool):
        raise _fail(world, where, "additive and comparable must be true or false")
    if (prop.additive or not prop.comparable) and prop.type not in ("int", "float"):
        raise _fail(world, where, "additive and comparable apply to int and float properties only")
    if not isinstance(prop.size, bool) or not isinstance(prop.top_is_low, bool):
        raise _fail(world, where, "size and top_is_low must be true or false")
    if (prop.size or prop.top_is_low) and prop.type not in ("int", "float"):
        raise _fail(world, where, "size and top_is_low apply to int and float properties only")
    if not 0.0 <= prop.null_rate < 1.0 or not 0.0 <= prop.similar < 1.0:
        raise _fail(world, where, "null_rate and similar must lie in [0, 1)")
    return prop


def _to_date(world: str, where: str, value: Any) -> dt.date:
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError as exc:
        raise _fail(world, where, f"not an ISO date: {value!r}") from exc


def _node(world: str, i: int, n: dict) -> NodeSpec:
    """``nodes[i]``: its keys, its properties (unique names), a generated non-null display key, a positive
    count and an optional [singular, plural] noun."""
    for key in ("label", "count", "key", "properties"):
        if key not in n:
            raise _fail(world, f"nodes[{i}]", f"missing {key!r}")
    props = tuple(_property(world, f"{n['label']}", p) for p in n["properties"])
    names = [p.name for p in props]
    if len(set(names)) != len(names):
        raise _fail(world, n["label"], "duplicate property names")
    key_prop = next((p for p in props if p.name == n["key"]), None)
    if key_prop is None or key_prop.gen not in ("name", "serial") or key_prop.null_rate:
        raise _fail(world, n["label"], "'key' must name a non-null gen: name or gen: serial property")
    if not isinstance(n["count"], int) or n["count"] < 1:
        raise _fail(world, n["label"], "count must be a positive integer")
    noun = n.get("noun")
    if noun is not None and (not isinstance(noun, list) or len(noun) != 2
                             or not all(isinstance(x, str) and x for x in noun)):
        raise _fail(world, n["label"], "noun must be [singular, plural]")
    return NodeSpec(label=n["label"], count=n["count"], key=n["key"], properties=props,
                    noun=tuple(noun) if noun else None)


def _fan_out(world: str, where: str, r: dict) -> tuple[tuple[int, int] | None, tuple[int, int] | None, int | None]:
    """(per_source, per_target, levels) of a relationship: exactly one of per_source, per_target or
    layered (a self-relationship in ``levels`` levels, each node linked to per_source nodes below)."""
    strategies = [k for k in ("per_source", "per_target", "layered") if k in r]
    if len(strategies) != 1:
        raise _fail(world, where, "give exactly one of per_source, per_target, layered")
    if "per_source" in r:
        return _pair(world, where, r["per_source"]), None, None
    if "per_target" in r:
        return None, _pair(world, where, r["per_target"]), None
    if r["from"] != r["to"]:
        raise _fail(world, where, "layered is for self-relationships (from == to)")
    layered = r["layered"]
    levels = layered.get("levels")
    if not isinstance(levels, int) or levels < 2:
        raise _fail(world, where, "layered.levels must be an integer >= 2")
    per_source = _pair(world, where, layered.get("per_source", [1, 1]))
    if per_source[0] < 1:
        raise _fail(world, where, "layered.per_source must start at 1 or more")
    return per_source, None, levels


def _relationship(world: str, i: int, r: dict, labels: list[str]) -> RelationshipSpec:
    """``relationships[i]``: its ends (labels of this world), its fan-out, its wording, whether it is
    symmetric (a self-relationship only) and its properties (never generated names)."""
    for key in ("type", "from", "to"):
        if key not in r:
            raise _fail(world, f"relationships[{i}]", f"missing {key!r}")
    where = f"relationship {r['type']} ({r['from']}->{r['to']})"
    if r["from"] not in labels or r["to"] not in labels:
        raise _fail(world, where, "'from' and 'to' must be labels of this world")
    per_source, per_target, levels = _fan_out(world, where, r)
    phrase = r.get("phrase") or {}
    if not isinstance(phrase, dict) or set(phrase) - {"forward", "backward"}:
        raise _fail(world, where, "phrase must be a mapping with 'forward' and/or 'backward'")
    symmetric = r.get("symmetric", False)
    if not isinstance(symmetric, bool) or (symmetric and r["from"] != r["to"]):
        raise _fail(world, where, "symmetric must be true or false, and true only when from == to")
    props = tuple(_property(world, where, p) for p in r.get("properties") or [])
    for p in props:
        if p.gen is not None:
            raise _fail(world, where, "relationship properties cannot use gen: name/serial")
    return RelationshipSpec(type=r["type"], source=r["from"], target=r["to"], per_source=per_source,
                            per_target=per_target, levels=levels, properties=props, forward=phrase.get("forward"),
                            backward=phrase.get("backward"), symmetric=symmetric)


def parse_spec(raw: dict, *, source: str = "<spec>") -> WorldSpec:
    """Validate a spec mapping (as read from YAML) and return the typed spec."""
    if not isinstance(raw, dict):
        raise SpecError(f"{source}: a world spec must be a mapping")
    world = raw.get("world")
    if not isinstance(world, str) or not world.isidentifier() or world != world.lower():
        raise SpecError(f"{source}: 'world' must be a lower-case identifier, got {world!r}")
    for key in ("title", "split", "seed", "topology", "nodes"):
        if key not in raw:
            raise _fail(world, "top level", f"missing {key!r}")
    if raw["split"] not in SPLITS:
        raise _fail(world, "split", f"must be one of {SPLITS}")
    nodes = [_node(world, i, n) for i, n in enumerate(raw["nodes"])]
    labels = [n.label for n in nodes]
    if len(set(labels)) != len(labels):
        raise _fail(world, "nodes", "duplicate labels")
    rels = [_relationship(world, i, r, labels) for i, r in enumerate(raw.get("relationships") or [])]
    return WorldSpec(world=world, title=str(raw["title"]), split=raw["split"], seed=int(raw["seed"]),
                     topology=str(raw["topology"]), nodes=tuple(nodes), relationships=tuple(rels))


# libyaml's loader when PyYAML was built with it (several times faster; the same types as SafeLoader)
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Parsed specs by (path, modification time, size): every executor and environment asks for its world's
# spec, and parsing one took ~40 ms (a third of a scoring pass over 1,000 pairs). WorldSpec is frozen.
_PARSED: LRUCache[WorldSpec] = LRUCache(256)


def load_spec_file(path: str | Path) -> WorldSpec:
    path = Path(path)
    try:
        st = path.stat()
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the spec: {exc}") from exc
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    spec = _PARSED.get(key)
    if spec is not None:
        return spec
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_YAML_LOADER)
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML: {exc}") from exc
    spec = parse_spec(raw, source=str(path))
    if spec.world != path.stem:
        raise SpecError(f"{path}: 'world' is {spec.world!r} but the file is named {path.stem!r}")
    _PARSED.put(key, spec)
    return spec


def spec_dir() -> Path:
    return Path(str(resources.files("graphs") / "specs"))


def all_specs(split: str | None = None) -> list[WorldSpec]:
    """Every shipped world spec (benchmark worlds first, then training), optionally of one split."""
    specs = [load_spec_file(p) for p in sorted(spec_dir().glob("*.yaml"))]
    specs.sort(key=lambda s: (SPLITS.index(s.split), s.world))
    return [s for s in specs if split is None or s.split == split]


def get_spec(world: str) -> WorldSpec:
    path = spec_dir() / f"{world}.yaml"
    if not path.is_file():
        known = ", ".join(s.world for s in all_specs())
        raise SpecError(f"unknown world {world!r}; known worlds: {known}")
    return load_spec_file(path)
