"""The evaluator's own overhead per turn, with the oracle backend (prints figures; not a test).

Runs ``python -m envs.evaluate --model oracle`` (in process, a fresh run directory each time) over the
default test build and prints, from the run's ``timing.json``: play time, the summed Neo4j time of the
environment's queries, and their difference per turn — at concurrency 1 with the oracle (no model),
that difference is the evaluator's own overhead (the environment, prompt rendering, action parsing,
records, the trajectory file). The scoring pass (metrics, PSJS's extra queries, bootstrap, report) is
timed separately.

    python scripts/bench_evaluate.py [--protocol guided agentic] [--limit N] [--concurrency 1]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envs import evaluate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocol", nargs="+", default=["guided", "agentic"], choices=["guided", "agentic"])
    parser.add_argument("--limit", type=int, help="first N sessions only (default: the whole default build)")
    parser.add_argument("--concurrency", type=int, default=1)
    args = parser.parse_args()
    for protocol in args.protocol:
        with tempfile.TemporaryDirectory() as out:
            argv = ["--model", "oracle", "--protocol", protocol, "--concurrency", str(args.concurrency),
                    "--out", out, "--quiet"] + (["--limit", str(args.limit)] if args.limit else [])
            metrics = evaluate.run(evaluate.build_parser().parse_args(argv))
            t = json.loads((Path(out) / "timing.json").read_text())
        print(f"{protocol} oracle, {t['sessions_played']} sessions / {t['turns_played']} turns, "
              f"concurrency {t['concurrency']}: EX {metrics['ex']:.3f}")
        print(f"  play {t['play_seconds']:8.1f} s  ({t['turns_per_second']:.1f} turns/s), in Neo4j "
              f"{t['neo4j_seconds_during_play']:8.1f} s")
        if t["overhead_ms_per_turn"] is not None:
            print(f"  outside Neo4j, per turn: {t['overhead_ms_per_turn']:.2f} ms  <- the evaluator's own overhead")
        print(f"  scoring pass (metrics, PSJS queries, bootstrap, report): {t['score_seconds']:.1f} s, "
              f"{t['score_ms_per_turn']:.2f} ms per turn")


if __name__ == "__main__":
    main()
