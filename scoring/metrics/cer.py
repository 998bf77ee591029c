"""CER: conditional error rate, P(EX_t = 0 | EX_{t-1} = 0), over chain-dependent turns (the paper's
cascade measure; DESIGN §7).

A turn t counts when it is chain-dependent (chain mode other than ``none`` and ``topic_shift``), the
turn just before it in the same session (``turn_index - 1``) exists, and both are scored; it is
*conditioned* when that previous turn has EX = 0, and an *error* when t itself has EX = 0. CER is
errors / conditioned turns, overall and by turn position (1-based position of t). With
``condition_on="depends_on"`` the condition is the turn t builds on (``depends_on``) instead of the
previous one. Cliff turns are ordinary EX = 0 turns unless ``exclude_cliff=True`` drops every pair
that involves one. Undefined rates (no conditioned turn) are None.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Mapping

from cypherturn.errors import InputError
from scoring.records import by_session, is_chain_dependent, is_scored, turn_position

__all__ = ["conditional_error_rate", "cer"]


def conditional_error_rate(records: Iterable[Mapping[str, Any]], *, condition_on: str = "previous",
                           exclude_cliff: bool = False) -> dict:
    """{"cer", "conditioned", "errors", "by_position": {pos: {"cer", "conditioned", "errors"}},
    "excluded_turns"}."""
    if condition_on not in ("previous", "depends_on"):
        raise InputError("condition_on must be 'previous' or 'depends_on'")
    conditioned: dict[int, int] = defaultdict(int)
    errors: dict[int, int] = defaultdict(int)
    excluded = 0
    for turns in by_session(records).values():
        index = {int(r["turn_index"]): r for r in turns}
        for r in turns:
            if not is_scored(r):
                excluded += 1
                continue
            if not is_chain_dependent(r):
                continue
            ref = int(r["turn_index"]) - 1 if condition_on == "previous" else r.get("depends_on")
            prev = index.get(ref) if ref is not None else None
            if prev is None or not is_scored(prev) or prev["ex"] != 0:
                continue
            if exclude_cliff and (r.get("cliff") or prev.get("cliff")):
                continue
            pos = turn_position(r)
            conditioned[pos] += 1
            errors[pos] += int(r["ex"] == 0)
    total_c, total_e = sum(conditioned.values()), sum(errors.values())
    return {"cer": total_e / total_c if total_c else None, "conditioned": total_c, "errors": total_e,
            "by_position": {pos: {"cer": errors[pos] / conditioned[pos], "conditioned": conditioned[pos],
                                  "errors": errors[pos]} for pos in sorted(conditioned)},
            "excluded_turns": excluded}


def cer(records: Iterable[Mapping[str, Any]], **kwargs) -> float | None:
    """The overall CER alone."""
    return conditional_error_rate(records, **kwargs)["cer"]
