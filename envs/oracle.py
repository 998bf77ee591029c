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

