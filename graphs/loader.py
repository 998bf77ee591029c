"""Loading generated worlds into Neo4j, and reading a world's checksum back from the database.

A load is skipped when the database already holds exactly the generated graph (same checksum);
otherwise the database is wiped, uniqueness constraints are created on each label's display key,
nodes and relationships are written with batched UNWIND statements, and the checksum is read back
to prove the load.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from cypherturn.errors import CypherTurnError
from graphs import connections
from graphs.checksum import graph_checksum
from graphs.generator import Graph, generate
from graphs.search import forget_graph_values
from graphs.spec import WorldSpec

BATCH = 2000


class LoadError(CypherTurnError, RuntimeError):
    """A world could not be loaded, or the database did not hold the graph afterwards."""


@dataclass
class DatabaseSummary:
    world: str
    uri: str
    nodes: int
    relationships: int
    checksum: str


@dataclass
class LoadReport:
    world: str
    skipped: bool
    nodes: int
    relationships: int
    checksum: str
    seconds: float


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def read_summary(target: connections.Target) -> DatabaseSummary:
    """Count and checksum what the world's database holds now."""
    drv = connections.driver(target)
    with drv.session(database=target.database) as s:
        nodes = [(r["id"], r["labels"], r["props"]) for r in
                 s.run("MATCH (n) RETURN elementId(n) AS id, labels(n) AS labels, properties(n) AS props")]
        rels = [(r["t"], r["a"], r["b"], r["props"]) for r in
                s.run("MATCH (a)-[r]->(b) RETURN type(r) AS t, elementId(a) AS a, elementId(b) AS b, "
                      "properties(r) AS props")]
    return DatabaseSummary(world=target.world, uri=target.describe(), nodes=len(nodes), relationships=len(rels),
                           checksum=graph_checksum(nodes, rels))


def _wipe(session) -> None:
    for record in list(session.run("SHOW CONSTRAINTS YIELD name")):
        session.run(f"DROP CONSTRAINT {_q(record['name'])} IF EXISTS").consume()
    for record in list(session.run("SHOW INDEXES YIELD name, type WHERE type <> 'LOOKUP' RETURN name")):
        session.run(f"DROP INDEX {_q(record['name'])} IF EXISTS").consume()
    while True:
        deleted = session.run("MATCH (n) WITH n LIMIT 10000 DETACH DELETE n RETURN count(*) AS c").single()["c"]
        if deleted == 0:
            break


def write_graph(target: connections.Target, graph: Graph, progress: Callable[[int], None] = lambda n: None) -> None:
    """Replace the database's content by ``graph`` (trusted writer; never used for model queries)."""
    spec = graph.spec
    drv = connections.driver(target)
    with drv.session(database=target.database) as s:
        _wipe(s)
        for node in spec.nodes:
            s.run(f"CREATE CONSTRAINT {_q(f'{node.label}_{node.key}_unique')} IF NOT EXISTS "
                  f"FOR (n:{_q(node.label)}) REQUIRE n.{_q(node.key)} IS UNIQUE").consume()
        for node in spec.nodes:
            rows = graph.nodes[node.label]
            for i in range(0, len(rows), BATCH):
                batch = rows[i:i + BATCH]
                s.run(f"UNWIND $rows AS row CREATE (n:{_q(node.label)}) SET n = row", rows=batch).consume()
                progress(len(batch))
        groups: dict[tuple[str, str, str], list[dict]] = {}
        for r in graph.relationships:
            groups.setdefault((r.type, r.source_label, r.target_label), []).append(
                {"s": graph.key_of(r.source_label, r.source), "t": graph.key_of(r.target_label, r.target),
                 "p": r.properties})
        for (rtype, src, dst), rows in groups.items():
            skey, dkey = spec.node(src).key, spec.node(dst).key
            cypher = (f"UNWIND $rows AS row MATCH (a:{_q(src)} {{{_q(skey)}: row.s}}) "
                      f"MATCH (b:{_q(dst)} {{{_q(dkey)}: row.t}}) CREATE (a)-[r:{_q(rtype)}]->(b) SET r = row.p")
            for i in range(0, len(rows), BATCH):
                batch = rows[i:i + BATCH]
                s.run(cypher, rows=batch).consume()
                progress(len(batch))
        s.run("CALL db.awaitIndexes(300)").consume()


def load_world(spec: WorldSpec, *, seed: int | None = None, scale: float = 1.0, force: bool = False,
               progress: Callable[[int], None] = lambda n: None) -> LoadReport:
    """Generate and load one world unless the database already holds it (checksum match)."""
    t0 = time.perf_counter()
    graph = generate(spec, seed=seed, scale=scale)
    expected = graph.checksum()
    target = connections.resolve(spec.world)
    if not force and read_summary(target).checksum == expected:
        return LoadReport(spec.world, True, graph.node_count, graph.relationship_count, expected,
                          time.perf_counter() - t0)
    write_graph(target, graph, progress)
    forget_graph_values(spec.world)
    after = read_summary(target)
    if after.checksum != expected:
        raise LoadError(f"world {spec.world}: after loading, the database checksum {after.checksum[:12]} "
                        f"differs from the generated {expected[:12]} ({after.nodes} nodes, "
                        f"{after.relationships} relationships)")
    return LoadReport(spec.world, False, graph.node_count, graph.relationship_count, expected,
                      time.perf_counter() - t0)
