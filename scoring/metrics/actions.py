"""Action statistics of the agentic protocol (the paper's Table 19 and Appendix F.2):

- ``action_usage``: the fraction of each action type among all actions except SUBMIT_ANSWER
  (EXECUTE_CYPHER, INSPECT_SCHEMA, SEARCH_VALUES, ASK_USER, and INVALID for malformed actions, which
  also cost a budget unit; any other type string is counted under its own name).
- ``budget_exhaustion_rate``: the fraction of budgeted sessions (some turn has a non-null
  ``budget_left``) whose shared budget reached zero (some ``budget_left`` <= 0, or a cliff turn).
- ``ex_excluding_cliff``: EX over the scored turns that are not cliff turns, beside EX over all.

Unscored turns (infrastructure errors) are left out and counted, as everywhere.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping

from scoring.records import by_session, is_scored, mean, split_scored

__all__ = ["ACTION_TYPES", "action_usage", "budget_exhaustion_rate", "ex_excluding_cliff"]

ACTION_TYPES = ("EXECUTE_CYPHER", "INSPECT_SCHEMA", "SEARCH_VALUES", "ASK_USER", "INVALID")
SUBMIT = "SUBMIT_ANSWER"


def action_usage(records: Iterable[Mapping[str, Any]]) -> dict:
    """{"fractions": {type: fraction}, "counts": {type: n}, "total": non-SUBMIT actions,
    "submits": n, "excluded_turns"}. Fractions are None when there is no non-SUBMIT action."""
    scored, excluded = split_scored(records)
    counts: Counter = Counter({t: 0 for t in ACTION_TYPES})
    submits = 0
    for r in scored:
        for action in r.get("actions") or ():
            kind = str(action.get("type", "INVALID")) if isinstance(action, Mapping) else "INVALID"
            if kind == SUBMIT:
                submits += 1
            else:
                counts[kind] += 1
    total = sum(counts.values())
    return {"fractions": {t: (n / total if total else None) for t, n in counts.items()},
            "counts": dict(counts), "total": total, "submits": submits, "excluded_turns": excluded}


def budget_exhaustion_rate(records: Iterable[Mapping[str, Any]]) -> dict:
    """{"rate" (None without budgeted sessions), "sessions": budgeted sessions, "exhausted",
    "excluded_turns"}."""
    sessions = exhausted = excluded = 0
    for turns in by_session(records).values():
        scored = [r for r in turns if is_scored(r)]
        excluded += len(turns) - len(scored)
        budgets = [r["budget_left"] for r in scored if r.get("budget_left") is not None]
        if not budgets:
            continue
        sessions += 1
        exhausted += int(min(budgets) <= 0 or any(r.get("cliff") for r in scored))
    return {"rate": exhausted / sessions if sessions else None, "sessions": sessions, "exhausted": exhausted,
            "excluded_turns": excluded}


def ex_excluding_cliff(records: Iterable[Mapping[str, Any]]) -> dict:
    """{"ex": EX without cliff turns, "ex_all": EX over all scored turns, "turns", "cliff_turns",
    "excluded_turns"}."""
    scored, excluded = split_scored(records)
    kept = [r["ex"] for r in scored if not r.get("cliff")]
    return {"ex": mean(kept), "ex_all": mean([r["ex"] for r in scored]), "turns": len(kept),
            "cliff_turns": len(scored) - len(kept), "excluded_turns": excluded}
