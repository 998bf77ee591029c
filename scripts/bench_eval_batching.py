"""Sessions played at once on the hf backend: seconds per turn, and whether the answers change (prints
figures; not a test).

Runs ``python -m envs.evaluate`` (in process, a fresh run directory and a fresh model load each time) over
the same sessions at each ``--concurrency``, the batch size equal to it, and prints play time, seconds per
turn, EX, and how many turns' generated text differs from the first setting's. With the prefix cache (the
default), each prompt of a batch is prefilled alone from its cached prefix and the batch decodes together
(``envs.backends.HFBackend``): greedy decoding should give the same text at every setting.

    python scripts/bench_eval_batching.py [--model models/smollm2-135m-cypherturn] [--dataset DIR]
        [--limit 4] [--concurrency 1 4] [--max-new-tokens 192] [--dtype float32]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envs import evaluate  # noqa: E402


def _texts(run: Path) -> dict[tuple[str, int], str]:
    records = [json.loads(line) for line in (run / "trajectories.jsonl").read_text().splitlines()]
    return {(r["session_id"], r["turn_index"]): r["output_text"] for r in records}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="models/smollm2-135m-cypherturn")
    parser.add_argument("--dataset", help="a build directory (default: the default test build)")
    parser.add_argument("--limit", type=int, default=4, help="sessions, the worlds taken in turn")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--max-new-tokens", type=int, default=192)
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()
    first = None
    for concurrency in args.concurrency:
        with tempfile.TemporaryDirectory() as out:
            argv = ["--model", args.model, "--protocol", "guided", "--chat-format", "text", "--limit", str(args.limit),
                    "--concurrency", str(concurrency), "--batch-size", str(concurrency), "--dtype", args.dtype,
                    "--max-new-tokens", str(args.max_new_tokens), "--no-psjs", "--quiet", "--out", out]
            argv += ["--dataset", args.dataset] if args.dataset else []
            metrics = evaluate.run(evaluate.build_parser().parse_args(argv))
            timing = json.loads((Path(out) / "timing.json").read_text())
            texts = _texts(Path(out))
        first = first or (concurrency, texts)
        differ = sum(texts.get(k) != v for k, v in first[1].items())
        turns = timing["turns_played"]
        print(f"concurrency {concurrency:2d}: {timing['sessions_played']} sessions / {turns} turns, play "
              f"{timing['play_seconds']:7.1f} s, {timing['play_seconds'] / turns:5.2f} s a turn, "
              f"EX {metrics['ex']:.3f}, "
              f"{differ} of {len(first[1])} turns' text differs from concurrency {first[0]}", flush=True)


if __name__ == "__main__":
    main()
