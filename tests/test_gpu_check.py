"""scripts/gpu_check.py, the GPU check of the 3B GRPO recipe: its code path on CPU with a tiny model, and the
architecture it builds on a GPU (on the meta device: no memory)."""

import json
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import gpu_check  # noqa: E402


def test_the_model_is_qwen25_3b_architecture_with_random_weights():
    model = gpu_check.random_model(gpu_check.QWEN25_3B, torch.bfloat16, "meta")
    # Qwen2.5-3B's published parameter count (tied embeddings: the output layer is the input embedding)
    assert sum(p.numel() for p in model.parameters()) == 3_085_938_688
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert model.config.vocab_size == 151_936 and model.config.num_key_value_heads == 2


def test_word_tokenizer_covers_every_id_and_counts_words_as_tokens():
    tok = gpu_check.word_tokenizer(151_936)
    assert len(tok) == 151_936
    assert tok.decode([151_935, 7]) == "w151935 w7"
    assert tok.eos_token_id == 151_645 and tok.pad_token_id == 151_643
    assert len(tok("w5 w99 w151000")["input_ids"]) == 3


def test_recipe_settings_come_from_the_recipe_and_its_sft_lora():
    grpo, lora, other = gpu_check.recipe_settings(ROOT / "configs" / "qwen2.5-3b_grpo.yaml")
    assert grpo["num_generations"] == 10 and grpo["per_device_train_batch_size"] == 5
    assert lora["lora_r"] == 16 and lora["lora_target_modules"] == "all-linear"
    assert other["max_examples"] == 1000


def test_tiny_check_runs_grpo_steps_and_reports_them(tmp_path):
    out = tmp_path / "check"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--tiny", "--steps", "2",
                           "--variants", "recipe,one_micro_batch", "--tiny-completion-tokens", "8", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads((out / "gpu_check.json").read_text())
    assert [r["variant"] for r in results] == ["recipe", "one_micro_batch"]
    recipe, one = results
    assert (recipe["micro_batch"], recipe["gradient_accumulation_steps"]) == (5, 2)
    assert (one["micro_batch"], one["gradient_accumulation_steps"]) == (10, 1)
    for r in results:
        assert r["num_generations"] == 10 and r["lora_r"] == 16 and r["gradient_checkpointing"] is True
        assert len(r["step_s"]) == 2 and all(s > 0 for s in r["step_s"])
        assert r["completion_mean_length"] == [8.0, 8.0]  # a random model runs to the budget
        assert all(loss == loss for loss in r["losses"])  # finite, not NaN
        assert r["recipe_steps"] == 1000
    assert "| recipe (the recipe as shipped" in (out / "gpu_check.md").read_text()


def test_unknown_variant_is_refused(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--tiny", "--variants", "nope",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "unknown variant" in proc.stderr
