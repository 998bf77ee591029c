"""Breakdowns: the mean of a turn metric by world, phenomenon, chain mode, persona and turn position
(the paper's Appendix E tables).

Unscored turns (infrastructure errors) are left out and counted; a turn whose metric value is None
(e.g. PSJS not computed) is left out of that metric only. Turn positions are 1-based. Groups are
returned sorted by key.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from scoring.records import split_scored, turn_position

__all__ = ["DIMENSIONS", "breakdown", "breakdowns"]

DIMENSIONS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "world": lambda r: r.get("world"),
    "phenomenon": lambda r: r.get("phenomenon"),
    "chain_mode": lambda r: r.get("chain_mode"),
    "persona": lambda r: r.get("persona"),
    "turn_position": turn_position,
}


def _sort_key(key: Any) -> tuple:
    return (0, key, "") if isinstance(key, (int, float)) else (1, 0, str(key))


def breakdown(records: Iterable[Mapping[str, Any]], by: str | Callable = "world", metric: str = "ex") -> dict:
    """{"groups": {key: {"mean", "n"}}, "excluded_turns"}; ``by`` is a name in DIMENSIONS or a
    function of a record."""
    key_of = DIMENSIONS[by] if isinstance(by, str) else by
    scored, excluded = split_scored(records)
    sums: dict[Any, float] = {}
    counts: dict[Any, int] = {}
    for r in scored:
        value = r.get(metric)
        if value is None:
            continue
        k = key_of(r)
        sums[k] = sums.get(k, 0.0) + float(value)
        counts[k] = counts.get(k, 0) + 1
    groups = {k: {"mean": sums[k] / counts[k], "n": counts[k]} for k in sorted(counts, key=_sort_key)}
    return {"groups": groups, "excluded_turns": excluded}


def breakdowns(records: Iterable[Mapping[str, Any]], metrics: Iterable[str] = ("ex", "ex_relaxed", "psjs"),
               dimensions: Iterable[str] = tuple(DIMENSIONS)) -> dict:
    """{dimension: {metric: {key: {"mean", "n"}}}, "excluded_turns": n}."""
    records = list(records)
    out: dict = {}
    excluded = 0
    for dim in dimensions:
        out[dim] = {}
        for metric in metrics:
            b = breakdown(records, dim, metric)
            out[dim][metric] = b["groups"]
            excluded = b["excluded_turns"]
    out["excluded_turns"] = excluded
    return out
