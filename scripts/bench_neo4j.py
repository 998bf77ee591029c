"""Benchmark of the Neo4j layer (prints figures; not a test).

Prints: the cold `serve` time (fresh stores; the launcher build is timed apart), the `load` time for
every world, the server's resident memory after loading and after the queries, the median latency of a
one-hop query through the safe executor versus the same query through the bare driver, with the executor's
overhead as a ratio, and how long queries returning one huge value hold a caller with a 2 s time limit
(the server's record cap and the client's value cap refuse them; the driver decodes what was sent first).
Runs in a fresh cache directory of its own and stops the server it started; ``--reuse`` instead
measures only the query latency against the server already running under ``$CYPHERTURN_HOME``
(started and loaded beforehand), which is quicker for before/after comparisons of the executor.

    python scripts/bench_neo4j.py [--repeats 300] [--reuse]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--reuse", action="store_true",
                        help="time queries on the running server of $CYPHERTURN_HOME; skip serve and load")
    args = parser.parse_args()
    if not args.reuse:
        os.environ["CYPHERTURN_HOME"] = tempfile.mkdtemp(prefix="cypherturn-bench-")
    os.environ.pop("CYPHERTURN_NEO4J_CONFIG", None)
    os.environ.pop("CYPHERTURN_NEO4J_URI", None)

    from graphs import connections, server
    from graphs.loader import load_world
    from graphs.spec import all_specs

    quiet = lambda *_: None  # noqa: E731
    if args.reuse:  # someone else's server: measure and leave it running
        try:
            _latency(args.repeats)
            _oversized()
        finally:
            connections.close_all()
        return
    try:
        t0 = time.perf_counter()
        server.build_launcher(progress=quiet)
        build_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        state = server.serve(progress=quiet)
        serve_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        state2 = server.serve(progress=quiet)
        reuse_s = time.perf_counter() - t0
        assert state2.pid == state.pid

        specs = all_specs()
        t0 = time.perf_counter()
        reports = [load_world(s) for s in specs]
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for s in specs:
            load_world(s)
        reload_s = time.perf_counter() - t0
        nodes = sum(r.nodes for r in reports)
        rels = sum(r.relationships for r in reports)

        print(f"worlds: {len(specs)} ({nodes} nodes, {rels} relationships)")
        print(f"launcher build (mvn package, jars cached):   {build_s:6.1f} s")
        print(f"cold serve (fresh stores, {len(specs)} databases):   {serve_s:6.1f} s")
        print(f"serve again (reuses the running server):     {reuse_s:6.2f} s")
        print(f"load all worlds (generate + write + verify): {load_s:6.1f} s")
        print(f"load again (skipped, checksums match):       {reload_s:6.1f} s")
        print(f"server memory (JVM RSS) after load:          {_rss_mib(state.pid):6d} MiB")
        _latency(args.repeats)
        _oversized()
        print(f"server memory (JVM RSS) after the queries:   {_rss_mib(state.pid):6d} MiB")
    finally:
        connections.close_all()
        server.stop(progress=quiet)


def _rss_mib(pid: int) -> int:
    """Resident memory of process ``pid`` in MiB (Linux /proc; -1 elsewhere)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) >> 10 for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration, ValueError):
        return -1


def _latency(repeats: int) -> None:
    """Median latency of a one-hop query: safe executor vs the bare driver (the server must be loaded)."""
    import neo4j

    from graphs import connections
    from graphs.executor import SafeExecutor
    from graphs.generator import generate
    from graphs.spec import get_spec

    world = "ancient_empire"
    names = [row["name"] for row in generate(get_spec(world)).nodes["Emperor"]]
    query = "MATCH (e:Emperor {name: $name})-[:GOVERNS]->(p:Province) RETURN p.name AS province"
    ex = SafeExecutor(world, timeout=30, max_rows=1000)
    target = connections.resolve(world)
    drv = connections.driver(target)

    def via_executor(name):
        r = ex.run(query, params={"name": name})
        assert r.error is None, r.error
        return r.rows

    def via_driver(name):
        records, _, _ = drv.execute_query(query, {"name": name}, routing_=neo4j.RoutingControl.READ,
                                          database_=target.database)
        return [list(r.values()) for r in records]

    def via_session(name):  # a plain auto-commit session: the reference scorer's way
        with drv.session(database=target.database) as s:
            return [list(r.values()) for r in s.run(query, name=name)]

    def via_driver_tx(name):  # the same transaction shape the executor uses, without its guards
        with drv.session(database=target.database, default_access_mode=neo4j.READ_ACCESS) as s:
            tx = s.begin_transaction(timeout=30)
            rows = [list(r.values()) for r in tx.run(query, name=name)]
            tx.rollback()
        return rows

    for name in names[:5]:
        assert sorted(via_executor(name)) == sorted(via_driver(name))
    fns = {"executor": via_executor, "driver (execute_query)": via_driver,
           "driver (explicit read tx)": via_driver_tx, "driver (auto-commit session)": via_session}
    timings = {k: [] for k in fns}
    for _ in range(20):  # warm-up: plans cached, pool filled
        for fn in fns.values():
            fn(names[0])
    for i in range(repeats):
        name = names[i % len(names)]
        for label, fn in fns.items():
            t = time.perf_counter()
            fn(name)
            timings[label].append((time.perf_counter() - t) * 1000)

    med = {k: statistics.median(v) for k, v in timings.items()}
    print(f"one-hop query, median of {repeats}:")
    for k, v in med.items():
        print(f"  {k:28s} {v:7.3f} ms")
    base = med["driver (execute_query)"]
    print(f"executor overhead ratio vs execute_query:     {med['executor'] / base:5.2f}x")
    print(f"executor overhead ratio vs explicit read tx:  {med['executor'] / med['driver (explicit read tx)']:5.2f}x")
    print(f"executor overhead ratio vs auto-commit:       {med['executor'] / med['driver (auto-commit session)']:5.2f}x")


# One value of n integers: 6 M (~30 MB of packstream) passes a 32 MiB record cap, 10 M (~50 MB) and 25 M
# (~125 MB) a 128 MiB one; what passes, the driver decodes whole (at most the cap), then the client refuses;
# 100 M is over any cap the server has had.
OVERSIZED = [f"RETURN range(1, {n}) AS xs" for n in (1_000_000, 6_000_000, 10_000_000, 25_000_000, 100_000_000)]


def _oversized(timeout: float = 2.0) -> None:
    """Wall time of the executor on queries returning one huge list, against a ``timeout`` s limit."""
    from graphs import server
    from graphs.executor import SafeExecutor

    try:
        import neo4j._rust  # noqa: F401 - neo4j-rust-ext: the driver's packstream decoder in Rust
        decoder = "Rust (neo4j-rust-ext)"
    except ImportError:
        decoder = "pure Python"
    print(f"one huge value, {timeout:g} s limit (record cap {server.BOLT_MAX_BUFFER_BYTES >> 20} MiB, "
          f"driver decoder {decoder}):")
    for query in OVERSIZED:
        t = time.perf_counter()
        r = SafeExecutor("ancient_empire", timeout=timeout, retries=0).run(query)
        kind = r.error.kind if r.error else f"{len(r.rows)} rows"
        print(f"  {query:38s} {kind:10s} {time.perf_counter() - t:6.2f} s")


if __name__ == "__main__":
    main()
