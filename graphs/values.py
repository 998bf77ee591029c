"""Normalization of Neo4j driver values into plain JSON values.

This is the one place that decides how query results look to everything downstream (the
environment's observations, the metrics, the JSON CLI):

- int, str, bool, None: as they are; float: as is when finite, else the strings "NaN", "Infinity",
  "-Infinity";
- list: element-wise; map: key-wise (keys as strings);
- node: {"~node": {"labels": [sorted], "properties": {...}}};
- relationship: {"~relationship": {"type": T, "properties": {...}}};
- path: {"~path": [node, relationship, node, ...]} in traversal order;
- temporal values and durations: their ISO 8601 string;
- point: {"~point": {"srid": N, "x": .., "y": .., ["z": ..]}};
- bytes: {"~bytes": hex}.
"""

from __future__ import annotations

import math
from typing import Any

from neo4j.graph import Node, Path, Relationship
from neo4j.spatial import Point


def _float(x: float) -> float | str:
    if math.isfinite(x):
        return x
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def _node(n: Node) -> dict:
    return {"~node": {"labels": sorted(n.labels), "properties": {k: normalize(v) for k, v in n.items()}}}


def _rel(r: Relationship) -> dict:
    return {"~relationship": {"type": r.type, "properties": {k: normalize(v) for k, v in r.items()}}}


def normalize(value: Any) -> Any:
    """A JSON-serializable copy of a driver value (see the module docstring for the mapping)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, dict):
        return {str(k): normalize(v) for k, v in value.items()}
    if isinstance(value, Node):
        return _node(value)
    if isinstance(value, Relationship):
        return _rel(value)
    if isinstance(value, Path):
        nodes = value.nodes
        seq: list[Any] = [_node(nodes[0])]
        for rel, node in zip(value.relationships, nodes[1:]):
            seq.append(_rel(rel))
            seq.append(_node(node))
        return {"~path": seq}
    if isinstance(value, Point):
        coords = dict(zip(("x", "y", "z"), (_float(float(c)) for c in value)))
        return {"~point": {"srid": value.srid, **coords}}
    if isinstance(value, (bytes, bytearray)):
        return {"~bytes": bytes(value).hex()}
    iso = getattr(value, "iso_format", None)  # neo4j.time Date/Time/DateTime/Duration (Duration is a tuple)
    if callable(iso):
        return iso()
    if isinstance(value, (list, tuple)):
        return [normalize(v) for v in value]
    isoformat = getattr(value, "isoformat", None)  # stdlib datetime values
    if callable(isoformat):
        return isoformat()
    return str(value)
