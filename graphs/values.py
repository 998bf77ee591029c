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

A value that cannot be represented raises ``UndecodableValue`` (the executor reports it as the query's
``runtime`` error): one the driver could not hydrate (a date outside years 1-9999, a zone it does not
know; the driver hands those over as ``BrokenHydrationObject``), or one nested more than ``MAX_DEPTH``
lists/maps deep.
"""

from __future__ import annotations

import math
from typing import Any

from neo4j._codec.hydration import BrokenHydrationObject  # no public name; a test checks it still exists
from neo4j.graph import Node, Path, Relationship
from neo4j.spatial import Point

from cypherturn.errors import CypherTurnError

MAX_DEPTH = 200  # lists/maps nested deeper than this are refused (the query text may nest brackets 200 deep)


class UndecodableValue(CypherTurnError, ValueError):
    """A result value that the driver could not decode or that nests deeper than ``MAX_DEPTH`` (the query's
    fault: the executor reports it as a ``runtime`` error)."""


def undecodable(error: BaseException) -> UndecodableValue:
    """The ``UndecodableValue`` for a driver's hydration error ``error`` (its cause)."""
    return UndecodableValue(f"the result holds a value the client cannot decode ({type(error).__name__}: "
                            f"{error}); e.g. a date outside years 1-9999")


def _float(x: float) -> float | str:
    if math.isfinite(x):
        return x
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def _node(n: Node, depth: int) -> dict:
    return {"~node": {"labels": sorted(n.labels), "properties": {k: normalize(v, depth) for k, v in n.items()}}}


def _rel(r: Relationship, depth: int) -> dict:
    return {"~relationship": {"type": r.type, "properties": {k: normalize(v, depth) for k, v in r.items()}}}


def normalize(value: Any, depth: int = 0) -> Any:
    """A JSON-serializable copy of a driver value (see the module docstring for the mapping); raises
    ``UndecodableValue`` for a value the driver could not decode or one nested over ``MAX_DEPTH`` deep."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return _float(value)
    depth += 1
    if depth > MAX_DEPTH:
        raise UndecodableValue(f"the result holds a value nested more than {MAX_DEPTH} lists or maps deep, "
                               "deeper than the client decodes")
    if isinstance(value, dict):
        return {str(k): normalize(v, depth) for k, v in value.items()}
    if isinstance(value, BrokenHydrationObject):
        raise undecodable(value.error)
    if isinstance(value, Node):
        return _node(value, depth)
    if isinstance(value, Relationship):
        return _rel(value, depth)
    if isinstance(value, Path):
        nodes = value.nodes
        seq: list[Any] = [_node(nodes[0], depth)]
        for rel, node in zip(value.relationships, nodes[1:]):
            seq.append(_rel(rel, depth))
            seq.append(_node(node, depth))
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
        return [normalize(v, depth) for v in value]
    isoformat = getattr(value, "isoformat", None)  # stdlib datetime values
    if callable(isoformat):
        return isoformat()
    return str(value)
