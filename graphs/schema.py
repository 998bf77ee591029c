"""Schema introspection from the database itself (not from the spec), as the agent's INSPECT_SCHEMA
sees it: node labels with typed properties, relationship types with their source and target labels
and typed properties. Optional properties (null on part of the nodes) are marked."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from graphs import connections

_TYPES = {"String": "STRING", "Long": "INTEGER", "Integer": "INTEGER", "Double": "FLOAT", "Float": "FLOAT",
          "Boolean": "BOOLEAN", "Date": "DATE", "DateTime": "DATETIME", "LocalDateTime": "LOCAL_DATETIME",
          "Time": "TIME", "LocalTime": "LOCAL_TIME", "Duration": "DURATION", "Point": "POINT"}


@dataclass(frozen=True)
class Property:
    name: str
    type: str  # STRING, INTEGER, FLOAT, BOOLEAN, DATE, ... (LIST OF X for arrays)
    optional: bool

    def to_text(self) -> str:
        return f"{self.name}: {self.type}" + (" (optional)" if self.optional else "")


@dataclass(frozen=True)
class RelationshipType:
    type: str
    source: str
    target: str
    properties: tuple[Property, ...] = ()


@dataclass(frozen=True)
class Schema:
    world: str
    nodes: dict[str, tuple[Property, ...]]
    relationships: tuple[RelationshipType, ...] = field(default=())

    def to_text(self) -> str:
        """The schema as shown to a model: one line per label and per relationship pattern."""
        lines = ["Node labels and their properties:"]
        for label, props in self.nodes.items():
            lines.append(f"  (:{label} {{{', '.join(p.to_text() for p in props)}}})")
        lines.append("Relationship types (source)-[TYPE]->(target) and their properties:")
        for r in self.relationships:
            props = f" {{{', '.join(p.to_text() for p in r.properties)}}}" if r.properties else ""
            lines.append(f"  (:{r.source})-[:{r.type}{props}]->(:{r.target})")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "world": self.world,
            "nodes": {label: [p.__dict__ for p in props] for label, props in self.nodes.items()},
            "relationships": [{"type": r.type, "source": r.source, "target": r.target,
                               "properties": [p.__dict__ for p in r.properties]} for r in self.relationships],
        }

    def property_names(self, label: str) -> list[str]:
        return [p.name for p in self.nodes.get(label, ())]

    def terms(self) -> set[str]:
        """Every schema identifier: labels, relationship types, property names."""
        out = set(self.nodes)
        out.update(r.type for r in self.relationships)
        out.update(p.name for props in self.nodes.values() for p in props)
        out.update(p.name for r in self.relationships for p in r.properties)
        return out


def _type(types: list[str] | None) -> str:
    names = [t.replace("Array", "") for t in (types or [])]
    base = "/".join(sorted({_TYPES.get(n, n.upper()) for n in names})) or "ANY"
    return f"LIST OF {base}" if types and all(t.endswith("Array") for t in types) else base


def _read(target: connections.Target) -> Schema:
    with connections.driver(target).session(database=target.database) as s:
        node_rows = list(s.run("CALL db.schema.nodeTypeProperties() "
                               "YIELD nodeLabels, propertyName, propertyTypes, mandatory "
                               "RETURN nodeLabels, propertyName, propertyTypes, mandatory"))
        rel_rows = list(s.run("CALL db.schema.relTypeProperties() "
                              "YIELD relType, propertyName, propertyTypes, mandatory "
                              "RETURN relType, propertyName, propertyTypes, mandatory"))
        ends = list(s.run("MATCH (a)-[r]->(b) UNWIND labels(a) AS s UNWIND labels(b) AS t "
                          "RETURN DISTINCT type(r) AS type, s, t ORDER BY type, s, t"))
    nodes: dict[str, list[Property]] = {}
    for row in sorted(node_rows, key=lambda r: (sorted(r["nodeLabels"]), r["propertyName"] or "")):
        for label in row["nodeLabels"]:
            props = nodes.setdefault(label, [])
            if row["propertyName"]:
                props.append(Property(row["propertyName"], _type(row["propertyTypes"]), not row["mandatory"]))
    rel_props: dict[str, list[Property]] = {}
    for row in rel_rows:
        rtype = row["relType"][2:-1].replace("``", "`") if row["relType"].startswith(":`") else row["relType"]
        props = rel_props.setdefault(rtype, [])
        if row["propertyName"]:
            props.append(Property(row["propertyName"], _type(row["propertyTypes"]), not row["mandatory"]))
    rels = tuple(RelationshipType(r["type"], r["s"], r["t"],
                                  tuple(sorted(rel_props.get(r["type"], []), key=lambda p: p.name)))
                 for r in ends)
    return Schema(world=target.world, nodes={k: tuple(v) for k, v in sorted(nodes.items())}, relationships=rels)


_cache: dict[tuple[str, str, str | None], Schema] = {}
_lock = threading.Lock()


def introspect(world: str, *, refresh: bool = False) -> Schema:
    """The world's schema read from its database (cached per process; ``refresh`` re-reads it)."""
    target = connections.resolve(world)
    key = (world, target.uri, target.database)
    with _lock:
        if not refresh and key in _cache:
            return _cache[key]
    schema = _read(target)
    with _lock:
        _cache[key] = schema
    return schema
