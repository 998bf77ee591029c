"""training/sft.py and training/grpo.py (both modes) run as a user runs them, on CPU against the real Neo4j
with a tiny model built offline (``tiny-llama``: SmolLM2's tokenizer, 2 random layers), and write
checkpoints that ``python -m envs.evaluate`` scores; a reward plug-in given by import path is called and
logged; two accelerate processes (gloo) train the same model. Plus the data builders in-process."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.neo4j

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = "cypherturn_test_rewards:length_reward"


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRL_EXPERIMENTAL_SILENCE="1", TOKENIZERS_PARALLELISM="false",
               CYPHERTURN_TEST_REWARD_LOG=str(tmp_path / "rewards.jsonl"),
               PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests" / "plugins"), env.get("PYTHONPATH", "")]))
    return env


def _run(cmd: list[str], tmp_path: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)}\nexit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return proc


def _train_build() -> Path:
    """The on-demand training build the smoke recipes use (build_sessions 6, build_seed 0)."""
    from benchmark.build import cached_dataset

    return cached_dataset("train", seed=0, sessions=6, hf=False)


def _evaluate(ckpt: Path, tmp_path: Path) -> tuple[dict, dict]:
    out = tmp_path / f"eval-{ckpt.name}"
    proc = _run([sys.executable, "-m", "envs.evaluate", "--model", str(ckpt), "--dataset", str(_train_build()),
                 "--limit", "2", "--max-new-tokens", "8", "--concurrency", "2", "--no-psjs", "--quiet",
                 "--out", str(out)], tmp_path)
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    return summary, json.loads((out / "meta.json").read_text())


def _digests(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.glob("param_digest_rank*.json"))]


@pytest.fixture(scope="module")
def sft_checkpoint(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("sft")
    out = tmp / "sft"
    _run([sys.executable, "training/sft.py", "--config", "configs/smoke_sft.yaml", "--output_dir", str(out),
          "--max_steps", "1"], tmp)
    return out


def test_sft_writes_an_adapter_checkpoint_that_evaluate_scores(sft_checkpoint, tmp_path):
    out = sft_checkpoint
    adapter = json.loads((out / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == "tiny-llama"  # the alias, not this machine's cache path
    marker = json.loads((out / "cypherturn.json").read_text())
    assert marker["stage"] == "sft" and marker["chat_format"] == "tools" and marker["global_step"] == 1
    assert marker["formats"] == ["guided_tools", "paper"] and isinstance(marker["heldout_sessions"], list)
    (digest,) = _digests(out)
    assert digest["before"] != digest["after"]  # LoRA weights moved
    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    assert any("loss" in h for h in history)
    summary, meta = _evaluate(out, tmp_path)
    assert meta["chat_format"] == "tools" and summary["turns_scored"] > 0 and summary["infra_errors"] == 0


def test_sft_trains_on_prefix_tree_rows(tmp_path):
    """share_prefixes: each session's turns in one row (training/packing.py); two rows a batch, so one is padded."""
    out = tmp_path / "sft"
    _run([sys.executable, "training/sft.py", "--config", "configs/smoke_sft.yaml", "--output_dir", str(out),
          "--max_steps", "2", "--formats", "guided_action", "--chat_format", "text", "--share_prefixes", "true",
          "--max_examples", "10"], tmp_path)
    info = json.loads((out / "cypherturn.json").read_text())
    assert info["examples"] == 10 and info["share_prefixes"]["rows"] >= 2
    assert info["share_prefixes"]["row_tokens"] < info["share_prefixes"]["example_tokens"] / 2
    state = json.loads((out / "trainer_state.json").read_text())
    losses = [h["loss"] for h in state["log_history"] if "loss" in h]
    assert losses and all(math.isfinite(x) and x > 0 for x in losses)
    digest = json.loads((out / "param_digest_rank0.json").read_text())
    assert digest["before"] != digest["after"]
    # TRL counts each batch's padded row width (from position_ids), not the 4-D mask's L x L cells: two steps,
    # each at most every row's tokens
    tokens = [h["num_tokens"] for h in state["log_history"] if "num_tokens" in h]
    assert tokens and tokens[-1] <= 2 * info["share_prefixes"]["row_tokens"]


def test_all_openings_adds_the_openings_of_the_sessions_max_examples_leaves_out(tmp_path):
    """all_openings: the sessions max_examples takes, plus the opening of every other training session packed by
    world; without share_prefixes the recipe is refused before a model is loaded."""
    from benchmark.session import read_sessions
    from training.data import sft_examples

    out = tmp_path / "sft"
    cmd = [sys.executable, "training/sft.py", "--config", "configs/smoke_sft.yaml", "--output_dir", str(out),
           "--max_steps", "1", "--formats", "guided_action", "--chat_format", "text", "--max_examples", "10",
           "--all_openings", "true"]
    _run([*cmd, "--share_prefixes", "true"], tmp_path)
    info = json.loads((out / "cypherturn.json").read_text())
    per_session: dict[str, int] = {}
    for e in sft_examples(list(read_sessions(_train_build())), ("guided_action",), chat_tools=False, turns=[0]):
        per_session[e["session"]] = per_session.get(e["session"], 0) + 1
    # the 10 examples are whole sessions of about eight turns: one or two sessions, whose openings are not added
    left_out = {sum(per_session.values()) - per_session[a] - (per_session[b] if b != a else 0)
                for a in per_session for b in per_session}
    assert info["all_openings"] in left_out and info["all_openings"] >= len(per_session) - 2 > 0
    assert info["examples"] == 10 + info["all_openings"]
    refused = subprocess.run([*cmd, "--output_dir", str(tmp_path / "refused")], cwd=ROOT, env=_env(tmp_path),
                             capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0 and "all_openings" in refused.stderr
    assert not (tmp_path / "refused").exists()


def test_full_fine_tuning_writes_a_whole_model_that_evaluate_scores(tmp_path):
    out = tmp_path / "full"
    _run([sys.executable, "training/sft.py", "--config", "configs/smoke_sft.yaml", "--output_dir", str(out),
          "--max_steps", "1", "--use_peft", "false", "--formats", "paper", "--chat_format", "text"], tmp_path)
    assert (out / "model.safetensors").is_file() and not (out / "adapter_config.json").exists()
    marker = json.loads((out / "cypherturn.json").read_text())
    assert marker["chat_format"] == "text" and marker["formats"] == ["paper"]
    (digest,) = _digests(out)
    assert digest["before"] != digest["after"]
    summary, meta = _evaluate(out, tmp_path)
    assert meta["chat_format"] == "text" and summary["turns_scored"] > 0


def test_sft_resumes_from_its_last_checkpoint(tmp_path):
    out = tmp_path / "resume"
    common = [sys.executable, "training/sft.py", "--config", "configs/smoke_sft.yaml", "--output_dir", str(out),
              "--save_strategy", "steps", "--save_steps", "1", "--resume_from_checkpoint", "auto"]
    _run(common + ["--max_steps", "1"], tmp_path)
    first = json.loads((out / "checkpoint-1" / "cypherturn.json").read_text())
    assert first["global_step"] == 1 and first["base_model"] == "tiny-llama"  # intermediate checkpoints are evaluable
    assert json.loads((out / "checkpoint-1" / "adapter_config.json").read_text())["base_model_name_or_path"] == "tiny-llama"
    proc = _run(common + ["--max_steps", "2"], tmp_path)
    assert json.loads((out / "cypherturn.json").read_text())["global_step"] == 2
    losses = [h["step"] for h in json.loads((out / "trainer_state.json").read_text())["log_history"] if "loss" in h]
    assert losses == [1, 2]  # step 1 came from checkpoint-1's state, step 2 was trained now
    assert f"resuming from {out / 'checkpoint-1'}" in proc.stdout


def test_grpo_multi_turn_calls_the_plugin_reward_and_logs_what_it_returned(tmp_path):
    out = tmp_path / "grpo"
    _run([sys.executable, "training/grpo.py", "--config", "configs/smoke_grpo.yaml", "--output_dir", str(out),
          "--max_steps", "1", "--reward", "env:1", f"{PLUGIN}:0.5"], tmp_path)
    calls = [json.loads(line) for line in (tmp_path / "rewards.jsonl").read_text().splitlines()]
    values = [v for c in calls for v in c["values"]]
    assert len(values) == 2  # one step: 1 prompt x 2 generations
    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    step = next(h for h in history if "rewards/length_reward/mean" in h)
    assert step["rewards/length_reward/mean"] == pytest.approx(sum(values) / len(values))
    assert "rewards/env_reward/mean" in step and 0.0 <= step["rewards/env_reward/mean"] <= 1.0
    marker = json.loads((out / "cypherturn.json").read_text())
    assert marker["mode"] == "multi_turn" and marker["chat_format"] == "tools"
    assert marker["rewards"] == ["env:1", f"{PLUGIN}:0.5"]
    summary, meta = _evaluate(out, tmp_path)
    assert meta["chat_format"] == "tools" and summary["turns_scored"] > 0


def test_grpo_single_turn_continues_the_sft_adapter_and_writes_an_evaluable_checkpoint(sft_checkpoint, tmp_path):
    out = tmp_path / "grpo-single"
    _run([sys.executable, "training/grpo.py", "--config", "configs/smoke_grpo_single_turn.yaml", "--output_dir",
          str(out), "--max_steps", "1", "--model_name_or_path", str(sft_checkpoint)], tmp_path)
    # GRPO trained the SFT adapter further; the checkpoint still names the original base
    assert json.loads((out / "adapter_config.json").read_text())["base_model_name_or_path"] == "tiny-llama"
    assert json.loads((out / "cypherturn.json").read_text())["base_model"] == "tiny-llama"
    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    step = next(h for h in history if "reward" in h)
    for name in ("format_reward", "answer_reward", "key_value_reward", "triple_reward", "execution_reward"):
        assert f"rewards/{name}/mean" in step, name
    assert all(-1.0 <= step[f"rewards/{n}_reward/mean"] <= 1.0 for n in ("format", "answer", "key_value", "triple"))
    assert json.loads((out / "cypherturn.json").read_text())["chat_format"] == "text"
    summary, meta = _evaluate(out, tmp_path)
    assert meta["chat_format"] == "text" and summary["turns_scored"] > 0


def test_two_accelerate_processes_train_the_same_model(tmp_path):
    out = tmp_path / "ddp"
    # accelerate 1.x sends `--cpu` to its single-process launcher whatever --num_processes says; `--multi_gpu`
    # takes torchrun's, and the recipe's use_cpu makes each rank a CPU process on gloo (DistributedType.MULTI_CPU)
    _run([sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
          "--mixed_precision", "no", "--dynamo_backend", "no", "training/grpo.py", "--config",
          "configs/smoke_grpo.yaml", "--output_dir", str(out), "--max_steps", "2", "--reward", "env:1",
          f"{PLUGIN}:0.5"], tmp_path, timeout=1200)
    digests = _digests(out)
    assert [d["rank"] for d in digests] == [0, 1] and all(d["world_size"] == 2 for d in digests)
    assert digests[0]["before"] == digests[1]["before"]
    assert digests[0]["after"] == digests[1]["after"]  # gradients were all-reduced: one model
    assert digests[0]["after"] != digests[0]["before"]  # and it trained
    pids = {json.loads(line)["pid"] for line in (tmp_path / "rewards.jsonl").read_text().splitlines()}
    assert len(pids) == 2  # both ranks generated and scored their own rollouts


# -- in-process: the data the scripts train on ------------------------------------------------------------
@pytest.fixture(scope="module")
def sessions():
    from benchmark.session import read_sessions

    return list(read_sessions(_train_build()))


def test_paper_responses_score_plus_one_on_the_four_paper_rewards(sessions):
    from rewards.paper import answer_reward, format_reward, key_value_reward, triple_reward
    from training.data import paper_response

    turns = [t for s in sessions for t in s.turns]
    completions = [[{"role": "assistant", "content": paper_response(t)}] for t in turns]
    kwargs = {"gold_cypher": [t.gold_cypher for t in turns], "gold_key_values": [t.gold_key_values for t in turns],
              "gold_triples": [t.gold_triples for t in turns]}
    for reward in (format_reward, answer_reward, key_value_reward, triple_reward):
        assert reward([None] * len(turns), completions, **kwargs) == [1.0] * len(turns), reward.__name__


def test_flat_tool_calls_render_like_structured_ones(sessions):
    from envs.models import load_tokenizer
    from envs.trl_adapter import CypherTurnToolEnv, make_training_rows, tool_schemas
    from training.data import flat_messages, oracle_tool_conversation

    env = CypherTurnToolEnv(sessions=sessions)
    row = make_training_rows(sessions[:1], "guided", turns=[1])[0]
    structured = oracle_tool_conversation(env, row, sessions)
    tok = load_tokenizer("tiny-llama")
    tools = tool_schemas()
    render = lambda m: tok.apply_chat_template(m, tools=tools, tokenize=False)  # noqa: E731
    flat = flat_messages(structured)
    assert all(set(m) == {"role", "content"} for m in flat)
    assert render(flat) == render(structured)


def test_env_reward_plays_a_final_text_answer_as_a_submission(sessions):
    from envs.trl_adapter import CypherTurnToolEnv, env_reward, make_training_rows
    from training.data import paper_response

    s = sessions[0]
    rows = make_training_rows([s], "guided", turns=[0])
    envs = [CypherTurnToolEnv(sessions=sessions, expose_reward=False) for _ in range(3)]
    for e in envs:
        e.reset(**rows[0])
    completions = [[{"role": "assistant", "content": paper_response(s.turns[0])}],
                   [{"role": "assistant", "content": "I am not sure."}],
                   [{"role": "assistant", "content": "<answer>MATCH (n) RETURN count(n) AS n</answer>"}]]
    assert env_reward(None, completions, environments=envs) == [1.0, 0.0, 0.0]


def test_reward_specs_resolve_like_python_m_rewards(sessions):
    import rewards
    from training.trainers import resolve_rewards

    funcs, weights = resolve_rewards(["env:2", "format:1", "execution_relaxed"], multi_turn=True)
    assert [f.__name__ for f in funcs][1:] == ["format_reward", "execution_relaxed_reward"]
    assert weights == [2.0, 1.0, 1.0]
    with pytest.raises(rewards.RewardSpecError):
        resolve_rewards(["env:1"], multi_turn=False)
    with pytest.raises(rewards.RewardSpecError):
        resolve_rewards(["no_such_reward:1"], multi_turn=True)


def test_holdout_keeps_every_world_on_both_sides(sessions):
    from training.data import split_sessions

    sessions = sessions + [dataclasses.replace(s, id=s.id + "-copy") for s in sessions]  # two per world
    train, held = split_sessions(sessions, 0.5)
    assert {s.world for s in train} == {s.world for s in held} == {s.world for s in sessions}
    assert not {s.id for s in train} & {s.id for s in held} and len(train) + len(held) == len(sessions)
    assert split_sessions(sessions, 0.5) == (train, held)  # deterministic
    with pytest.raises(ValueError):
        split_sessions(sessions, 1.0)


def test_guided_action_examples_answer_the_turn_prompt_with_the_gold_submission(sessions):
    from envs.actions import SEARCH, SUBMIT, parse_action
    from rewards.completions import extract_query
    from scoring.judge import shared_judge
    from training.data import MAX_SEARCHES, canonical_variables, sft_examples

    judge, renumbered = shared_judge(), 0

    chosen = sessions[:2] + [s for s in sessions[2:] if any(t.typed_names for t in s.turns)][:2]
    assert any(t.typed_names for s in chosen for t in s.turns)  # the lookups below are exercised
    examples = sft_examples(chosen, ["guided_action"], chat_tools=False)
    by_id = {s.id: s for s in chosen}
    answers = [e for e in examples if e["messages"][-1]["content"].startswith("SUBMIT_ANSWER")]
    assert len(answers) == sum(len(s.turns) for s in chosen)  # one answer a turn
    searches = 0
    for e in examples:
        turn = by_id[e["session"]].turns[e["turn"]]
        typed = turn.typed_names[:MAX_SEARCHES]
        roles = [m["role"] for m in e["messages"]]
        assert roles[:2] == ["system", "user"] and roles[-1] == "assistant" and e["tools"] is None
        assert f"(turn {e['turn'] + 1})" in e["messages"][1]["content"]
        action = parse_action(e["messages"][-1]["content"])
        looked_up = (len(roles) - 3) // 2  # the lookups played before this row's action
        if action.type == SEARCH:
            # a name the user typed, looked up as typed: the row teaches the lookup, the next row the answer
            searches += 1
            assert action.argument["query"] == typed[looked_up]["typed"]
            assert action.argument["query"] in e["messages"][1]["content"]
            assert typed[looked_up]["stored"] != typed[looked_up]["typed"]
        else:
            # the gold with its variables numbered by first appearance: the same rows on the real Neo4j
            assert action.type == SUBMIT and action.argument == canonical_variables(turn.gold_cypher)
            assert extract_query(e["messages"][-1]["content"], "action") == action.argument
            assert judge.judge(by_id[e["session"]].world, turn.gold_cypher, action.argument).ex == 1
            renumbered += action.argument != turn.gold_cypher
            assert looked_up == len(typed)
            # the stored name the answer uses is shown to the model, by the lookups' observations
            for t, observation in zip(typed, e["messages"][3::2]):
                assert observation["role"] == "user" and t["stored"] in observation["content"]
    assert searches == sum(len(t.typed_names[:MAX_SEARCHES]) for s in chosen for t in s.turns) > 0
    assert renumbered > 0


def test_canonical_variables_renumbers_the_generators_variables_only():
    from training.data import canonical_variables

    query = ("MATCH (a_n75:Genre {name: 'Saga n75'})<-[:IN_GENRE]-(m_n75:Film)-[e_n75:BY]->(n75:Studio)\n"
             "WITH DISTINCT n75\nMATCH (n75)<-[:OWNS]-(n9:Group)\n"
             "RETURN any(x IN collect(n9) WHERE x.n2 = 1) AS any_n2")
    assert canonical_variables(query) == (
        "MATCH (a_n1:Genre {name: 'Saga n75'})<-[:IN_GENRE]-(m_n1:Film)-[e_n1:BY]->(n1:Studio)\n"
        "WITH DISTINCT n1\nMATCH (n1)<-[:OWNS]-(n2:Group)\n"
        "RETURN any(x IN collect(n2) WHERE x.n2 = 1) AS any_n2")
    assert canonical_variables(canonical_variables(query)) == canonical_variables(query)


def test_inline_string_filters_moves_string_tests_of_a_lone_node_into_its_pattern():
    from training.data import inline_string_filters

    assert inline_string_filters("MATCH (n1:Ward)\nWHERE n1.ward_type = 'general'\nRETURN DISTINCT n1.name AS name") \
        == "MATCH (n1:Ward {ward_type: 'general'})\nRETURN DISTINCT n1.name AS name"
    # other tests stay in the WHERE; only the node the MATCH line binds is touched
    assert inline_string_filters("MATCH (n2:Grant)\nWHERE n2.kind = 'seed' AND n2.renewed = true AND n2.x CONTAINS 'a' "
                                 "AND n9.y = 'b'\nMATCH (n2)<-[:LEADS]-(n6:Researcher)\nRETURN n6.name AS name") == (
        "MATCH (n2:Grant {kind: 'seed'})\nWHERE n2.renewed = true AND n2.x CONTAINS 'a' AND n9.y = 'b'\n"
        "MATCH (n2)<-[:LEADS]-(n6:Researcher)\nRETURN n6.name AS name")
    unchanged = [
        "MATCH (n1:Sponsor)\nWHERE NOT coalesce(n1.sector = 'fashion', false)\nRETURN 1",  # not a plain conjunction
        "MATCH (n1:A)\nWHERE n1.x = 'a' OR n1.x = 'b'\nRETURN 1",
        "MATCH (a_n1:G {name: 'S'})<-[:IN]-(n1:F)\nWHERE n1.x = 'a'\nRETURN 1",  # a path, not a lone node
        "MATCH (n1:A)\nWITH DISTINCT n1\nWHERE n1.x = 'a'\nRETURN 1",  # a WHERE after WITH
        "MATCH (n1:A)\nWHERE n1.x > 'a'\nRETURN 1",  # not an equality
    ]
    for query in unchanged:
        assert inline_string_filters(query) == query
    # a second test of the same property stays a test: a map cannot hold one key twice
    assert inline_string_filters("MATCH (n1:A)\nWHERE n1.x = 'a' AND n1.x = 'b'\nRETURN 1") == \
        "MATCH (n1:A {x: 'a'})\nWHERE n1.x = 'b'\nRETURN 1"


def test_inline_filter_answers_return_the_golds_rows_on_the_real_graph(sessions):
    from envs.actions import SUBMIT, parse_action
    from scoring.judge import shared_judge
    from training.data import sft_examples

    judge, inlined, copied = shared_judge(), 0, 0
    chosen = [s for s in sessions if any("\nWHERE " in t.gold_cypher for t in s.turns)][:12]
    by_id = {s.id: s for s in chosen}
    for e in sft_examples(chosen, ["guided_action"], chat_tools=False, lookups="new_names", search_scope="graph",
                          inline_filters=True):
        action = parse_action(e["messages"][-1]["content"])
        if action.type != SUBMIT:
            continue
        turn = by_id[e["session"]].turns[e["turn"]]
        assert judge.judge(by_id[e["session"]].world, turn.gold_cypher, action.argument).ex == 1
        first = action.argument.split("\n", 1)[0]
        if " {" in first and "{" not in turn.gold_cypher.split("\n", 1)[0]:
            inlined += 1
            # where the turn looked the value up, the answer's node pattern is the one the lookup showed
            pattern = "(:" + first.split(":", 1)[1]
            copied += any(pattern in m["content"] for m in e["messages"][3::2])
    assert inlined > 0 and copied > 0


def test_answer_first_paths_writes_an_anchored_path_from_its_answer_node():
    from training.data import answer_first_paths

    gold = ("MATCH (a_n2:Genre {name: 'Noir (1950s)'})<-[:IN_GENRE]-(m_n2:Film)-[:PRODUCED_BY]->(n2:Studio)\n"
            "WITH DISTINCT n2\nRETURN sum(n2.valuation_musd) AS sum_valuation_musd")
    assert answer_first_paths(gold) == (
        "MATCH (n2:Studio)<-[:PRODUCED_BY]-(m_n2:Film)-[:IN_GENRE]->(a_n2:Genre {name: 'Noir (1950s)'})\n"
        "WITH DISTINCT n2\nRETURN sum(n2.valuation_musd) AS sum_valuation_musd")
    # each relationship keeps its direction, its variable, map and length; an undirected one stays so
    assert answer_first_paths("MATCH (a_n1:A {name: 'x'})-[e_n1:R {w: 1}]->(n1:B)") == \
        "MATCH (n1:B)<-[e_n1:R {w: 1}]-(a_n1:A {name: 'x'})"
    assert answer_first_paths("MATCH (a_n1:A)-[:R*1..2]-(n1:B)") == "MATCH (n1:B)-[:R*1..2]-(a_n1:A)"
    assert answer_first_paths("MATCH (a_n1:A)-->(m_n1)<--(n1:B)") == "MATCH (n1:B)-->(m_n1)<--(a_n1:A)"
    unchanged = [
        "MATCH (a_n1:A)-[:R]->(n1:B), (n1)--(z:C)",  # two patterns
        "MATCH (a_n1:A)-[:R]->(n1:B) WHERE n1.x = 1",  # a WHERE on the line
        "MATCH (n1:A)-[:R]->(a_n1:B)",  # already from the answer
        "MATCH (a_n1:A)-[:R]->(b:B)",  # not ending at an answer node
        "MATCH (n1)<-[:LEADS]-(n6:Researcher)",  # a step from an earlier result
        "OPTIONAL MATCH (a_n1:A)-[:R]->(n1:B)",
        "MATCH (a_n1:A {name: 'x)'}",  # not Cypher: left alone, not raised
    ]
    for query in unchanged:
        assert answer_first_paths(query) == query


def test_answer_first_answers_and_unseen_lookups_on_the_real_graph(sessions):
    """answer_first: every answer returns its gold's rows on the real Neo4j, and an anchored opening starts with
    the answer's label. lookups=unseen: a later turn that needs a stored spelling its prompt does not show looks
    it up as an earlier question typed it, so fewer answers name a value no message of theirs shows."""
    from envs.actions import SEARCH, SUBMIT, parse_action
    from scoring.judge import shared_judge
    from training.config import RecipeError
    from training.data import names_to_look_up, sft_examples

    chosen = [s for s in sessions if any(t.typed_names for t in s.turns[:1])
              and any(t.gold_cypher.startswith("MATCH (a_") for t in s.turns)][:8]
    by_id = {s.id: s for s in chosen}
    judge = shared_judge()

    def unshown(examples):
        count = 0
        for e in examples:
            if not e["messages"][-1]["content"].startswith("SUBMIT_ANSWER"):
                continue
            turn, text = by_id[e["session"]].turns[e["turn"]], "\n".join(m["content"] for m in e["messages"][:-1])
            count += any(isinstance(kv.get("value"), str) and kv["value"] not in text for kv in turn.gold_key_values)
        return count

    new = sft_examples(chosen, ["guided_action"], chat_tools=False, lookups="new_names", search_scope="graph")
    unseen = sft_examples(chosen, ["guided_action"], chat_tools=False, lookups="unseen", search_scope="graph",
                          inline_filters=True, answer_first=True)
    assert unshown(unseen) < unshown(new)
    anchored = earlier = 0
    for e in unseen:
        session = by_id[e["session"]]
        turn = session.turns[e["turn"]]
        action = parse_action(e["messages"][-1]["content"])
        if action.type == SEARCH:
            looked = action.argument
            wanted = names_to_look_up(session, e["turn"], turn.shown_utterance, "unseen",
                                      prompt=e["messages"][1]["content"])
            name = next(t for t in wanted if t["typed"] == looked)
            if name["kind"] == "earlier":  # typed in an earlier question, not this one
                earlier += 1
                assert e["turn"] > 0 and looked in e["messages"][1]["content"].split("Current question")[0]
            continue
        assert action.type == SUBMIT
        assert judge.judge(session.world, turn.gold_cypher, action.argument).ex == 1
        if turn.gold_cypher.startswith("MATCH (a_") and e["turn"] == 0:
            anchored += 1
            assert action.argument.startswith("MATCH (n1:") and "(a_n1:" in action.argument.split("\n")[0]
    assert anchored > 0 and earlier > 0
    with pytest.raises(RecipeError, match="prompt"):
        names_to_look_up(chosen[0], 1, chosen[0].turns[1].shown_utterance, "unseen")


def test_path_probe_lists_the_relationship_types_from_the_answer_to_the_named_node():
    from training.data import path_probe, probed_answer

    gold = ("MATCH (a_n1:Squad {name: 'Team R'})-[:OWNS]->(m_n1:Microservice)-[:DEPLOYED_ON]->(n1:Cluster)\n"
            "WITH DISTINCT n1\nWHERE n1.region = 'north'\nRETURN DISTINCT n1.name AS name")
    assert path_probe(gold) == ("MATCH p = (:Cluster)-[*..2]-(:Squad {name: 'Team R'})\n"
                                "RETURN DISTINCT [x IN relationships(p) | ':' + type(x)] AS path")
    # the answer copies the row: the probe's order, undirected, the unnamed node without its label
    assert probed_answer(gold) == ("MATCH (n1:Cluster)-[:DEPLOYED_ON]-(m_n1)-[:OWNS]-(a_n1:Squad {name: 'Team R'})\n"
                                   "WITH DISTINCT n1\nWHERE n1.region = 'north'\nRETURN DISTINCT n1.name AS name")
    # between two nodes of one label the direction is the question's, not the probe's: kept
    assert probed_answer("MATCH (n1:Film)<-[:INSPIRED_BY]-(a_n1:Film {title: 'X'})\nRETURN n1.title AS t") == \
        "MATCH (n1:Film)<-[:INSPIRED_BY]-(a_n1:Film {title: 'X'})\nRETURN n1.title AS t"
    for unserved in ("MATCH (n1:Director {style: 'commercial'})\nRETURN n1.name AS name",  # no path
                     "MATCH (a_n1:A)-[:R]->(n1:B)\nWHERE a_n1.name = 'x'\nRETURN n1.name",  # anchor not in the pattern
                     "MATCH (a_n1:A {name: 'x'})-[:R]->(m:B)-[:S]->(m2:C)-[:T]->(n1:D)\nRETURN n1.name",  # 3 hops
                     "MATCH (a_n1:A {name: 'x'})-[:R*1..2]->(n1:B)\nRETURN n1.name",  # a variable length
                     "MATCH (n1)<-[:LEADS]-(n6:Researcher)\nRETURN n1.name"):
        assert path_probe(unserved) is None and probed_answer(unserved) == unserved


def test_path_probes_on_the_real_graph_show_the_gold_types_and_the_answer_copies_them(sessions):
    """path_probes: each probe runs on the real Neo4j before its answer, within the guided turn's three actions;
    its result holds the row of the gold's relationship types, the answer walks exactly those and returns the
    gold's rows; a renamed example renames probe, row and answer alike; GRPO prompts end after the probe."""
    import json
    import random

    from envs.actions import EXECUTE, SUBMIT, parse_action
    from envs.prompts import GUIDED_CAP
    from scoring.judge import shared_judge
    from training.config import RecipeError
    from training.data import grpo_rows, path_probe, sft_examples
    from training.renaming import renamed_conversation

    chosen = [s for s in sessions if path_probe(s.turns[0].gold_cypher)][:6]
    assert chosen, "the training build has anchored openings"
    by_id = {s.id: s for s in chosen}
    examples = sft_examples(chosen, ["guided_action"], chat_tools=False, lookups="unseen", search_scope="graph",
                            inline_filters=True, answer_first=True, path_probes=True)
    judge = shared_judge()
    probed = 0
    for e in examples:
        action = parse_action(e["messages"][-1]["content"])
        actions = [m for m in e["messages"][2:] if m["role"] == "assistant"]
        assert len(actions) <= GUIDED_CAP
        if action.type != SUBMIT:
            continue
        turn = by_id[e["session"]].turns[e["turn"]]
        assert judge.judge(by_id[e["session"]].world, turn.gold_cypher, action.argument).ex == 1
        probes = [i for i, m in enumerate(e["messages"]) if m["role"] == "assistant"
                  and parse_action(m["content"]).type == EXECUTE]
        if not probes:
            continue
        probed += 1
        observation = e["messages"][probes[0] + 1]["content"]
        types = re.findall(r"-\[(:\w+)\]", action.argument.split("\n")[0])
        assert json.dumps(types) in observation.split("\n")  # the answer's types are a row of the probe
        assert "(m_n1)" in action.argument or len(types) == 1
        renamed = renamed_conversation(e["messages"], by_id[e["session"]].world, random.Random(0))
        new_types = re.findall(r"-\[(:\w+)\]", renamed[-1]["content"].split("\n")[0])
        assert new_types != types and json.dumps(new_types) in renamed[probes[0] + 1]["content"].split("\n")
    assert probed >= len(chosen)  # every chosen opening at least
    rows = grpo_rows(chosen, "single_turn", turns=[0], lookups="unseen", search_scope="graph", path_probes=True)
    assert all(parse_action(r["prompt"][-2]["content"]).type == EXECUTE for r in rows)
    with pytest.raises(RecipeError, match="lookups"):
        grpo_rows(chosen, "single_turn", turns=[0], path_probes=True)


def test_set_recall_runs_the_set_a_follow_up_builds_on_before_its_answer(sessions):
    """set_recall: a follow-up first runs again, on the real Neo4j, the answer that built the set it builds on
    (the judge scores it EX 1 against that turn's gold) and sees its real rows; its answer follows within the
    guided turn's three actions; an opening or a topic shift runs nothing; without the option nothing runs."""
    from envs.actions import EXECUTE, SUBMIT, parse_action
    from envs.prompts import GUIDED_CAP
    from scoring.judge import shared_judge
    from training.data import sft_examples

    by_id = {s.id: s for s in sessions}
    options = dict(chat_tools=False, lookups="unseen", search_scope="graph", inline_filters=True, answer_first=True)
    examples = sft_examples(sessions, ["guided_action"], set_recall=True, **options)
    judge = shared_judge()
    recalled = 0
    for e in examples:
        actions = [parse_action(m["content"]) for m in e["messages"][2:] if m["role"] == "assistant"]
        assert len(actions) <= GUIDED_CAP
        if actions[-1].type != SUBMIT:
            continue
        session = by_id[e["session"]]
        source = session.set_turn(e["turn"])
        runs = [a for a in actions if a.type == EXECUTE]
        if source is None:
            assert not runs
            continue
        if len(actions) == GUIDED_CAP and not runs:  # two lookups took the actions a recall needs
            continue
        assert actions[0].type == EXECUTE and len(runs) == 1
        recalled += 1
        assert judge.judge(session.world, session.turns[source].gold_cypher, runs[0].argument).ex == 1
        observation = e["messages"][3]["content"]
        assert observation.startswith("[Query Result]")
        assert observation.split("\n")[2].split(" | ")[0] in {str(r[0]) for r in session.turns[source].gold_rows}
        assert judge.judge(session.world, session.turns[e["turn"]].gold_cypher, actions[-1].argument).ex == 1
    assert recalled >= 3
    plain = sft_examples(sessions, ["guided_action"], **options)
    assert not any(m["content"].startswith("EXECUTE_CYPHER") for e in plain for m in e["messages"])


def test_lora_layers_puts_the_adapter_on_the_top_layers_only():
    from peft import get_peft_model
    from trl import ModelConfig, get_peft_config

    from training.trainers import load_for_training, top_layers_only

    # SmolLM2-135M (30 layers), the CPU recipe's model
    args = ModelConfig(model_name_or_path="smollm2-135m", use_peft=True, lora_r=4, lora_target_modules="all-linear")
    model, _, peft_config, _ = load_for_training(args, lora_layers=2)
    total = model.config.num_hidden_layers
    trainable = [n for n, p in get_peft_model(model, peft_config).named_parameters() if p.requires_grad]
    assert {n.split(".layers.")[1].split(".")[0] for n in trainable} == {str(total - 2), str(total - 1)}
    assert all("lora_" in n for n in trainable) and len(trainable) == 2 * 7 * 2  # 2 layers x 7 modules x A, B
    # The refusals, on the model already loaded (each load_for_training call converts the GGUF anew)
    for bad in (0, total + 1):
        with pytest.raises(ValueError, match="lora_layers"):
            top_layers_only(get_peft_config(args), model, bad)
    with pytest.raises(ValueError, match="use_peft"):  # refused before the model is loaded
        load_for_training(ModelConfig(model_name_or_path="smollm2-135m"), lora_layers=1)


def test_new_names_lookups_look_up_each_name_at_its_first_mention(sessions):
    """lookups=new_names: the typed names as before, and a SEARCH_VALUES before every name the question says word
    for word for the first time in the session (its observation shows the stored value); a name an earlier
    turn named is not looked up again."""
    import re

    from envs.actions import SEARCH, parse_action
    from training.data import MAX_SEARCHES, names_to_look_up, sft_examples

    chosen = sessions[:3]
    typed = sft_examples(chosen, ["guided_action"], chat_tools=False)
    new = sft_examples(chosen, ["guided_action"], chat_tools=False, lookups="new_names")
    by_id = {s.id: s for s in chosen}

    def lookups(examples):
        out = {}
        for e in examples:
            action = parse_action(e["messages"][-1]["content"])
            if action.type == SEARCH:
                out.setdefault((e["session"], e["turn"]), []).append(action.argument["query"])
        return out

    plain, extra = lookups(typed), lookups(new)
    exact = 0
    for (sid, index), queries in extra.items():
        session = by_id[sid]
        turn = session.turns[index]
        assert queries[:len(plain.get((sid, index), []))] == plain.get((sid, index), [])  # the typed ones first
        earlier = {kv["value"] for t in session.turns[:index] for kv in t.gold_key_values}
        for q in queries[len(plain.get((sid, index), [])):]:
            exact += 1
            assert q not in earlier and re.search(rf"(?<!\w){re.escape(q)}(?!\w)", turn.shown_utterance)
            assert any(kv["value"] == q for kv in turn.gold_key_values)
        assert len(queries) <= MAX_SEARCHES
    assert exact > 0 and set(plain) <= set(extra)
    # every lookup's observation shows the stored value the answer then uses
    for e in new:
        for action, observation in zip(e["messages"][2::2], e["messages"][3::2]):
            looked = json.loads(action["content"].split(" ", 1)[1])["query"]
            stored = next(t["stored"] for t in names_to_look_up(by_id[e["session"]], e["turn"],
                                                                by_id[e["session"]].turns[e["turn"]].shown_utterance,
                                                                "new_names") if t["typed"] == looked)
            assert stored in observation["content"]
    from training.config import RecipeError

    with pytest.raises(RecipeError, match="lookups"):
        sft_examples(chosen, ["guided_action"], chat_tools=False, lookups="all")


def test_graph_scope_lookups_search_the_typed_text_and_the_answer_copies_the_pattern_shown(sessions):
    """search_scope=graph: each lookup is SEARCH_VALUES <the text as typed>; its observation (the environment's
    own) shows the stored value as a node pattern whose label, property and value the answer uses."""
    from envs.actions import SEARCH, parse_action
    from graphs.cypher_syntax import string_literal
    from training.config import RecipeError
    from training.data import names_to_look_up, sft_examples

    chosen = sessions[:3]
    examples = sft_examples(chosen, ["guided_action"], chat_tools=False, lookups="new_names", search_scope="graph")
    by_id = {s.id: s for s in chosen}
    graph_lookups = typed_lookups = 0
    for e in examples:
        if len(e["messages"]) < 4:
            continue
        turn = by_id[e["session"]].turns[e["turn"]]
        wanted = {t["typed"]: t for t in names_to_look_up(by_id[e["session"]], e["turn"], turn.shown_utterance,
                                                          "new_names")}
        action, observation = parse_action(e["messages"][-3]["content"]), e["messages"][-2]["content"]
        assert action.type == SEARCH and observation.startswith("[Search] ")
        if isinstance(action.argument, str):  # the graph-wide form
            graph_lookups += 1
            name = wanted[action.argument]
            typed_lookups += name["kind"] != "exact"
            stored = string_literal(name["stored"])
            pattern = f"(:{name['label']} {{{name['property']}: {stored}}})"
            assert pattern in observation
            answer = by_id[e["session"]].turns[e["turn"]].gold_cypher
            assert stored in answer or name["stored"] in answer
    assert graph_lookups > 0 and typed_lookups > 0
    with pytest.raises(RecipeError, match="search_scope"):
        sft_examples(chosen, ["guided_action"], chat_tools=False, search_scope="everywhere")


def test_teacher_forced_probe_scores_an_adapters_gold_answers(sft_checkpoint, tmp_path):
    sessions = _train_build() / "sessions.jsonl"
    proc = _run([sys.executable, "scripts/teacher_forced_probe.py", str(sft_checkpoint), str(sessions),
                 "--sessions", "1", "--show", "2"], tmp_path)
    lines = proc.stdout.strip().splitlines()
    figures = json.loads(lines[0])
    n_turns = len(json.loads(sessions.read_text().splitlines()[0])["turns"])
    assert figures["submit"]["n"] == n_turns  # one final SUBMIT_ANSWER a turn, besides any value lookups
    assert figures["opening_submit"]["n"] == 1 and figures["later_submit"]["n"] == n_turns - 1
    for part in ("all", "submit"):
        assert figures[part]["nll"] > 0 and 0 <= figures[part]["tok_acc"] <= 1
    assert len(lines) == 3 and all(line.split(":")[0].endswith(("turn 1", "turn 2")) for line in lines[1:])
    bad = subprocess.run([sys.executable, "scripts/teacher_forced_probe.py", str(tmp_path), str(sessions)],
                         cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True)
    assert bad.returncode == 2 and "holds no LoRA adapter" in bad.stderr
