"""python -m rewards --reward format:1 --reward execution:2 --reward mypkg.mod:fn:0.5 [--json]

Resolves reward specs exactly as training does (built-in names, ``pkg.module:function`` import paths,
the ``cypherturn.rewards`` entry-point group) and prints each reward with its weight; an unknown name
or a bad signature exits with status 2 and a clear message, so a recipe can be checked before a run.
"""

from __future__ import annotations

import argparse
import json
import sys

from rewards.registry import RewardSpecError, parse_reward_specs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rewards", description=__doc__.splitlines()[0])
    p.add_argument("--reward", action="append", required=True, metavar="SPEC",
                   help="NAME[:WEIGHT] or pkg.module:function[:WEIGHT]; repeat for several")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    try:
        parsed = parse_reward_specs(args.reward)
    except RewardSpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rows = [{"spec": name, "function": f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__name__', '?')}",
             "weight": weight} for name, fn, weight in parsed]
    if args.json:
        print(json.dumps(rows))
    else:
        for r in rows:
            print(f"{r['weight']:>6g}  {r['spec']:30s} {r['function']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
