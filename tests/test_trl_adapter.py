"""The TRL adapter (envs.trl_adapter) on a small real training build over the real Neo4j, and one real
GRPO step with ``GRPOTrainer(environment_factory=…)`` on CPU with a tiny model built offline (its
BPE tokenizer is trained here on the rendered conversations; nothing is downloaded)."""

from __future__ import annotations

import inspect
import json
import math
import os

import pytest

from benchmark.build import build
from benchmark.session import read_sessions
from envs.env import EnvConfig
from envs.trl_adapter import (LAST_ACTION, TOOL_NAMES, TURN_OVER, CypherTurnToolEnv, env_reward, env_tools,
                              make_env_factory, GOLD_COLUMNS, make_training_rows, tool_schemas, training_dataset)
from training.data import FINAL_MESSAGE, oracle_tool_conversation

pytestmark = pytest.mark.neo4j

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing in this module may download
WRONG = "MATCH (n) RETURN count(n) AS n"


@pytest.fixture(scope="module")
def train(tmp_path_factory):
    out = tmp_path_factory.mktemp("train")
    build("train", out, sessions=4, seed=1, hf=False)
    return out, list(read_sessions(out))


def _trl_tools(env) -> list[str]:
    """Tool names exactly as GRPOTrainer collects them (trl/trainer/grpo_trainer.py, __init__)."""
    return sorted(name for name, _ in inspect.getmembers(env, predicate=inspect.ismethod)
                  if name not in ("reset", "get_reward") and not name.startswith("_"))


def _row(sessions, index=0, turn=0, protocol="guided", **kw):
    rows = make_training_rows(sessions[index:index + 1], protocol, turns=[turn], **kw)
    assert len(rows) == 1
    return rows[0]


def _multi_turn(sessions):
    """(session index, a turn index > 0 whose gold differs from every earlier turn's)."""
    for i, s in enumerate(sessions):
        for t in s.turns[1:]:
            if all(t.gold_cypher != u.gold_cypher for u in s.turns[:t.index]):
                return i, t.index
    raise AssertionError("no multi-turn session in the build")


# -- the tools and what the agent can reach ---------------------------------------------------------
def test_exactly_the_five_actions_are_tools_with_documented_schemas(train):
    _, sessions = train
    env = CypherTurnToolEnv(sessions=sessions)
    assert _trl_tools(env) == sorted(TOOL_NAMES)
    schemas = {s["function"]["name"]: s["function"] for s in tool_schemas(env)}
    assert set(schemas) == set(TOOL_NAMES)
    for name, fn in schemas.items():
        assert fn["description"], name
        assert fn["return"]["description"], name
        for prop, spec in fn["parameters"]["properties"].items():
            assert spec["type"] == "string" and spec["description"], (name, prop)
    assert schemas["search_values"]["parameters"]["required"] == ["query"]  # label and property: optional, together
    assert schemas["inspect_schema"]["parameters"]["properties"] == {}
    assert callable(env.get_reward)
    hidden = CypherTurnToolEnv(sessions=sessions, expose_reward=False)
    assert _trl_tools(hidden) == sorted(TOOL_NAMES)
    assert not inspect.ismethod(getattr(hidden, "get_reward"))


def test_no_public_attribute_reaches_sessions_or_gold(train):
    _, sessions = train
    i, k = _multi_turn(sessions)
    env = CypherTurnToolEnv(sessions=sessions)
    row = _row(sessions, i, k, with_gold=True)  # gold columns reach reset() as TRL passes every column
    env.reset(**row)
    env.execute_cypher(sessions[i].turns[k].gold_cypher)
    golds = [t.gold_cypher for s in sessions for t in s.turns]
    public = {name: value for name, value in inspect.getmembers(env) if not name.startswith("_")}
    assert set(public) == set(TOOL_NAMES) | {"reset", "get_reward", "episodes", "tool_calls"}
    for name in ("episodes", "tool_calls"):
        text = json.dumps(public[name])
        assert not any(g in text for g in golds), name
    assert public["tool_calls"] == ["execute_cypher"] and public["episodes"] == 1


# -- reset ------------------------------------------------------------------------------------------
def test_reset_positions_the_episode_at_the_rows_turn_without_showing_its_gold(train):
    _, sessions = train
    i, k = _multi_turn(sessions)
    s = sessions[i]
    env = CypherTurnToolEnv(sessions=sessions)
    row = _row(sessions, i, k)
    assert row["prompt"][0]["role"] == "system" and row["prompt"][-1] == {"role": "user", "content": ""}
    obs = env.reset(**row)
    assert f"Current question (turn {k + 1}): {s.turns[k].shown_utterance}" in obs
    for t in s.turns[:k]:  # the guided history: earlier utterances with their results
        assert f"Turn {t.index + 1}\nUser: {t.shown_utterance}" in obs
    assert all(t.gold_cypher not in obs for t in s.turns)
    assert env.tool_calls == [] and env.episodes == 1
    # the prompt already holds the turn prompt: nothing to append (TRL appends reset's string to it)
    full = dict(row, prompt=row["prompt"][:-1] + [{"role": "user", "content": obs}])
    assert env.reset(**full) is None
    other = dict(row, prompt=row["prompt"][:-1] + [{"role": "user", "content": "Hello."}])
    assert env.reset(**other) == "\n\n" + obs
    with pytest.raises(ValueError, match="unknown session"):
        env.reset(**dict(row, session="nope"))
    with pytest.raises(ValueError, match="does not match"):
        env.reset(**dict(row, world="elsewhere"))
    with pytest.raises(ValueError, match="out of range"):
        env.reset(**dict(row, turn=len(s.turns)))


def test_agentic_rows_replay_the_earlier_turns_and_leave_the_even_budget_share(train):
    _, sessions = train
    i, k = _multi_turn(sessions)
    s = sessions[i]
    env = CypherTurnToolEnv(sessions=sessions, config=EnvConfig(protocol="agentic", budget_multiplier=3))
    obs = env.reset(**_row(sessions, i, k, protocol="agentic"))
    assert f"Current question (turn {k + 1}): {s.turns[k].shown_utterance}" in obs
    assert "Graph schema" not in obs and s.turns[k].gold_cypher not in obs
    assert env._env.budget == (len(s.turns) - k) * 3
    assert "Node labels" in env.inspect_schema()
    assert env.submit_answer(s.turns[k].gold_cypher) == "[Answer submitted]"
    assert env.get_reward() == 1.0


@pytest.mark.parametrize("protocol,turn", [("guided", 0), ("agentic", 0), ("agentic", 1)])
def test_default_tool_calling_rounds_are_the_actions_the_environment_answers(train, protocol, turn):
    # GRPOConfig.max_tool_calling_iterations defaulted to the guided cap of 3 for agentic rollouts too,
    # cutting them short of their budget share
    from training.trainers import max_tool_calling_iterations

    _, sessions = train
    i = next(i for i, s in enumerate(sessions) if len(s.turns) > 1)
    row = _row(sessions, i, turn, protocol=protocol)
    env = CypherTurnToolEnv(sessions=sessions, config=EnvConfig(protocol=protocol, budget_multiplier=2))
    env.reset(**row)
    answered = 0
    while env.inspect_schema() != TURN_OVER and answered < 100:  # each call one action, until the turn is over
        answered += 1
    assert answered == max_tool_calling_iterations([row], sessions, budget_multiplier=2)


# -- tools and reward -------------------------------------------------------------------------------
def test_tools_act_on_the_real_graph_and_submitting_the_gold_scores_one(train):
    path, _ = train
    sessions = list(read_sessions(path))  # the test reads the gold from the session file itself
    i, k = _multi_turn(sessions)
    gold = sessions[i].turns[k].gold_cypher
    env = make_env_factory(path)()
    env.reset(**_row(sessions, i, k))
    assert "Node labels" in env.inspect_schema()
    assert env.execute_cypher(gold).startswith("[Query Result]")
    assert env.submit_answer(gold) == "[Answer submitted]"  # the third action: the cap ends the turn too
    assert env.get_reward() == 1.0 and env.get_reward() == 1.0  # idempotent
    assert env.ask_user("Which one?") == TURN_OVER  # the turn is over; nothing moves on
    assert env.tool_calls == ["inspect_schema", "execute_cypher", "submit_answer", "ask_user"]
    assert env_reward(prompts=[None], completions=[None], environments=[env]) == [1.0]

    obs = env.reset(**_row(sessions, i, k))
    assert env.tool_calls == []
    assert env.ask_user("What do you mean?").startswith("User: ")
    label, prop = _a_string_property(obs)  # the guided turn prompt shows the schema
    assert env.search_values(query="a", label=label, property=prop).startswith("[Search]")
    out = env.submit_answer(WRONG)
    assert out == "[Answer submitted]" and "Current question" not in out
    assert env.get_reward() == 0.0

    env.reset(**_row(sessions, i, k))
    assert "got a property but no label" in env.search_values(query="a", property=prop)  # not a search of "null"


def _a_string_property(schema_text: str) -> tuple[str, str]:
    for line in schema_text.splitlines():
        line = line.strip()
        if line.startswith("(:") and "{" in line:
            label = line[2:line.index(" ")]
            for part in line[line.index("{") + 1:].split(","):
                name, _, kind = part.strip().partition(":")
                if kind.strip().startswith("STRING"):
                    return label, name.strip()
    raise AssertionError("no string property in the schema")


def test_a_turn_ended_without_submit_is_scored_by_its_last_execute(train):
    _, sessions = train
    i, k = _multi_turn(sessions)
    gold = sessions[i].turns[k].gold_cypher
    env = CypherTurnToolEnv(sessions=sessions)
    row = _row(sessions, i, k)

    env.reset(**row)
    env.execute_cypher(WRONG)
    env.execute_cypher(gold)
    assert env.get_reward() == 1.0  # the model stopped after two actions: the last EXECUTE counts

    env.reset(**row)
    env.execute_cypher(gold)
    env.execute_cypher(gold)
    last = env.execute_cypher(WRONG)  # the guided cap: the third action ends the turn
    assert last.startswith("[Query Result]") and last.endswith(LAST_ACTION)
    assert "Current question" not in last  # never the next turn's prompt (it holds this turn's gold result)
    assert env.submit_answer(gold) == TURN_OVER
    assert env.get_reward() == 0.0

    env.reset(**row)
    env.ask_user("Anything?")
    assert env.get_reward() == 0.0  # no EXECUTE, no SUBMIT: no prediction


def test_rows_dataset_and_reward_function(train):
    _, sessions = train
    rows = make_training_rows(sessions, "guided")
    assert len(rows) == sum(len(s.turns) for s in sessions)
    assert {r["protocol"] for r in rows} == {"guided"}
    ds = training_dataset(sessions, "agentic", turns=[0], with_gold=True)
    assert len(ds) == len(sessions)
    assert {"prompt", "world", "session", "turn", "protocol", "gold_cypher", "gold_rows_json", "gold_key_values",
            "gold_triples", "gold_columns"} <= set(ds.column_names)
    assert ds[0]["gold_cypher"] == sessions[0].turns[0].gold_cypher
    # the gold columns are the turn's own row (benchmark.session.Turn.to_row, the one codec)
    row = make_training_rows(sessions[:1], "guided", turns=[0], with_gold=True)[0]
    assert {k: row[k] for k in GOLD_COLUMNS} == {k: sessions[0].turns[0].to_row()[k] for k in GOLD_COLUMNS}
    with pytest.raises(ValueError, match="environment_factory"):
        env_reward(prompts=[], completions=[])


def test_chain_depth_counts_the_steps_on_top_of_a_fresh_query():
    from benchmark.session import Session, Turn

    def turn(index, mode, depends_on):
        return Turn(index=index, utterance=f"q{index}", gold_cypher="RETURN 1 AS x", gold_columns=["x"],
                    gold_rows=[[1]], phenomenon="OPENING", chain_mode=mode, depends_on=depends_on)

    modes = [("none", None), ("aggregate", 0), ("narrow", 0), ("agg_numeric", 2), ("contrast", 3),
             ("topic_shift", None), ("expand", 5), ("pivot", 6)]
    session = Session("w-0001", "w", "student", [turn(i, m, d) for i, (m, d) in enumerate(modes)])
    # an aggregation adds a step to its own answer, not to the set it leaves unchanged (turn 4 narrows the set
    # of turn 2 through the count of turn 3)
    assert [session.chain_depth(i) for i in range(len(modes))] == [0, 1, 1, 2, 2, 0, 1, 2]
    # the set each builds on: turn 4 narrows turn 2's set, counted by turn 3; a fresh query builds on none
    assert [session.set_turn(i) for i in range(len(modes))] == [None, 0, 0, 2, 2, None, 5, 6]


def test_rows_by_chain_depth(train):
    _, sessions = train
    rows = make_training_rows(sessions, "guided", max_chain_depth=1)
    kept = {(r["session"], r["turn"]) for r in rows}
    every = [(s, t) for s in sessions for t in s.turns]
    assert kept == {(s.id, t.index) for s, t in every if s.chain_depth(t.index) <= 1}
    assert {(s.id, 0) for s in sessions} <= kept < {(s.id, t.index) for s, t in every}  # openings stay; some go
    fresh = {(r["session"], r["turn"]) for r in make_training_rows(sessions, "guided", max_chain_depth=0)}
    assert all(not t.chain_dependent for s, t in every if (s.id, t.index) in fresh)
    with pytest.raises(ValueError, match="max_chain_depth"):
        make_training_rows(sessions, "guided", max_chain_depth=-1)


def test_oracle_tool_conversation_renders_with_the_tool_schemas(train):
    _, sessions = train
    env = CypherTurnToolEnv(sessions=sessions)
    conv = oracle_tool_conversation(env, _row(sessions, 0, 0), sessions)
    roles = [m["role"] for m in conv]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert [m["tool_calls"][0]["function"]["name"] for m in conv if m.get("tool_calls")] == ["execute_cypher",
                                                                                             "submit_answer"]
    assert conv[3]["content"].startswith("[Query Result]") and conv[-1]["content"] == FINAL_MESSAGE
    agentic = oracle_tool_conversation(CypherTurnToolEnv(sessions=sessions, config=EnvConfig(protocol="agentic")),
                                       _row(sessions, 0, 0, protocol="agentic"), sessions)
    assert agentic[2]["tool_calls"][0]["function"]["name"] == "inspect_schema"


# -- one real GRPO step ---------------------------------------------------------------------------
def _render(conversations, tools) -> list[str]:
    """The conversations as Qwen2.5-templated text (a placeholder tokenizer only carries the template)."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen2_5_chat_template

    render = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"x": 0}, unk_token="x")))
    render.chat_template = qwen2_5_chat_template
    return [render.apply_chat_template(c, tools=tools, tokenize=False) for c in conversations]


def _tiny_tokenizer(texts):
    """A byte-level BPE tokenizer trained on ``texts``, with Qwen2.5's chat template (TRL's copy, which
    ``add_response_schema`` recognizes, so tool calls are parsed in the Hermes format)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen2_5_chat_template

    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    added = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<tools>", "</tools>"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(texts, trainer=trainers.BpeTrainer(
        vocab_size=2000, special_tokens=special + added, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  additional_special_tokens=["<|im_start|>"])
    tok.add_tokens(added)
    tok.chat_template = qwen2_5_chat_template
    tok.padding_side = "left"
    return tok


def _teach(model, tok, conversations, tools, steps, lr=3e-3):
    """Plain SFT on the assistant tokens of ``conversations``: one optimizer step per pass over all of
    them (gradients summed; one unpadded sequence per forward, which is much faster on CPU than a
    padded batch with an attention mask)."""
    import torch
    from trl.chat_template_utils import qwen2_5_training_chat_template

    batch = []
    for c in conversations:
        e = tok.apply_chat_template(c, tools=tools, chat_template=qwen2_5_training_chat_template,
                                    return_assistant_tokens_mask=True, return_dict=True, tokenize=True)
        ids = torch.tensor([e["input_ids"]])
        labels = torch.where(torch.tensor([e["assistant_masks"]]) == 1, ids, -100)
        batch.append((ids, labels))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        total = 0.0
        for ids, labels in batch:
            loss = model(input_ids=ids, labels=labels).loss / len(batch)
            loss.backward()
            total += loss.item()
        optimizer.step()
        optimizer.zero_grad()
    return total


def test_one_real_grpo_step_with_the_environment_factory(train, tmp_path, monkeypatch):
    import torch  # the train extra (pip install -e ".[train]"): its absence is a failure, not a skip
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 150k-parameter model: more threads only add overhead (several x slower here)
    try:
        torch.manual_seed(0)
        _, sessions = train
        env = CypherTurnToolEnv(sessions=sessions)
        row = _row(sessions, 0, 0)
        gold = sessions[0].turns[0].gold_cypher
        tools = env_tools(env)

        # Two trajectories for the same prompt: submit the gold (EX 1) or a wrong query (EX 0). The model
        # learns both, so its rollouts can differ in reward and the GRPO step has non-zero advantages.
        right = oracle_tool_conversation(env, row, sessions, verify=False)
        assert right[2]["tool_calls"][0]["function"]["arguments"] == {"query": gold}
        env.reset(**row)
        call = {"type": "function", "function": {"name": "submit_answer", "arguments": {"query": WRONG}}}
        wrong = right[:2] + [{"role": "assistant", "content": "", "tool_calls": [call]},
                             {"role": "tool", "name": "submit_answer", "content": env.submit_answer(WRONG)},
                             {"role": "assistant", "content": FINAL_MESSAGE}]
        assert env.get_reward() == 0.0

        tok = _tiny_tokenizer(_render([right, wrong], tools))
        config = Qwen2Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                             tie_word_embeddings=True, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                             bos_token_id=None)
        model = Qwen2ForCausalLM(config)
        loss = _teach(model, tok, [right, wrong], tools, steps=120)
        assert loss < 0.2, loss

        args = GRPOConfig(output_dir=str(tmp_path / "grpo"), max_steps=1, per_device_train_batch_size=4,
                          num_generations=4, max_completion_length=256, max_tool_calling_iterations=4,
                          temperature=0.7, top_k=10, learning_rate=1e-4, use_cpu=True, bf16=False,
                          report_to="none", logging_steps=1, save_strategy="no", seed=0)
        dataset = training_dataset(sessions[:1], turns=[0])
        trainer = GRPOTrainer(model=model, args=args, train_dataset=dataset, processing_class=tok,
                              environment_factory=make_env_factory(sessions=sessions))
        # what TRL itself discovered: the five tools, and get_reward as the one reward (named after the class)
        assert sorted(t.__name__ for t in trainer._env_tools[None]) == sorted(TOOL_NAMES)
        assert trainer.reward_func_names == ["CypherTurnToolEnv"]
        before = [p.detach().clone() for p in model.parameters()]
        trainer.train()
        # expose_reward=False: TRL adds no reward of its own; env_reward in reward_funcs reads the same EX
        other = GRPOTrainer(model=model, args=args, train_dataset=dataset, processing_class=tok,
                            reward_funcs=[env_reward],
                            environment_factory=make_env_factory(sessions=sessions, expose_reward=False))
        assert other.reward_func_names == ["env_reward"]
        assert sorted(t.__name__ for t in other._env_tools[None]) == sorted(TOOL_NAMES)
    finally:
        torch.set_num_threads(threads)

    assert trainer.state.global_step == 1
    log = trainer.state.log_history[0]
    rollouts = trainer.environments
    assert len(rollouts) == 4 and all(isinstance(e, CypherTurnToolEnv) for e in rollouts)
    calls = [name for e in rollouts for name in e.tool_calls]
    assert calls, f"the model called no tool: {log}"
    # every call TRL counted reached the environment, unless TRL itself failed it (unknown name, bad args)
    counted = log["tools/call_frequency"] * len(rollouts)
    failed = log["tools/failure_frequency"] * counted
    assert len(calls) == round(counted - failed)
    rewards = [e.get_reward() for e in rollouts]
    assert set(rewards) <= {0.0, 1.0}
    assert log["rewards/CypherTurnToolEnv/mean"] == pytest.approx(sum(rewards) / len(rewards))
    assert log["reward"] == pytest.approx(sum(rewards) / len(rewards))
    assert math.isfinite(log["loss"])
    changed = any(not torch.equal(a, b.detach()) for a, b in zip(before, model.parameters()))
    if len(set(rewards)) > 1:  # a group with different rewards has non-zero advantages: the weights move
        assert log["grad_norm"] > 0 and changed, (rewards, log)
