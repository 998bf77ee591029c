"""The oracle agent: replays the gold through the actions (the harness's own sanity check).

Guided: SUBMIT_ANSWER of the gold. Agentic: INSPECT_SCHEMA then SUBMIT_ANSWER of the gold. It reads
the gold from the dataset it was given, never from the environment.
"""

from __future__ import annotations

from benchmark.session import Session


class OracleAgent:
    """An agent in the evaluator's sense: ``act(observation, info) -> action text``."""

    def __init__(self, sessions: list[Session], protocol: str):
        self._by_id = {s.id: s for s in sessions}
        self.protocol = protocol

    def act(self, observation: str, info: dict) -> str:
        gold = self._by_id[info["session_id"]].turns[info["turn_index"]].gold_cypher
        if self.protocol == "agentic" and info["actions_in_turn"] == 0:
            return "INSPECT_SCHEMA"
        return f"SUBMIT_ANSWER {gold}"


def run_episode(env, session_id: str, agent) -> list[dict]:
    """Play one session with any agent that has ``act(observation, info)``; returns its turn records.
    The one episode loop, ``envs.runner.play_episode`` (this argument order is kept for callers)."""
    from envs.runner import play_episode

    return play_episode(env, agent, session_id)


def run_oracle_episode(env, session_id: str, agent: OracleAgent) -> list[dict]:
    return run_episode(env, session_id, agent)
