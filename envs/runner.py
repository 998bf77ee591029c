"""Playing sessions: the one episode loop (``play_episode``) and ``run_sessions`` (the evaluator's), which
plays many sessions at once: each worker thread runs its own environment and agent; all share the
judge's executor and connection pool per world (``scoring.judge``, ``graphs.connections``) and the
dataset in memory."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Callable

from cypherturn.errors import InfrastructureError
from envs.env import CypherTurnEnv


def play_episode(env: CypherTurnEnv, agent, session_id: str) -> list[dict]:
    """Play one session with any agent that has ``act(observation, info) -> action`` and return its turn
    records. An infrastructure failure is never a traceback and never the model's error: a Neo4j outage
    that outlasts the retries of ``reset``, or an ``InfrastructureError`` from the agent (its model
    server could not be reached: ``envs.backends.BackendError``), ends the episode with the unplayed
    turns recorded as infrastructure errors (``CypherTurnEnv.record_infrastructure_error``). Any other
    exception propagates."""
    try:
        obs, info = env.reset(options={"session_id": session_id})  # retries an outage itself
    except InfrastructureError as exc:
        return env.record_infrastructure_error(str(exc), session_id=session_id)
    done = False
    while not done:
        try:
            action = agent.act(obs, info)
        except InfrastructureError as exc:
            return env.record_infrastructure_error(str(exc))
        obs, _, done, _, info = env.step(action)
    return info["records"]


def run_sessions(make_env: Callable[[], CypherTurnEnv], make_agent: Callable[[], object], session_ids: list[str],
                 *, concurrency: int = 8, on_done: Callable[[str, list[dict]], None] | None = None
                 ) -> dict[str, list[dict]]:
    """Play every session (``play_episode``); returns {session_id: turn records}. Each worker thread makes
    its own environment and agent once (``make_env``, ``make_agent``). ``on_done`` is called (from the
    worker thread) as each session finishes, e.g. to append its records to a file. The first exception
    of a session propagates."""
    import threading

    local = threading.local()

    def play(session_id: str) -> tuple[str, list[dict]]:
        if not hasattr(local, "env"):
            local.env, local.agent = make_env(), make_agent()
        records = play_episode(local.env, local.agent, session_id)
        if on_done is not None:
            on_done(session_id, records)
        return session_id, records

    results: dict[str, list[dict]] = {}
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        for future in as_completed([pool.submit(play, sid) for sid in session_ids]):
            sid, records = future.result()
            results[sid] = records
    return results
