"""Scoring one (gold, prediction) pair on a world: EX strict, EX relaxed and PSJS (DESIGN §7).

A thin wrapper over the one judge, ``scoring.judge`` (its docstring has the rules: the row cap and
the truncation rule, the same-text rule, failures, infrastructure). ``score_pair(world, gold, pred)``
returns::

    {"ex": 0|1, "ex_relaxed": 0|1, "psjs": float, "psjs_reason": str|None, "ordered": bool,
     "truncated": bool, "gold_cached": bool, "db_ms": float,
     "gold": <executor result dict>, "pred": <executor result dict, or None when pred is None>}

(``db_ms``: the executor time of the queries this call ran — gold, prediction and their PSJS
rewrites, less what came from the cache.)

- A prediction that fails (syntax, refused, timeout, memory, too_large, runtime) scores 0 on all
  three; a missing prediction (None) scores 0 without running anything.
- An infrastructure failure (error kind ``unavailable``, of the gold or the prediction) is *not* a
  score: ``InfrastructureError`` is raised, so that the caller records the turn as unscored.
- A gold query that fails for any other reason raises ``GoldQueryError``: nothing can be scored
  against it (the benchmark's gates make this a dataset bug).
- A prediction whose text is the gold's (up to surrounding whitespace and a final ``;``) is not run
  again: it gets the gold's result and provenance (gold queries are verified deterministic).
- Rows are fetched up to ``JudgeLimits.max_rows``; a result cut there (``truncated``) is never equal
  to another one: EX 0, unless the prediction is the gold's text.

Gold results (with the gold's ordering flag and, once computed, its provenance) are kept in the gold
cache (``scoring.judge.GoldCache``, keyed by (world, gold cypher)): the gold is run once however many
predictions are scored against it. By default that is the cache of the process-wide judge of these
limits (``shared_judge(timeout=...).gold_cache``); pass ``cache=None`` to bypass it, or your own
``GoldCache``.

CLI: ``python -m scoring score --world W --gold "..." --pred "..." [--json]`` (``add_score_command``
registers it on the ``python -m scoring`` parser).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from cypherturn.errors import InfrastructureError
from graphs.spec import SpecError
from scoring.judge import GoldCache, GoldQueryError, shared_judge

__all__ = ["score_pair", "add_score_command", "cmd_score"]

_SHARED_CACHE: Any = object()  # stands for the shared judge's own gold cache


def score_pair(world: str, gold: str, pred: str | None, *, timeout: float = 120.0, with_psjs: bool = True,
               cache: GoldCache | None = _SHARED_CACHE) -> dict:
    """Score ``pred`` against ``gold`` on ``world`` (module docstring)."""
    judge = shared_judge(timeout=timeout)
    cache = judge.gold_cache if cache is _SHARED_CACHE else cache
    v = judge.judge(world, gold, pred, psjs=with_psjs, cache=cache).raise_for_error()
    out: dict[str, Any] = {"ex": v.ex, "ex_relaxed": v.ex_relaxed, "psjs": v.psjs, "psjs_reason": v.psjs_reason,
                           "ordered": v.ordered, "truncated": v.truncated, "gold_cached": v.gold_cached,
                           "db_ms": v.db_ms, "gold": v.gold.to_dict(), "pred": None if pred is None else v.pred.to_dict()}
    if v.error is not None:
        out["psjs"], out["psjs_reason"] = 0.0, ("no prediction" if v.error == "missing"
                                                else f"prediction failed ({v.error})")
    elif not with_psjs:
        out["psjs"], out["psjs_reason"] = None, "not computed"
    return out


# -- CLI ----------------------------------------------------------------------------------------------
def add_score_command(subparsers, commands: dict | None = None):
    """Register ``score`` on a ``python -m scoring`` subparsers object (and, when ``commands`` is
    the CLI's command table, map "score" to ``cmd_score`` there)."""
    s = subparsers.add_parser("score", help="score a predicted Cypher query against a gold one on a world",
                              description="Run gold and prediction through the safe executor and print "
                                          "EX strict, EX relaxed and PSJS.")
    s.add_argument("--world", required=True, help="world name, e.g. ancient_empire")
    s.add_argument("--gold", required=True, help="the gold Cypher query")
    s.add_argument("--pred", help="the predicted Cypher query (omit for a missing prediction)")
    s.add_argument("--timeout", type=float, default=120.0, help="per-query time limit in seconds (default 120)")
    s.add_argument("--no-psjs", action="store_true", help="skip PSJS (two fewer queries)")
    s.add_argument("--json", action="store_true", help="print the full result as JSON")
    s.set_defaults(func=cmd_score)
    if commands is not None:
        commands["score"] = cmd_score
    return s


def cmd_score(args) -> int:
    """``python -m scoring score``: 0 scored, 2 bad input or failing gold, 3 infrastructure error."""
    try:
        out = score_pair(args.world, args.gold, args.pred, timeout=args.timeout, with_psjs=not args.no_psjs)
    except InfrastructureError as exc:
        print(f"error: infrastructure (not scored): {exc}", file=sys.stderr)
        return 3
    except (GoldQueryError, SpecError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
        return 0
    psjs = "n/a" if out["psjs"] is None else f"{out['psjs']:.3f}"
    print(f"EX {out['ex']}  EX relaxed {out['ex_relaxed']}  PSJS {psjs}"
          + (f" ({out['psjs_reason']})" if out["psjs_reason"] else ""))
    g, p = out["gold"], out["pred"]
    print(f"gold: {len(g['rows'])} rows, columns {g['columns']}" + (" (ordered)" if out["ordered"] else ""))
    if p is None:
        print("prediction: none")
    elif p["error"]:
        print(f"prediction: {p['error']['kind']} error: {p['error']['message']}")
    else:
        print(f"prediction: {len(p['rows'])} rows, columns {p['columns']}")
    return 0
