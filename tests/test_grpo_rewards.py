"""One real GRPOTrainer step on CPU with a tiny offline model, rewarded by the GRPO paper's four rewards,
the execution reward (on the real Neo4j) and a custom reward loaded by import path; the logged reward
components must be the ones these functions compute."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from benchmark.build import build
from benchmark.session import read_sessions
from envs.trl_adapter import make_training_rows

pytestmark = pytest.mark.neo4j

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing in this module may download
ROOT = Path(__file__).resolve().parent.parent
SPECS = ["format:1", "answer:1", "key_value:1", "triple:1", "execution:2", "my_rewards:concise_query_reward:0.5"]
SYSTEM = ("Answer with <reasoning><key_value>...</key_value><relationship>...</relationship></reasoning>"
          "<answer>CYPHER</answer>.")


def test_one_grpo_step_with_the_paper_rewards_execution_and_a_custom_reward(tmp_path, monkeypatch):
    import torch  # the train extra: its absence is a failure, not a skip
    from datasets import Dataset
    from test_trl_adapter import _tiny_tokenizer
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    import rewards

    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    build("train", tmp_path / "train", seed=3, sessions=2, hf=False)
    sessions = list(read_sessions(tmp_path / "train"))
    rows = make_training_rows(sessions, with_gold=True)[:2]
    for row, turn in zip(rows, [t for s in sessions for t in s.turns]):
        row["prompt"] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": turn.utterance}]
    dataset = Dataset.from_list(rows)

    funcs, weights = rewards.weighted(SPECS)  # the custom one by import path: examples/my_rewards.py
    calls: dict[str, list] = {}

    def recording(fn):
        def wrapper(prompts, completions, **kwargs):
            out = fn(prompts, completions, **kwargs)
            calls.setdefault(fn.__name__, []).append((prompts, completions, kwargs, out))
            return out

        wrapper.__name__ = fn.__name__
        return wrapper

    texts = [f"{SYSTEM} {r['prompt'][1]['content']} <answer>{r['gold_cypher']}</answer>" for r in rows]
    tok = _tiny_tokenizer(texts * 4)
    config = Qwen2Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         tie_word_embeddings=True, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                         bos_token_id=None)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        args = GRPOConfig(output_dir=str(tmp_path / "grpo"), max_steps=1, per_device_train_batch_size=4,
                          num_generations=4, max_completion_length=48, temperature=1.0, learning_rate=1e-4,
                          use_cpu=True, bf16=False, report_to="none", logging_steps=1, save_strategy="no", seed=0,
                          reward_weights=weights)
        trainer = GRPOTrainer(model=Qwen2ForCausalLM(config), args=args, train_dataset=dataset,
                              processing_class=tok, reward_funcs=[recording(f) for f in funcs])
        trainer.train()
    finally:
        torch.set_num_threads(threads)

    assert trainer.state.global_step == 1
    log = trainer.state.log_history[0]
    names = ["format_reward", "answer_reward", "key_value_reward", "triple_reward", "execution_reward",
             "concise_query_reward"]
    assert sorted(calls) == sorted(names) and trainer.reward_func_names == names
    per_sample = None
    for name, weight in zip(names, weights):
        (prompts, completions, kwargs, out), = calls[name]
        original = dict(zip(names, funcs))[name]
        assert original(prompts, completions, **kwargs) == out  # recomputed independently: the same values
        values = [math.nan if v is None else float(v) for v in out]
        finite = [v for v in values if not math.isnan(v)]
        if finite:
            assert log[f"rewards/{name}/mean"] == pytest.approx(sum(finite) / len(finite))
        weighted = [0.0 if math.isnan(v) else weight * v for v in values]
        per_sample = weighted if per_sample is None else [a + b for a, b in zip(per_sample, weighted)]
    assert log["reward"] == pytest.approx(sum(per_sample) / len(per_sample))
    # the paper's rewards are +1/-1 and the execution reward 0/1 on these (untrained) completions
    assert set(v for _, _, _, out in calls["format_reward"] for v in out) <= {1.0, -1.0}
    assert set(v for _, _, _, out in calls["execution_reward"] for v in out) <= {0.0, 1.0}
