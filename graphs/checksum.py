"""The world checksum: one hash of a graph's content, computed the same way from the generator's
output and from what a Neo4j database holds, so a match proves the database holds exactly that graph.

Canonical form: each node is [sorted labels, properties]; each relationship is [type, digest of its
start node, digest of its end node, properties]; both lists are sorted (multisets), so element ids and
load order do not matter. Dates are written as {"$date": ISO}.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable
from typing import Any


def _encode(value: Any) -> Any:
    if isinstance(value, dt.date):
        return {"$date": value.isoformat()}
    iso = getattr(value, "iso_format", None)  # neo4j.time.Date and friends
    if callable(iso):
        return {"$date": iso()}
    raise TypeError(f"cannot canonicalize {type(value).__name__}")


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_encode)


def graph_checksum(nodes: Iterable[tuple[Any, list[str], dict]],
                   relationships: Iterable[tuple[str, Any, Any, dict]]) -> str:
    """nodes: (node id, labels, properties); relationships: (type, start id, end id, properties).

    Node ids only link relationships to nodes; they do not enter the hash.
    """
    node_lines: list[str] = []
    digest_of: dict[Any, str] = {}
    for node_id, labels, props in nodes:
        line = canonical([sorted(labels), props])
        node_lines.append(line)
        digest_of[node_id] = hashlib.sha256(line.encode("utf-8")).hexdigest()
    rel_lines = [canonical([rtype, digest_of[start], digest_of[end], props])
                 for rtype, start, end, props in relationships]
    h = hashlib.sha256()
    for line in sorted(node_lines):
        h.update(line.encode("utf-8") + b"\n")
    h.update(b"--\n")
    for line in sorted(rel_lines):
        h.update(line.encode("utf-8") + b"\n")
    return h.hexdigest()
