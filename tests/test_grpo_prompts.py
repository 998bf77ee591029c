"""GRPO single_turn prompts with lookups (training/data.py grpo_rows): the prompt is what a guided_action SFT
example shows before its answer, lookups and their real observations included, so that a completion of the
model SFT trained is the turn's answer, not its first lookup."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.neo4j


def test_single_turn_prompts_carry_the_sft_lookups_and_end_where_the_answer_starts():
    from benchmark.build import cached_dataset
    from benchmark.session import read_sessions
    from envs.actions import SEARCH
    from training.config import RecipeError
    from training.data import grpo_rows, sft_examples

    sessions = list(read_sessions(cached_dataset("train", seed=0, sessions=6, hf=False)))
    plain = grpo_rows(sessions, "single_turn", turns=[0])
    rows = grpo_rows(sessions, "single_turn", turns=[0], lookups="unseen", search_scope="graph")
    assert [r["session"] for r in rows] == [r["session"] for r in plain]
    answers = {e["session"]: e["messages"] for e in sft_examples(
        sessions, ["guided_action"], turns=[0], chat_tools=False, lookups="unseen", search_scope="graph")
        if e["messages"][-1]["content"].startswith("SUBMIT_ANSWER")}
    looked_up = 0
    for row, bare in zip(rows, plain):
        # the turn prompt first, then SFT's conversation up to its answer, which the prompt leaves out
        assert row["prompt"][:2] == bare["prompt"] and row["prompt"] == answers[row["session"]][:-1]
        assert row["prompt"][-1]["role"] == "user" and row["gold_cypher"] == bare["gold_cypher"]
        if len(row["prompt"]) > 2:
            looked_up += 1
            assert row["prompt"][2]["content"].startswith(SEARCH)
            assert row["prompt"][3]["content"].startswith("[Search]")
    assert looked_up, "no opening looked a name up: nothing tested"
    with pytest.raises(RecipeError, match="lookups"):
        grpo_rows(sessions, "single_turn", turns=[0], lookups="every_name")
    with pytest.raises(RecipeError, match="single_turn"):
        grpo_rows(sessions, "multi_turn", turns=[0], lookups="unseen")
