"""Reward functions for GRPO (DESIGN §9) and the plug-in registry.

Every reward has TRL's signature ``fn(prompts, completions, **kwargs) -> list[float | None]``: the
completions are plain strings or conversations (the last assistant message is scored), and the
dataset columns (``gold_cypher``, ``gold_key_values``, ``gold_triples``, ``world``, optionally
``gold_columns`` / ``gold_rows``) arrive as keyword lists aligned with the completions.

- ``rewards.paper``: the GRPO paper's four, each +1 / -1: ``format_reward``, ``answer_reward``,
  ``key_value_reward``, ``triple_reward`` (with the guard against listing the whole schema; picklable
  ``KeyValueReward`` / ``TripleReward`` instances with other guard settings from ``make_*``);
- ``rewards.execution``: ``execution_reward`` (EX strict), ``execution_relaxed_reward``,
  ``partial_reward`` (row-level F1) and ``partial_psjs_reward`` (PSJS) on the real Neo4j, judged by
  ``scoring.Judge`` (the evaluator's and the environment's judge): batched, parallel, gold results
  cached; picklable ``ExecutionReward`` instances configured by ``ExecutionRewardOptions``; an
  unreachable database raises ``RewardInfrastructureError``;
- ``rewards.gold_from_cypher``: gold key-values and triples derived from a Cypher query (external data);
- ``rewards.completions``: the tagged response format and the extractors;
- ``rewards.registry``: ``resolve``, ``parse_reward_specs``, ``weighted`` (built-in names, import paths
  ``pkg.module:function``, entry-point group ``cypherturn.rewards``).

Typical use with TRL::

    from rewards import weighted
    funcs, weights = weighted(["format:1", "answer:1", "key_value:1", "triple:1", "execution:2"])
    trainer = GRPOTrainer(..., reward_funcs=funcs, args=GRPOConfig(..., reward_weights=weights))
"""

from __future__ import annotations

from rewards.completions import check_format, completion_text, extract_answer, extract_tag
from rewards.paper import (KeyValueReward, TripleReward, answer_reward, format_reward, key_value_reward,
                           make_key_value_reward, make_triple_reward, normalize_cypher, triple_reward)
from rewards.registry import (BUILTINS, ENTRY_POINT_GROUP, PAPER_REWARDS, RewardSpecError, check_signature,
                              parse_reward_specs, resolve, weighted)


def __getattr__(name: str):  # the execution rewards import the Neo4j driver: only on first use
    if name in ("execution_reward", "execution_relaxed_reward", "partial_reward", "make_execution_reward",
                "make_partial_reward", "row_f1", "RewardInfrastructureError", "partial_psjs_reward",
                "ExecutionReward", "ExecutionRewardOptions"):
        from rewards import execution

        return getattr(execution, name)
    raise AttributeError(f"module 'rewards' has no attribute {name!r}")


__all__ = [
    "BUILTINS", "ENTRY_POINT_GROUP", "ExecutionReward", "KeyValueReward", "TripleReward", "ExecutionRewardOptions", "PAPER_REWARDS", "RewardSpecError", "answer_reward", "check_format",
    "check_signature", "completion_text", "execution_reward", "execution_relaxed_reward", "extract_answer",
    "extract_tag", "format_reward", "key_value_reward", "make_execution_reward", "make_key_value_reward",
    "make_partial_reward", "make_triple_reward", "normalize_cypher", "parse_reward_specs", "partial_psjs_reward",
    "partial_reward",
    "resolve", "row_f1", "RewardInfrastructureError", "triple_reward", "weighted",
]
