"""Benchmark of the environment (prints figures; not a test).

The oracle's full guided pass over the default test build: wall time, turns per second, and the ratio
of wall time to the summed Neo4j execution time (the environment's overhead over the floor), with 1
and with 8 concurrent sessions. Needs the worlds loaded; builds the default test split if missing.

    python scripts/bench_env.py [--protocol guided] [--concurrency 1 8]
"""

from __future__ import annotations

import argparse
import time

from envs.oracle import OracleAgent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocol", default="guided", choices=["guided", "agentic"])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()
    from benchmark.build import default_dataset
    from envs.env import CypherTurnEnv, EnvConfig, load_dataset
    from envs.runner import run_sessions

    path = default_dataset("test")
    sessions = load_dataset(path)
    turns = sum(len(s.turns) for s in sessions)
    for k in args.concurrency:
        envs: list[CypherTurnEnv] = []

        def make_env():
            env = CypherTurnEnv(config=EnvConfig(protocol=args.protocol, budget_multiplier=3), sessions=sessions)
            envs.append(env)
            return env

        t0 = time.perf_counter()
        results = run_sessions(make_env, lambda: OracleAgent(sessions, args.protocol), [s.id for s in sessions],
                               concurrency=k)
        wall = time.perf_counter() - t0
        db = sum(e.db_ms for e in envs) / 1000.0
        scored = [r["ex"] for recs in results.values() for r in recs]
        print(f"{args.protocol} oracle, {len(sessions)} sessions / {turns} turns, concurrency {k}:")
        print(f"  wall {wall:7.1f} s   {turns / wall:7.1f} turns/s   EX {sum(scored) / len(scored):.3f}")
        print(f"  summed Neo4j time {db:7.1f} s   wall / Neo4j = {wall / db:5.2f}"
              f"   (wall x concurrency) / Neo4j = {wall * k / db:5.2f}")


if __name__ == "__main__":
    main()
