"""SEM: session exact match (the paper's §3.2): a session scores 1 only if every turn has EX = 1.

A session with an unscored turn (infrastructure error, ``ex`` None) cannot be judged on *every* turn,
so the whole session is left out of SEM and counted in ``excluded_sessions`` (its unscored turns in
``excluded_turns``). Cliff turns (scored None because the shared budget ran out) have EX = 0 and so
make the session 0, as in the paper.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from scoring.records import by_session, is_scored, mean

__all__ = ["session_exact_match", "sem"]


def session_exact_match(records: Iterable[Mapping[str, Any]]) -> dict:
    """{"sem": mean over judged sessions (None if none), "sessions": judged sessions,
    "excluded_sessions", "excluded_turns", "per_session": {session_id: 0/1}}."""
    per_session: dict[str, int] = {}
    excluded_sessions = excluded_turns = 0
    for sid, turns in by_session(records).items():
        unscored = sum(1 for r in turns if not is_scored(r))
        if unscored:
            excluded_sessions += 1
            excluded_turns += unscored
            continue
        per_session[sid] = int(all(r["ex"] == 1 for r in turns))
    return {"sem": mean(list(per_session.values())), "sessions": len(per_session),
            "excluded_sessions": excluded_sessions, "excluded_turns": excluded_turns,
            "per_session": per_session}


def sem(records: Iterable[Mapping[str, Any]]) -> float | None:
    """The SEM score alone (None when no session could be judged)."""
    return session_exact_match(records)["sem"]
