"""Benchmark of the session generator (prints figures; not a test).

Builds the default test split (721 sessions on the seven benchmark worlds) into a temporary directory
and prints the wall time and the share of it spent inside Neo4j queries (summed executor time over
worker threads / (wall time x workers)). Needs the worlds loaded (`python -m graphs load`).

    python scripts/bench_build.py [--workers 1] [--sessions 721] [--out DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time

from graphs import server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=1, help="worlds built in parallel (the CLI uses 4)")
    parser.add_argument("--sessions", type=int, default=721)
    parser.add_argument("--out", help="keep the build here (default: a temporary directory)")
    args = parser.parse_args()
    from benchmark.build import build

    server.serve(progress=lambda *_: None)
    out = args.out or tempfile.mkdtemp(prefix="cypherturn-build-")
    t0 = time.perf_counter()
    result = build("test", out, sessions=args.sessions, workers=args.workers)
    wall = time.perf_counter() - t0
    m = result.manifest
    print(f"default test build: {m['sessions']} sessions, {m['turns']} turns, workers={args.workers}")
    print(f"wall time:                 {wall:8.1f} s  ({m['turns'] / wall:.1f} turns/s)")
    print(f"time inside Neo4j queries: {result.db_seconds:8.1f} s  (summed over workers)")
    print(f"share of wall time in Neo4j: {result.db_seconds / (wall * args.workers):6.1%}")
    print(f"gate rejections: {m['gate_failures']}")


if __name__ == "__main__":
    main()
