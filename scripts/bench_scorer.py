"""Scorer throughput: (gold, prediction) pairs scored per second, with and without the gold-result cache.

The pairs come from the default test build (``benchmark.build.default_dataset("test")``, built on first
use): ``--golds`` gold queries are drawn at random (seeded), and each is scored against ``--pairs /
--golds`` predictions: the gold itself and golds of other turns of the same world (as a model's
near-misses would be, and as GRPO's several generations per prompt are). Every pair is scored by
``benchmark.score.score_pair`` (EX strict, EX relaxed and, unless ``--no-psjs``, PSJS).

A warm-up pass first runs every query once (so Neo4j's plan cache and the executor's EXPLAIN cache are
equally warm for both measured passes); then the same pairs are scored without the cache
(``cache=None``: the gold and its PSJS rewrite run for every pair) and with a fresh cache. The
executor time reported is the sum of the executor's ``elapsed_ms`` of the queries each pass ran
(``db_ms`` of ``score_pair``: the Neo4j round trips, the floor), and the overhead ratio is wall time
over that sum (with one worker).

    python scripts/bench_scorer.py [--pairs 1000] [--golds 200] [--workers 1] [--no-psjs] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmark.build import default_dataset  # noqa: E402
from benchmark.score import GoldCache, score_pair  # noqa: E402
from benchmark.session import read_sessions  # noqa: E402


def make_pairs(n_pairs: int, n_golds: int, seed: int) -> list[tuple[str, str, str]]:
    sessions = list(read_sessions(default_dataset("test", progress=lambda n: None)))
    by_world: dict[str, list[str]] = defaultdict(list)
    for s in sessions:
        for t in s.turns:
            by_world[s.world].append(t.gold_cypher)
    rng = random.Random(seed)
    turns = [(s.world, t.gold_cypher) for s in sessions for t in s.turns]
    golds = rng.sample(turns, n_golds)
    per_gold = max(1, n_pairs // n_golds)
    pairs = []
    for world, gold in golds:
        pairs.append((world, gold, gold))
        pairs.extend((world, gold, rng.choice(by_world[world])) for _ in range(per_gold - 1))
    rng.shuffle(pairs)
    return pairs[:n_pairs]


def run_pass(pairs, *, cache, psjs: bool, workers: int) -> dict:
    def one(pair):
        world, gold, pred = pair
        out = score_pair(world, gold, pred, cache=cache, with_psjs=psjs)
        return out, out["db_ms"]

    t0 = time.perf_counter()
    if workers > 1:
        with ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(one, pairs))
    else:
        results = [one(p) for p in pairs]
    wall = time.perf_counter() - t0
    outs = [r[0] for r in results]
    return {"wall_s": wall, "pairs_per_s": len(pairs) / wall, "db_s": sum(r[1] for r in results) / 1000.0,
            "ex": sum(o["ex"] for o in outs) / len(outs), "ex_relaxed": sum(o["ex_relaxed"] for o in outs) / len(outs),
            "psjs": (sum(o["psjs"] for o in outs) / len(outs)) if psjs else None,
            "psjs_failures": sum(1 for o in outs if psjs and o["psjs_reason"] and "failed" in o["psjs_reason"])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=1000)
    ap.add_argument("--golds", type=int, default=200)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-psjs", action="store_true")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    pairs = make_pairs(args.pairs, args.golds, args.seed)
    print(f"{len(pairs)} pairs over {len({(w, g) for w, g, _ in pairs})} gold queries "
          f"({sum(g == p for _, g, p in pairs)} predictions equal to their gold); dataset ready in "
          f"{time.perf_counter() - t0:.1f} s")
    psjs = not args.no_psjs
    warm = run_pass(pairs, cache=GoldCache(), psjs=psjs, workers=args.workers)
    print(f"warm-up: {warm['wall_s']:.1f} s")
    nocache = run_pass(pairs, cache=None, psjs=psjs, workers=args.workers)
    cached = run_pass(pairs, cache=GoldCache(), psjs=psjs, workers=args.workers)
    assert (nocache["ex"], nocache["ex_relaxed"]) == (cached["ex"], cached["ex_relaxed"])
    what = "EX + EX relaxed" + (" + PSJS" if psjs else "")
    print(f"scoring {what}, {args.workers} worker(s):")
    for name, r in (("without gold cache", nocache), ("with gold cache", cached)):
        print(f"  {name:<20} {r['pairs_per_s']:8.1f} pairs/s  ({r['wall_s'] * 1000 / len(pairs):6.1f} ms/pair; "
              f"executor time {r['db_s']:.1f} s, wall {r['wall_s']:.1f} s"
              + (f", overhead x{r['wall_s'] / r['db_s']:.2f})" if args.workers == 1 and r["db_s"] else ")"))
    print(f"  cache speed-up      {cached['pairs_per_s'] / nocache['pairs_per_s']:8.2f}x")
    print(f"  mean EX {cached['ex']:.3f}  EX relaxed {cached['ex_relaxed']:.3f}"
          + (f"  PSJS {cached['psjs']:.3f}  (PSJS rewrite failures: {cached['psjs_failures']})" if psjs else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
