"""Benchmark of the execution reward (prints figures; not a test).

For GRPO-shaped batches of 64 and 512 completions on one world (groups of 8 completions per prompt,
one gold query per prompt, every completion a distinct query: right, renamed, reversed, wrong,
broken), prints the throughput in completions per second of

- ``execution_reward`` without the gold cache (every call runs the gold queries too),
- ``execution_reward`` with a warm gold cache (the steady state of training: the dataset's gold
  queries repeat across epochs and generations),
- the floor: the same prediction queries run one after another through the bare neo4j driver
  (``graphs.connections.driver``), and the naive loop that also runs each completion's gold query.

Every timed pass sends query texts that the server has not seen in that form (a per-pass comment),
as training does, so no pass profits from a previous pass's plan or EXPLAIN cache. Reported figures
are the medians of ``--repeats`` passes. Uses the Neo4j of ``$CYPHERTURN_HOME`` (started and the world
loaded when needed; stopped again only if this script started it).

    python scripts/bench_rewards.py [--world ancient_empire] [--sizes 64 512] [--repeats 5] [--workers 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from graphs import connections, server  # noqa: E402
from graphs.cypher_syntax import string_literal  # noqa: E402

GROUP = 8

TEMPLATES = [  # (anchor label, gold query with {v} for the anchor's name)
    ("Emperor", "MATCH (a:Emperor {{name: {v}}})-[:GOVERNS]->(p:Province) RETURN DISTINCT p.name AS name"),
    ("Province", "MATCH (a:Province {{name: {v}}})-[:GARRISONS]->(l:Legion) RETURN DISTINCT l.name AS name"),
    ("Province", "MATCH (a:Province {{name: {v}}})-[:CONTAINS]->(c:City) RETURN count(c) AS count"),
    ("General", "MATCH (g:General {{name: {v}}})-[:SWORN_TO]->(e:Emperor) RETURN e.name AS name"),
    ("City", "MATCH (c:City {{name: {v}}})-[:HOSTS]->(t:Temple)-[:WORSHIPS]->(d:Deity) RETURN DISTINCT d.name AS name"),
]


def variants(gold: str) -> list[str]:
    """GROUP distinct predictions for one gold query, as a sampled group might contain."""
    renamed = gold.replace("(a:", "(x:").replace("(p:", "(q:").replace("p.name", "q.name")
    return [
        gold,                                                                 # right
        renamed + " ",                                                        # right, renamed
        gold.replace(" AS name", " AS result").replace(" AS count", " AS n"),  # wrong column name
        gold.replace("DISTINCT ", "") + "  ",                                 # duplicates (or the same)
        gold.replace(")-[", ")<-[").replace("]->", "]-"),                     # reversed direction
        gold + " LIMIT 1",                                                    # truncated
        gold.replace("RETURN", "RETURN RETURN"),                              # syntax error
        gold.replace("MATCH", "MATCH (z:Deity) WITH count(z) AS k MATCH"),    # right, roundabout
    ]


def build_batch(world: str, size: int) -> tuple[list[str], dict]:
    from graphs.executor import execute

    prompts = size // GROUP
    names: dict[str, list[str]] = {}
    for label, _ in TEMPLATES:
        if label not in names:
            r = execute(world, f"MATCH (n:{label}) RETURN n.name AS name ORDER BY name")
            if r.error:
                raise SystemExit(f"cannot read {label} names on {world}: {r.error.message}")
            names[label] = [row[0] for row in r.rows]
    golds = []
    for i in range(prompts):
        label, template = TEMPLATES[i % len(TEMPLATES)]
        pool = names[label]
        golds.append(template.format(v=string_literal(pool[(i // len(TEMPLATES)) % len(pool)])))
    completions, gold_col = [], []
    for gold in golds:
        for pred in variants(gold):
            completions.append(pred)
            gold_col.append(gold)
    return completions, {"gold_cypher": gold_col, "world": [world] * len(completions)}


def tagged(queries: list[str], tag: str) -> list[str]:
    return [f"<answer>{q}\n// {tag}</answer>" for q in queries]


def time_reward(fn, queries: list[str], kwargs: dict, tag: str) -> float:
    completions = tagged(queries, tag)
    t0 = time.perf_counter()
    fn(None, completions, **kwargs)
    return time.perf_counter() - t0


def time_bare(world: str, queries: list[str], tag: str) -> float:
    import neo4j

    target = connections.resolve(world)
    drv = connections.driver(target)
    t0 = time.perf_counter()
    for q in queries:
        try:
            with drv.session(database=target.database, default_access_mode=neo4j.READ_ACCESS) as s:
                list(s.run(f"{q}\n// {tag}"))
        except neo4j.exceptions.Neo4jError:
            pass
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", default="ancient_empire")
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 512])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=5.0)
    args = parser.parse_args()

    from graphs.loader import load_world
    from graphs.spec import get_spec
    from rewards.execution import make_execution_reward

    started = connections.external_config() is None and server.running_state() is None
    if connections.external_config() is None:
        server.serve(progress=lambda *_: None)
        load_world(get_spec(args.world))
    try:
        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"execution reward throughput on {args.world} (median of {args.repeats} passes; "
              f"{args.workers} workers, timeout {args.timeout:g} s; {os.cpu_count()} CPUs, load average {load})")
        header = (f"{'batch':>6} {'unique':>7} {'no cache':>10} {'warm cache':>11} {'bare preds':>11} "
                  f"{'bare preds+golds':>17} {'cached/bare':>12}")
        print(header)
        pass_no = 0
        for size in args.sizes:
            queries, kwargs = build_batch(args.world, size)
            uncached = make_execution_reward(gold_cache_size=0, max_workers=args.workers, timeout=args.timeout)
            cached = make_execution_reward(max_workers=args.workers, timeout=args.timeout)
            cached(None, tagged(queries, "warm-up"), **kwargs)  # fills the gold cache
            time_bare(args.world, queries, "warm-up")
            t_unc, t_cac, t_bare, t_bare2 = [], [], [], []
            for _ in range(args.repeats):
                pass_no += 1
                t_unc.append(time_reward(uncached, queries, kwargs, f"pass {pass_no} a"))
                t_cac.append(time_reward(cached, queries, kwargs, f"pass {pass_no} b"))
                t_bare.append(time_bare(args.world, queries, f"pass {pass_no} c"))
                golds = kwargs["gold_cypher"]
                t_bare2.append(time_bare(args.world, [x for pair in zip(queries, golds) for x in pair],
                                         f"pass {pass_no} d"))
            unc, cac, bare, bare2 = (statistics.median(t) for t in (t_unc, t_cac, t_bare, t_bare2))
            print(f"{size:>6} {len(set(queries)):>7} {size / unc:>8.0f}/s {size / cac:>9.0f}/s {size / bare:>9.0f}/s "
                  f"{size / bare2:>15.0f}/s {bare / cac:>11.2f}x")
        print("(completions per second; 'cached/bare': warm-cache reward throughput over the bare driver's "
              "sequential throughput on the prediction queries alone)")
    finally:
        if started:
            server.stop(progress=lambda *_: None)


if __name__ == "__main__":
    main()
