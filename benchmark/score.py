"""Scoring one (gold, prediction) pair on a world: EX strict, EX relaxed and PSJS (DESIGN §7).

``score_pair(world, gold, pred)`` runs both queries through the safe executor and returns::

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
- Rows are fetched up to ``SCORE_MAX_ROWS``; if the gold has more (``truncated``), the fetched
  prefixes are compared and ``truncated`` is true in the answer; a prediction with more rows than
  that while the gold has fewer cannot match.

Gold results (with the gold's ordering flag and, once computed, its provenance) are kept in an LRU
cache keyed by (world, gold cypher) — the gold is run once however many predictions are scored
against it. ``GOLD_CACHE`` is the process-wide one (``GOLD_CACHE.clear()``, ``.stats()``); pass
``cache=None`` to bypass it or your own ``GoldCache``.

CLI: ``python -m benchmark score --world W --gold "..." --pred "..." [--json]`` (``add_score_command``
registers it on the ``python -m benchmark`` parser).
"""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass
from typing import Any

from benchmark.metrics.ex import ex_strict, is_ordered
from benchmark.metrics.ex_relaxed import ex_relaxed
from benchmark.metrics.psjs import InfrastructureError, Provenance, provenance, psjs_from_provenance
from graphs.executor import QueryResult, SafeExecutor, executor
from graphs.lru import LRUCache

__all__ = ["score_pair", "GoldCache", "GOLD_CACHE", "GoldQueryError", "InfrastructureError",
           "add_score_command", "cmd_score", "SCORE_MAX_ROWS"]

SCORE_MAX_ROWS = 100_000


class GoldQueryError(ValueError):
    """The gold query itself failed (not an infrastructure error): the pair cannot be scored."""


@dataclass
class GoldEntry:
    result: QueryResult
    ordered: bool
    provenance: Provenance | None = None


class GoldCache(LRUCache[GoldEntry]):
    """A thread-safe LRU cache of gold results keyed by (world, gold cypher)."""

    def __init__(self, maxsize: int = 4096):
        super().__init__(maxsize)


GOLD_CACHE = GoldCache()
_DEFAULT = object()


_executors: dict[str, SafeExecutor] = {}
_executors_lock = threading.Lock()


def _run(world: str, query: str, timeout: float) -> QueryResult:
    # the process-wide safe executor of the world, looked up once: ``graphs.executor.execute`` re-reads
    # the world's spec on every call, which costs more than most gold queries
    ex = _executors.get(world)
    if ex is None:
        with _executors_lock:
            ex = _executors.setdefault(world, executor(world))
    return ex.run(query, timeout=timeout, max_rows=SCORE_MAX_ROWS)


def _gold_entry(world: str, gold: str, timeout: float, cache: GoldCache | None) -> tuple[GoldEntry, bool]:
    key = (world, gold)
    entry = cache.get(key) if cache is not None else None
    if entry is not None:
        return entry, True
    result = _run(world, gold, timeout)
    if result.error is not None:
        if result.error.kind == "unavailable":
            raise InfrastructureError(f"gold query on {world}: {result.error.message}")
        raise GoldQueryError(f"the gold query failed on {world} ({result.error.kind}): {result.error.message}")
    entry = GoldEntry(result, is_ordered(gold))
    if cache is not None:
        cache.put(key, entry)
    return entry, False


def score_pair(world: str, gold: str, pred: str | None, *, timeout: float = 120.0, with_psjs: bool = True,
               cache: Any = _DEFAULT) -> dict:
    """Score ``pred`` against ``gold`` on ``world`` (module docstring)."""
    cache = GOLD_CACHE if cache is _DEFAULT else cache
    entry, cached = _gold_entry(world, gold, timeout, cache)
    g = entry.result
    out: dict[str, Any] = {"ex": 0, "ex_relaxed": 0, "psjs": 0.0, "psjs_reason": None, "ordered": entry.ordered,
                           "truncated": g.truncated, "gold_cached": cached, "db_ms": 0.0 if cached else g.elapsed_ms,
                           "gold": g.to_dict(), "pred": None}
    if pred is None:
        out["psjs_reason"] = "no prediction"
        return out
    same = pred.strip().rstrip(";").strip() == gold.strip().rstrip(";").strip()
    if same:  # the gold's own text: its (verified deterministic) result, run once
        p = g
    else:
        p = _run(world, pred, timeout)
        out["db_ms"] += p.elapsed_ms
    out["pred"] = p.to_dict()
    if p.error is not None:
        if p.error.kind == "unavailable":
            raise InfrastructureError(f"predicted query on {world}: {p.error.message}")
        out["psjs_reason"] = f"prediction failed ({p.error.kind})"
        return out
    out["truncated"] = g.truncated or p.truncated
    if p.truncated and not g.truncated:
        out["ex"] = out["ex_relaxed"] = 0
    else:
        out["ex"] = ex_strict(g.columns, g.rows, p.columns, p.rows, ordered=entry.ordered)
        out["ex_relaxed"] = ex_relaxed(g.columns, g.rows, p.columns, p.rows, ordered=entry.ordered)
    if with_psjs:
        if entry.provenance is None:
            entry.provenance = provenance(world, gold, timeout=timeout)
            out["db_ms"] += entry.provenance.elapsed_ms
        if same:
            pred_prov = entry.provenance
        else:
            pred_prov = provenance(world, pred, timeout=timeout)
            out["db_ms"] += pred_prov.elapsed_ms
        res = psjs_from_provenance(entry.provenance, pred_prov)
        out["psjs"], out["psjs_reason"] = res.score, res.reason
    else:
        out["psjs"], out["psjs_reason"] = None, "not computed"
    return out


# -- CLI ----------------------------------------------------------------------------------------------
def add_score_command(subparsers, commands: dict | None = None):
    """Register ``score`` on a ``python -m benchmark`` subparsers object (and, when ``commands`` is
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
    """``python -m benchmark score``: 0 scored, 2 bad input or failing gold, 3 infrastructure error."""
    from graphs.spec import SpecError

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
