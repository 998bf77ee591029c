"""Scorer throughput: (gold, prediction) pairs scored per second, with and without the gold-result cache.

The pairs come from the default test build (``benchmark.build.default_dataset("test")``, built on first
use): ``--golds`` gold queries are drawn at random (seeded), and each is scored against ``--pairs /
--golds`` predictions: the gold itself and golds of other turns of the same world (as a model's
near-misses would be, and as GRPO's several generations per prompt are). Every pair is scored by
``scoring.score.score_pair`` (EX strict, EX relaxed and, unless ``--no-psjs``, PSJS).

A warm-up pass first runs every query once (so Neo4j's plan cache and the executor's EXPLAIN cache are
equally warm for both measured passes); then the same pairs are scored without the cache
(``cache=None``: the gold and its PSJS rewrite run for every pair) and with a fresh cache. The
executor time reported is the sum of the executor's ``elapsed_ms`` of the queries each pass ran
(``db_ms`` of ``score_pair``: the Neo4j round trips, the floor), and the overhead ratio is wall time
over that sum (with one worker).

``--mutations`` draws the predictions as a model's near-misses are: for each gold, the gold itself,
its variable names renamed, a column added, a filter value changed, ORDER BY or LIMIT changed, a syntax
error, and golds of other turns of the same world.

``--compare`` measures side by side, in one run on the same pairs: the bare driver (each query in a plain
auto-commit session, no guard, no cap: the reference's cost model, gold and prediction run one after the
other for every pair) as the floor, then the project's scorer (the one judge, gold cache on, one worker,
then ``--workers`` workers over batches of ``--batch`` pairs as a GRPO step or an evaluation sends them),
and the median latency of a one-hop query through the bare driver and through the safe executor.
Ratios above 1 mean the project is faster than the floor.

    python scripts/bench_scorer.py [--pairs 1000] [--golds 200] [--workers 1] [--no-psjs] [--seed 0]
    python scripts/bench_scorer.py --compare --mutations --no-psjs [--workers 4] [--batch 64]
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmark.build import default_dataset  # noqa: E402
from benchmark.session import read_sessions  # noqa: E402
from graphs import connections  # noqa: E402
from scoring.judge import GoldCache, Judge, JudgeLimits, Pair  # noqa: E402
from scoring.score import score_pair  # noqa: E402


def mutations(gold: str, rng: random.Random) -> list[str]:
    """Near-misses of ``gold`` (each only where the gold has the part it changes)."""
    out = []
    names = sorted(set(re.findall(r"\b(n\d+|a_n\d+)\b", gold)))
    if names:  # renamed variables: the same query, other text
        renamed = gold
        for i, name in enumerate(names):
            renamed = re.sub(rf"\b{name}\b", f"v{i}x", renamed)
        out.append(renamed)
    m = re.search(r"\bRETURN (DISTINCT )?(\S+?)( AS \w+)", gold)
    if m:  # one column more
        out.append(gold[:m.end()] + ", 1 AS extra" + gold[m.end():])
    nums = list(re.finditer(r"(?<![\w.])(\d+)(?![\w.*])", gold))
    if nums:  # a filter value changed
        m = rng.choice(nums)
        out.append(gold[:m.start()] + str(int(m.group(1)) + 1) + gold[m.end():])
    if " DESC" in gold:
        out.append(gold.replace(" DESC", " ASC", 1))
    elif re.search(r"\bLIMIT \d+", gold):
        out.append(re.sub(r"\bLIMIT \d+", "LIMIT 100", gold, count=1))
    else:
        out.append(gold.rstrip() + " LIMIT 3")
    out.append(gold.replace(")", "", 1))  # a syntax error
    return out


def make_pairs(n_pairs: int, n_golds: int, seed: int, *, mutate: bool = False) -> list[tuple[str, str, str]]:
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
        preds = [gold] + (mutations(gold, rng) if mutate else [])
        preds += [rng.choice(by_world[world]) for _ in range(per_gold - len(preds))]
        pairs.extend((world, gold, p) for p in preds[:per_gold])
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


def bare_pass(pairs) -> dict:
    """The floor: gold and prediction of every pair through the bare driver, one after the other, each
    in a plain auto-commit session (no guard, no cap, no cache), results compared as sorted rows."""
    def rows(world, query):
        target = connections.resolve(world)
        try:
            with connections.driver(target).session(database=target.database) as s:
                return sorted(map(repr, s.run(query).values()))
        except Exception:  # noqa: BLE001 - a failing query scores 0, as in the reference
            return None

    t0 = time.perf_counter()
    same = 0
    for world, gold, pred in pairs:
        g, p = rows(world, gold), rows(world, pred)
        same += g is not None and g == p
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "pairs_per_s": len(pairs) / wall, "ex": same / len(pairs)}


def judge_pass(pairs, *, workers: int, batch: int) -> dict:
    """The project's scorer: one judge (gold cache on), batches of ``batch`` pairs, ``workers`` threads."""
    judge = Judge(JudgeLimits(workers=workers))
    t0 = time.perf_counter()
    verdicts = []
    for i in range(0, len(pairs), batch):
        verdicts += judge.judge_batch([Pair(w, g, p) for w, g, p in pairs[i:i + batch]])
    wall = time.perf_counter() - t0
    judge.close()
    return {"wall_s": wall, "pairs_per_s": len(pairs) / wall, "ex": sum(v.ex or 0 for v in verdicts) / len(pairs)}


def compare(pairs, *, workers: int, batch: int, repeats: int) -> None:
    from scripts.bench_neo4j import _latency

    _latency(repeats)
    judge_pass(pairs, workers=1, batch=1)  # warm-up: Neo4j's plan cache and the EXPLAIN cache
    floor = bare_pass(pairs)
    one = judge_pass(pairs, workers=1, batch=1)
    many = judge_pass(pairs, workers=workers, batch=batch)
    print(f"scoring EX of {len(pairs)} pairs, side by side:")
    print(f"  bare driver, gold + prediction per pair (floor) {floor['pairs_per_s']:8.1f} pairs/s  (EX {floor['ex']:.3f})")
    print(f"  project scorer, gold cache, 1 worker            {one['pairs_per_s']:8.1f} pairs/s  (EX {one['ex']:.3f})"
          f"  x{one['pairs_per_s'] / floor['pairs_per_s']:.2f} the floor")
    print(f"  project scorer, gold cache, {workers} workers, batches of {batch:<4d}{many['pairs_per_s']:8.1f} pairs/s"
          f"  (EX {many['ex']:.3f})  x{many['pairs_per_s'] / floor['pairs_per_s']:.2f} the floor")
    print("  (the floor's EX compares sorted rows without column names, caps or truncation rules: it is "
          "not the project's EX and is printed only to show both scored the same pairs)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=1000)
    ap.add_argument("--golds", type=int, default=200)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-psjs", action="store_true")
    ap.add_argument("--mutations", action="store_true", help="predictions include near-misses of each gold")
    ap.add_argument("--compare", action="store_true", help="side by side with the bare driver (module doc)")
    ap.add_argument("--batch", type=int, default=64, help="pairs per judge batch with --compare")
    ap.add_argument("--repeats", type=int, default=300, help="one-hop latency samples with --compare")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    pairs = make_pairs(args.pairs, args.golds, args.seed, mutate=args.mutations)
    print(f"{len(pairs)} pairs over {len({(w, g) for w, g, _ in pairs})} gold queries "
          f"({sum(g == p for _, g, p in pairs)} predictions equal to their gold); dataset ready in "
          f"{time.perf_counter() - t0:.1f} s")
    if args.compare:
        compare(pairs, workers=max(args.workers, 4) if args.workers == 1 else args.workers, batch=args.batch,
                repeats=args.repeats)
        return 0
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
