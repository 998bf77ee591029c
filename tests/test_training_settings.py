"""What a training recipe's settings mean and what SFT shows the model, checked without training and without
Neo4j: reward weights given in two places, the tool-calling rounds a GRPO rollout gets, the text SFT teaches
for a tool call against what GRPO rollouts and the evaluator read, and the package's own description."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from cypherturn.errors import InputError


# -- reward weights: the specs' and GRPOConfig.reward_weights ----------------------------------------------
def test_recipe_reward_weights_are_used_when_the_specs_state_none():
    from training.trainers import resolve_rewards

    _, weights = resolve_rewards(["env", "format"], multi_turn=True, recipe_weights=[2.0, 0.5])
    assert weights == [2.0, 0.5]


def test_spec_weights_are_used_when_the_recipe_sets_none():
    from training.trainers import resolve_rewards

    _, weights = resolve_rewards(["env:2", "format", {"name": "answer", "weight": 0.3}], multi_turn=True,
                                 recipe_weights=None)
    assert weights == [2.0, 1.0, 0.3]


def test_both_may_be_set_where_they_agree():
    from training.trainers import resolve_rewards

    _, weights = resolve_rewards(["env:2", "format"], multi_turn=True, recipe_weights=[2, 0.5])
    assert weights == [2.0, 0.5]  # format states no weight: the recipe's 0.5 is the only one given


@pytest.mark.parametrize("specs,recipe", [(["env:1", "format:0.2"], [1.0, 0.5]),
                                          ([{"name": "format", "weight": 2}], [1.0])])
def test_weights_that_differ_are_an_error_naming_both_settings(specs, recipe):
    from training.config import RecipeError
    from training.trainers import resolve_rewards

    with pytest.raises(RecipeError, match=r"reward_weights.*rewards|rewards.*reward_weights") as info:
        resolve_rewards(specs, multi_turn=True, recipe_weights=recipe)
    assert isinstance(info.value, InputError)


def test_a_weight_count_that_does_not_match_the_rewards_is_an_error():
    from training.config import RecipeError
    from training.trainers import resolve_rewards

    with pytest.raises(RecipeError, match="reward_weights"):
        resolve_rewards(["env", "format"], multi_turn=True, recipe_weights=[1.0])


@pytest.mark.parametrize("mode,recipe", [("multi_turn", [3.0]), ("single_turn", [1.0, 2.0, 3.0, 4.0, 5.0])])
def test_the_default_reward_specs_leave_the_weights_to_the_recipe(mode, recipe):
    from training.config import CypherTurnGRPOArguments
    from training.trainers import resolve_rewards

    specs = CypherTurnGRPOArguments(mode=mode).reward_specs()
    _, weights = resolve_rewards(specs, multi_turn=mode == "multi_turn", recipe_weights=recipe)
    assert weights == recipe
    _, weights = resolve_rewards(specs, multi_turn=mode == "multi_turn", recipe_weights=None)
    assert weights == [1.0] * len(recipe)


# -- tool-calling rounds of a multi-turn GRPO rollout ------------------------------------------------------
def _rows(turns_by_session: dict[str, int], protocol: str, first_turn: int = 0):
    sessions = [SimpleNamespace(id=sid, turns=[None] * n) for sid, n in turns_by_session.items()]
    rows = [{"session": sid, "turn": k, "protocol": protocol}
            for sid, n in turns_by_session.items() for k in range(first_turn, n)]
    return rows, sessions


def test_guided_rollouts_get_the_guided_cap():
    from envs.prompts import GUIDED_CAP
    from training.trainers import max_tool_calling_iterations

    rows, sessions = _rows({"a": 4, "b": 6}, "guided")
    assert max_tool_calling_iterations(rows, sessions, budget_multiplier=3) == GUIDED_CAP


@pytest.mark.parametrize("m,first_turn,expected", [(3, 0, 18), (10, 0, 60), (3, 2, 12)])
def test_agentic_rollouts_get_the_budget_share_of_their_turn(m, first_turn, expected):
    from training.trainers import max_tool_calling_iterations

    # a rollout at turn k of a T-turn session starts with (T - k) x m actions, all spendable on that turn
    rows, sessions = _rows({"a": 4, "b": 6}, "agentic", first_turn)
    assert max_tool_calling_iterations(rows, sessions, budget_multiplier=m) == expected


# -- the text of a tool call: SFT data, GRPO rollouts, evaluation ------------------------------------------
CALLS = [("execute_cypher", {"query": "MATCH (a:Person)<-[:ACTED_IN]-(m:Movie) WHERE m.year < 2000 "
                                      "RETURN a.name AS name"}),
         ("search_values", {"label": "Person", "property": "name", "query": "Brühl & <Söhne>"}),
         ("inspect_schema", {}),
         ("ask_user", {"question": "Which year do you mean?"}),
         ("submit_answer", {"query": 'MATCH (n {title: "a\\"b"}) RETURN count(n) AS count'})]


@pytest.fixture(scope="module")
def tokenizer():
    from envs.models import load_tokenizer

    return load_tokenizer("tiny-llama")  # the project's tool chat template (Qwen2.5's), as the tests train with


@pytest.mark.parametrize("name,arguments", CALLS, ids=[c[0] for c in CALLS])
def test_the_sft_text_of_a_tool_call_is_what_rollouts_and_the_evaluator_read_as_that_call(tokenizer, name,
                                                                                          arguments):
    from trl.chat_template_utils import add_response_schema, parse_response

    from envs.actions import action_from_tool_call, parse_action
    from training.data import chat_template_tool_call

    text = chat_template_tool_call(name, arguments)
    call = {"type": "function", "function": {"name": name, "arguments": arguments}}
    user = {"role": "user", "content": "Question"}
    render = lambda m: tokenizer.apply_chat_template([user, m], tokenize=False)  # noqa: E731
    # SFT: the flat text is the chat template's own rendering of the structured call
    assert render({"role": "assistant", "content": text}) == render(
        {"role": "assistant", "content": "", "tool_calls": [call]})
    # GRPO rollouts: TRL parses what the model learned to write back into the same call
    add_response_schema(tokenizer)
    prompt = tokenizer.apply_chat_template([user], add_generation_prompt=True, return_dict=True)["input_ids"]
    ids = tokenizer(text + "<|im_end|>", add_special_tokens=False)["input_ids"]
    assert parse_response(tokenizer, ids, prefix=prompt)["tool_calls"] == [call]
    # evaluation: the environment's grammar reads it as the action the TRL adapter plays for that call
    assert parse_action(text) == action_from_tool_call(name, arguments)


# -- the package says what it is ---------------------------------------------------------------------------
def test_the_training_package_docstring_describes_its_modules():
    import training

    doc = training.__doc__ or ""
    assert "not built yet" not in doc.lower()
    for part in ("sft.py", "grpo.py", "config", "trainers", "data"):
        assert part in doc, part


# -- precision: bf16 autocast only where the CPU computes bf16 ----------------------------------------------
def test_bf16_autocast_needs_a_cpu_with_bf16_arithmetic():
    from training.trainers import cpu_computes_bf16

    avx2 = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n"
    assert not cpu_computes_bf16(avx2)
    assert not cpu_computes_bf16(avx2.replace("avx2", "avx512f avx512bw"))
    assert cpu_computes_bf16(avx2.replace("avx2", "avx512f avx512_bf16"))
    assert cpu_computes_bf16(avx2.replace("avx2", "amx_bf16 amx_tile"))


def test_a_bf16_recipe_trains_in_float32_on_a_cpu_without_bf16(monkeypatch):
    import torch
    from transformers import TrainingArguments

    import training.trainers as trainers

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for native, want in ((False, (False, "no")), (True, (True, "bf16"))):
        monkeypatch.setattr(trainers, "cpu_computes_bf16", lambda cpuinfo=None, native=native: native)
        args = TrainingArguments(output_dir="unused", bf16=True, use_cpu=True, report_to="none")
        trainers._cpu_precision(args)
        assert (args.bf16, args.mixed_precision) == want
