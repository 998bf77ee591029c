"""python -m graphs serve | load | status | stop | query | schema | search (see README, "Worlds and Neo4j")."""

from __future__ import annotations

import argparse
import json
import sys

from cypherturn.cli import error, run_command
from graphs import connections, server
from graphs.executor import executor
from graphs.generator import generate
from graphs.loader import load_world, read_summary
from graphs.schema import introspect
from graphs.search import SearchError, search_graph, search_values
from graphs.spec import all_specs, get_spec


def _worlds(names: list[str] | None):
    return [get_spec(n) for n in names] if names else all_specs()


def _ensure_local(world: str | None = None) -> None:
    """Check ``world`` and start the local server, unless an external Neo4j is configured."""
    if connections.external_config() is None:
        if world is not None:
            get_spec(world)  # unknown world: a clear error before anything starts
        server.serve(progress=lambda msg: print(msg, file=sys.stderr))


def cmd_serve(args) -> int:
    if connections.external_config() is not None:
        print("an external Neo4j is configured (CYPHERTURN_NEO4J_CONFIG / CYPHERTURN_NEO4J_URI); "
              "nothing to serve", file=sys.stderr)
        return 0
    state = server.serve(progress=lambda msg: print(msg, file=sys.stderr))
    for world, port in state.ports.items():
        print(f"{world:20s} bolt://127.0.0.1:{port}")
    return 0


def cmd_stop(args) -> int:
    if not server.stop(progress=lambda msg: print(msg, file=sys.stderr)):
        print("no local Neo4j was running", file=sys.stderr)
    return 0


def cmd_load(args) -> int:
    from tqdm import tqdm

    specs = _worlds(args.worlds)
    _ensure_local()
    total = 0
    for spec in specs:
        graph = generate(spec, seed=args.seed, scale=args.scale)
        total += graph.node_count + graph.relationship_count
    reports = []
    with tqdm(total=total, desc="loading worlds", unit="elem", file=sys.stderr, disable=args.quiet) as bar:
        for spec in specs:
            bar.set_postfix_str(spec.world)
            before = bar.n
            report = load_world(spec, seed=args.seed, scale=args.scale, force=args.force, progress=bar.update)
            bar.update(report.nodes + report.relationships - (bar.n - before))
            reports.append(report)
    for r in reports:
        state = "unchanged (checksum matches)" if r.skipped else "loaded"
        print(f"{r.world:20s} {r.nodes:7d} nodes {r.relationships:7d} rels  {r.checksum[:16]}  "
              f"{state} in {r.seconds:.1f} s")
    return 0


def cmd_status(args) -> int:
    external = connections.external_config() is not None
    state = None if external else server.running_state()
    out = []
    for spec in _worlds(args.worlds):
        expected = generate(spec, seed=args.seed, scale=args.scale).checksum()
        entry = {"world": spec.world, "split": spec.split, "expected_checksum": expected}
        try:
            if not external and (state is None or spec.world not in state.ports):
                raise connections.ConfigError("the local Neo4j is not running (python -m graphs serve)")
            target = connections.resolve(spec.world, autostart=False)
            summary = read_summary(target)
            entry.update(uri=summary.uri, nodes=summary.nodes, relationships=summary.relationships,
                         checksum=summary.checksum, loaded=summary.checksum == expected, error=None)
        except Exception as exc:  # noqa: BLE001 - status reports every failure per world
            entry.update(uri=None, nodes=None, relationships=None, checksum=None, loaded=False,
                         error=f"{type(exc).__name__}: {exc}")
        out.append(entry)
    if args.json:
        print(json.dumps({"server": None if state is None else {"pid": state.pid, "neo4j": state.neo4j_version},
                          "external": external, "worlds": out}, indent=1))
    else:
        where = "external Neo4j" if external else (f"local Neo4j {state.neo4j_version} pid {state.pid}"
                                                   if state else "local Neo4j not running")
        print(where)
        for e in out:
            if e["error"]:
                print(f"  {e['world']:20s} unavailable: {e['error']}")
            else:
                print(f"  {e['world']:20s} {e['nodes']:7d} nodes {e['relationships']:7d} rels  "
                      f"{e['checksum'][:16]}  {'loaded' if e['loaded'] else 'NOT loaded (checksum differs)'}  "
                      f"{e['uri']}")
    return 0 if all(e["loaded"] for e in out) else 1


def cmd_query(args) -> int:
    _ensure_local(args.world)
    result = executor(args.world).run(args.cypher, timeout=args.timeout, max_rows=args.max_rows)
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
    elif result.error:
        error(f"{result.error.kind}: {result.error.message}")
    else:
        print("\t".join(result.columns))
        for row in result.rows:
            print("\t".join(json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v for v in row))
        more = " (truncated)" if result.truncated else ""
        print(f"-- {len(result.rows)} rows{more}, {result.elapsed_ms:.1f} ms", file=sys.stderr)
    return 0 if result.error is None else 1


def cmd_schema(args) -> int:
    _ensure_local(args.world)
    schema = introspect(args.world)
    print(json.dumps(schema.to_dict(), indent=1) if args.json else schema.to_text())
    return 0


def cmd_search(args) -> int:
    _ensure_local(args.world)
    if len(args.terms) not in (1, 3):
        error("search takes LABEL PROPERTY TEXT (one property) or TEXT alone (the whole graph)")
        return 2
    try:
        if len(args.terms) == 3:
            result = search_values(args.world, *args.terms)
            values, stage = result.values, result.stage
            lines = [str(v) for v in values]
        else:
            matches = search_graph(args.world, args.terms[0])
            values, stage = [vars(m) for m in matches], "graph"
            lines = [m.pattern() for m in matches]
    except SearchError as exc:
        error(str(exc))
        return 2
    if args.json:
        print(json.dumps({"values": values, "stage": stage}, ensure_ascii=False))
    else:
        print("\n".join(lines) or "(no match)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m graphs", description="CypherTurn worlds on Neo4j")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("serve", help="start the local Neo4j (one embedded database per world); idempotent")
    sub.add_parser("stop", help="stop the local Neo4j started by serve")
    lp = sub.add_parser("load", help="generate and load worlds (skipped when the checksum matches)")
    lp.add_argument("--worlds", nargs="+", metavar="WORLD", help="only these worlds (default: all)")
    lp.add_argument("--seed", type=int, help="generator seed (default: each spec's own)")
    lp.add_argument("--scale", type=float, default=1.0, help="size multiplier for stress tests")
    lp.add_argument("--force", action="store_true", help="reload even when the checksum matches")
    lp.add_argument("--quiet", action="store_true", help="no progress bar")
    sp = sub.add_parser("status", help="per world: uri, counts, checksum, loaded")
    sp.add_argument("--worlds", nargs="+", metavar="WORLD")
    sp.add_argument("--seed", type=int, help="compare with this seed's graph (default: the spec's)")
    sp.add_argument("--scale", type=float, default=1.0)
    sp.add_argument("--json", action="store_true")
    qp = sub.add_parser("query", help="run one read-only query through the safe executor")
    qp.add_argument("world")
    qp.add_argument("cypher")
    qp.add_argument("--timeout", type=float, default=120.0, help="seconds (default 120)")
    qp.add_argument("--max-rows", type=int, default=1000, help="row cap (default 1000)")
    qp.add_argument("--json", action="store_true")
    sc = sub.add_parser("schema", help="the world's schema as read from the database")
    sc.add_argument("world")
    sc.add_argument("--json", action="store_true")
    se = sub.add_parser("search", help="SEARCH_VALUES: fuzzy lookup of stored property values")
    se.add_argument("world")
    se.add_argument("terms", nargs="+", metavar="[LABEL PROPERTY] TEXT",
                    help="LABEL PROPERTY TEXT searches one property; TEXT alone, the whole graph (closest first)")
    se.add_argument("--json", action="store_true")
    return p


COMMANDS = {"serve": cmd_serve, "stop": cmd_stop, "load": cmd_load, "status": cmd_status, "query": cmd_query,
            "schema": cmd_schema, "search": cmd_search}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command(COMMANDS[args.command], args)


if __name__ == "__main__":
    sys.exit(main())
