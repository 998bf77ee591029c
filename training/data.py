"""Training data in the tool-calling format of ``envs.trl_adapter`` (DESIGN §10).

``oracle_tool_conversation`` plays one training row with the oracle through the TRL adapter itself,
so every tool result in the conversation is the real one from Neo4j; the conversation is in the
``messages`` format of ``tokenizer.apply_chat_template`` (assistant ``tool_calls``, ``tool`` messages),
ready for SFT with the same tool schemas GRPO shows (``tool_schemas`` / ``env_tools``).

The oracle reads the gold from the sessions it is given, never from the environment: guided,
EXECUTE_CYPHER then SUBMIT_ANSWER of the gold (``verify=False``: SUBMIT only); agentic,
INSPECT_SCHEMA then SUBMIT_ANSWER.
"""

from __future__ import annotations

import inspect
from typing import Any, Iterable

from benchmark.session import Session
from envs.trl_adapter import CypherTurnToolEnv, make_training_rows

FINAL_MESSAGE = "I have submitted my answer."


def env_tools(env: CypherTurnToolEnv) -> list:
    """The environment's tools exactly as ``GRPOTrainer`` collects them (public bound methods other than
    ``reset`` and ``get_reward``), to render SFT conversations with the same tool schemas."""
    return [m for name, m in inspect.getmembers(env, predicate=inspect.ismethod)
            if name not in ("reset", "get_reward") and not name.startswith("_")]


def tool_schemas(env: CypherTurnToolEnv) -> list[dict]:
    from transformers.utils import get_json_schema

    return [get_json_schema(m) for m in env_tools(env)]


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def oracle_tool_conversation(env: CypherTurnToolEnv, row: dict[str, Any], sessions: dict[str, Session] | list[Session],
                             *, verify: bool = True) -> list[dict[str, Any]]:
    """The oracle's conversation for one training row: the row's prompt with the turn prompt from
    ``env.reset(**row)``, then assistant tool calls and the tool results the environment returned,
    then a short final assistant message. Raises if the oracle's answer does not score EX 1."""
    by_id = sessions if isinstance(sessions, dict) else {s.id: s for s in sessions}
    gold = by_id[row["session"]].turns[int(row["turn"])].gold_cypher
    observation = env.reset(**row)
    messages = [dict(m) for m in row["prompt"]]
    if observation is not None:
        messages[-1]["content"] = messages[-1]["content"] + observation
    plan: list[tuple[str, dict[str, Any]]] = []
    if row.get("protocol", "guided") == "agentic":
        plan.append(("inspect_schema", {}))
    elif verify:
        plan.append(("execute_cypher", {"query": gold}))
    plan.append(("submit_answer", {"query": gold}))
    for name, arguments in plan:
        result = getattr(env, name)(**arguments)
        messages.append({"role": "assistant", "content": "", "tool_calls": [_call(name, arguments)]})
        messages.append({"role": "tool", "name": name, "content": result})
    reward = env.get_reward()
    if reward != 1.0:
        raise RuntimeError(f"oracle scored {reward} on {row['session']} turn {row['turn']}")
    messages.append({"role": "assistant", "content": FINAL_MESSAGE})
    return messages


def oracle_tool_conversations(sessions: list[Session], protocol: str = "guided", *, env: CypherTurnToolEnv | None = None,
                              turns: Iterable[int] | None = None, verify: bool = True) -> list[dict[str, Any]]:
    """``{"messages": …, "session": …, "turn": …}`` for every row of ``make_training_rows``."""
    env = env or CypherTurnToolEnv(sessions=sessions, protocol=protocol)
    by_id = {s.id: s for s in sessions}
    out = []
    for row in make_training_rows(sessions, protocol, turns=turns):
        out.append({"messages": oracle_tool_conversation(env, row, by_id, verify=verify),
                    "session": row["session"], "turn": row["turn"]})
    return out
