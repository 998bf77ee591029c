"""Many sessions at once: each worker thread runs its own environment; all share one connection pool
per world (graphs.connections) and the dataset in memory."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Callable

from envs.env import CypherTurnEnv
from envs.oracle import run_episode


def run_sessions(make_env: Callable[[], CypherTurnEnv], make_agent: Callable[[], object], session_ids: list[str],
                 *, concurrency: int = 8, on_done: Callable[[str, list[dict]], None] | None = None
                 ) -> dict[str, list[dict]]:
    """Play every session; returns {session_id: turn records}. ``on_done`` is called (from the worker
    thread) as each session finishes, e.g. to append its records to a file."""
    import threading

    local = threading.local()

    def play(session_id: str) -> tuple[str, list[dict]]:
        if not hasattr(local, "env"):
            local.env, local.agent = make_env(), make_agent()
        records = run_episode(local.env, session_id, local.agent)
        if on_done is not None:
            on_done(session_id, records)
        return session_id, records

    results: dict[str, list[dict]] = {}
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        for future in as_completed([pool.submit(play, sid) for sid in session_ids]):
            sid, records = future.result()
            results[sid] = records
    return results
