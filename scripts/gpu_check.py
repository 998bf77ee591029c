"""The GPU check of the 3B GRPO recipe: peak memory and time per step at the recipe's real lengths.

    python scripts/gpu_check.py --out runs/gpu_check                    # on one CUDA GPU, at most ~9 minutes
    python scripts/gpu_check.py --tiny --steps 1 --out /tmp/gpu_check   # the same code path on CPU (a test runs it)

It runs TRL's ``GRPOTrainer`` with the GRPO settings of ``--recipe`` (default
``configs/qwen2.5-3b_grpo.yaml``: G = 10, micro-batches of 5, LoRA r = 16 on all linear layers as the SFT
recipe sets it, gradient checkpointing, bf16) on a randomly initialised model of Qwen2.5-3B's exact
architecture (36 layers, hidden size 2,048, 16 query and 2 key-value heads, vocabulary 151,936, tied
embeddings), with HF generation (vLLM is not installed where this runs). Nothing is downloaded: the model
is built from its config and the tokenizer is a word-level one over the same 151,936 ids (``w<id>``, with
Qwen's special tokens at Qwen's ids), so a prompt of N words is N tokens.

Lengths: a guided turn prompt with the five tool schemas declared is about 1,930 tokens (2,515 at most),
measured on training sessions (README, hardware notes); the recipe's completion budget is
``max_completion_length`` (768). A random model almost never samples its end-of-sequence token, so every
completion runs to the budget: the worst case for both memory and time. Rewards are seeded random numbers,
so advantages are not zero and every step trains as a real one does (the reward's own cost is not measured;
the environment's tool calls are not made: their results count towards the same completion budget).

Each variant (``--variants``; the first is the recipe as shipped with ``--use_vllm false``) runs in its own
process, so one that runs out of memory is reported as such and the others still run. Per variant: peak
memory allocated and reserved, seconds per step (the first step apart, as warm-up), the generation share,
completion lengths, and the recipe's projected wall time (its ``max_examples`` prompts x epochs, one prompt
per step on one GPU, at the median step time). Written to ``OUT/gpu_check.json`` and ``OUT/gpu_check.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from dataclasses import fields
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Qwen2.5-3B(-Instruct)'s config.json, as published
QWEN25_3B = dict(hidden_size=2048, intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16,
                 num_key_value_heads=2, max_position_embeddings=32768, rope_theta=1_000_000.0, rms_norm_eps=1e-6,
                 vocab_size=151_936, tie_word_embeddings=True, hidden_act="silu", use_sliding_window=False,
                 max_window_layers=36, bos_token_id=151_643, eos_token_id=151_645)
TINY = {**QWEN25_3B, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4}
SPECIAL = {"<|endoftext|>": 151_643, "<|im_start|>": 151_644, "<|im_end|>": 151_645}

GUIDED_PROMPT_TOKENS = 1930  # mean guided turn prompt with the tool schemas (README, hardware notes)
LONGEST_PROMPT_TOKENS = 2515  # the longest one

# name -> (what it changes, GRPOConfig overrides, prompt tokens or None for --prompt-tokens)
VARIANTS: dict[str, tuple[str, dict, int | None]] = {
    "recipe": ("the recipe as shipped (HF generation)", {}, None),
    "longest_prompt": ("the longest guided prompt", {}, LONGEST_PROMPT_TOKENS),
    "completion_512": ("completion budget 512", {"max_completion_length": 512}, None),
    "one_micro_batch": ("all 10 completions in one micro-batch",
                        {"per_device_train_batch_size": 10, "gradient_accumulation_steps": 1}, None),
    # last: transformers may compile the forward for a static cache, minutes on the first step
    "static_cache": ("static KV cache for generation", {"cache_implementation": "static"}, None),
}


def word_tokenizer(vocab_size: int):
    """A word-level tokenizer over ids 0..vocab_size-1 (``w<id>``, Qwen's special tokens at their ids)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    by_id = {i: f"w{i}" for i in range(vocab_size)}
    for text, i in SPECIAL.items():
        by_id[i] = text
    tok = Tokenizer(models.WordLevel({t: i for i, t in by_id.items()}, unk_token="<|endoftext|>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", unk_token="<|endoftext|>")


def random_model(arch: dict, dtype, device: str):
    """Qwen2ForCausalLM of ``arch`` with random weights, built on ``device`` in ``dtype`` (seeded)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(**arch)
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    return model


def recipe_settings(recipe: Path) -> tuple[dict, dict, dict]:
    """(GRPOConfig fields of the recipe, its LoRA settings (from the SFT recipe it continues), other fields)."""
    import yaml
    from trl import GRPOConfig

    raw = yaml.safe_load(recipe.read_text())
    names = {f.name for f in fields(GRPOConfig)}
    grpo = {k: v for k, v in raw.items() if k in names}
    sft = recipe.with_name(recipe.name.replace("_grpo", "_sft"))
    lora_source = yaml.safe_load(sft.read_text()) if sft.is_file() and sft != recipe else raw
    lora = {k: lora_source[k] for k in ("lora_r", "lora_alpha", "lora_dropout", "lora_target_modules")
            if k in lora_source}
    return grpo, lora, {k: v for k, v in raw.items() if k not in names}


def variant_config(args, name: str, grpo: dict, cuda: bool):
    """(GRPOConfig, prompt tokens) of a variant: the recipe's GRPO settings with the variant's overrides, HF
    generation, ``args.steps`` steps each logged, nothing saved; short lengths with ``--tiny``."""
    from trl import GRPOConfig

    _, overrides, prompt_tokens = VARIANTS[name]
    prompt_tokens = prompt_tokens or args.prompt_tokens
    settings = {**grpo, **overrides, "use_vllm": False, "output_dir": str(Path(args.out) / "trainer" / name),
                "max_steps": args.steps, "save_strategy": "no", "report_to": "none", "logging_steps": 1,
                "log_completions": False, "seed": 0, "bf16": cuda, "use_cpu": not cuda}
    if args.tiny:
        prompt_tokens = min(prompt_tokens, args.tiny_prompt_tokens)
        settings["max_completion_length"] = min(settings.get("max_completion_length", 768), args.tiny_completion_tokens)
    settings.pop("max_tool_calling_iterations", None)  # no environment: one generation per rollout
    return GRPOConfig(**settings), prompt_tokens


def random_prompts(n: int, tokens: int) -> list[dict]:
    """``n`` seeded prompts of ``tokens`` random words each (one token a word, see word_tokenizer)."""
    rng = random.Random(0)
    return [{"prompt": " ".join(f"w{rng.randrange(100, 151_000)}" for _ in range(tokens))} for _ in range(n)]


def random_reward_func():
    """A reward of seeded random numbers: advantages are not zero, so every step trains."""
    reward_rng = random.Random(1)

    def random_reward(completions, **kwargs):
        return [reward_rng.random() for _ in completions]

    return random_reward


def lora_config(lora: dict):
    from peft import LoraConfig

    return LoraConfig(r=lora.get("lora_r", 16), lora_alpha=lora.get("lora_alpha", 32),
                      lora_dropout=lora.get("lora_dropout", 0.05),
                      target_modules=lora.get("lora_target_modules", "all-linear"), task_type="CAUSAL_LM")


def clock_steps(trainer, cuda: bool):
    """Times every training step and the generation inside it (CUDA synchronised, so the times are the
    GPU's): wraps the model's ``generate`` and adds a callback, whose ``steps`` and ``gen_per_step`` fill
    as the trainer runs."""
    import torch
    from transformers import TrainerCallback

    gen_seconds: list[float] = []
    target = trainer.model
    original = target.generate

    def timed_generate(*a, **kw):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        out = original(*a, **kw)
        if cuda:
            torch.cuda.synchronize()
        gen_seconds.append(time.perf_counter() - start)
        return out

    target.generate = timed_generate

    class StepClock(TrainerCallback):
        def __init__(self):
            self.begin, self.steps, self.gen_per_step = 0.0, [], []

        def on_step_begin(self, *a, **kw):
            self.begin, self.gen_mark = time.perf_counter(), len(gen_seconds)

        def on_step_end(self, *a, **kw):
            if cuda:
                torch.cuda.synchronize()
            self.steps.append(time.perf_counter() - self.begin)
            self.gen_per_step.append(sum(gen_seconds[self.gen_mark:]))

    clock = StepClock()
    trainer.add_callback(clock)
    return clock


def step_figures(log_history: list[dict], clock, grpo: dict, other: dict, prompts_per_step: int) -> dict:
    """Step times (the first apart, as warm-up), completion lengths, losses and the recipe's projected run."""
    logs = [entry for entry in log_history if "loss" in entry or "completions/mean_length" in entry]
    lengths = [e["completions/mean_length"] for e in logs if "completions/mean_length" in e]
    timed = clock.steps[1:] or clock.steps
    gen = clock.gen_per_step[1:] or clock.gen_per_step
    step_s = statistics.median(timed)
    epochs = float(grpo.get("num_train_epochs") or 1)
    full_steps = math.ceil(int(other.get("max_examples") or 1000) * epochs / max(prompts_per_step, 1))
    return {
        "step_s": [round(s, 2) for s in clock.steps], "median_step_s": round(step_s, 2),
        "generation_s_per_step": round(statistics.median(gen), 2) if gen else None,
        "completion_mean_length": lengths,
        "losses": [e.get("loss") for e in logs if "loss" in e],
        "recipe_steps": full_steps, "projected_hours": round(full_steps * step_s / 3600, 1),
    }


def run_variant(args, name: str) -> dict:
    """One variant in this process: a few GRPO steps; returns its measurements."""
    import torch
    from datasets import Dataset
    from trl import GRPOTrainer

    cuda = torch.cuda.is_available() and not args.tiny
    grpo, lora, other = recipe_settings(Path(args.recipe))
    config, prompt_tokens = variant_config(args, name, grpo, cuda)

    dtype = torch.bfloat16 if cuda else torch.float32
    t0 = time.perf_counter()
    model = random_model(TINY if args.tiny else QWEN25_3B, dtype, "cuda" if cuda else "cpu")
    build_s = time.perf_counter() - t0
    tok = word_tokenizer(model.config.vocab_size)
    params = sum(p.numel() for p in model.parameters())

    g = config.num_generations
    prompts_per_step = config.per_device_train_batch_size * config.gradient_accumulation_steps // g
    rows = random_prompts(max(prompts_per_step * args.steps, 1), prompt_tokens)
    peft = lora_config(lora)
    trainer = GRPOTrainer(model=model, reward_funcs=[random_reward_func()], args=config,
                          train_dataset=Dataset.from_list(rows), processing_class=tok, peft_config=peft)
    clock = clock_steps(trainer, cuda)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    trainer.train()
    gib = 1 << 30
    return {
        "variant": name, "what": VARIANTS[name][0], "device": torch.cuda.get_device_name() if cuda else "cpu",
        "model": "tiny Qwen2 (vocabulary 151,936)" if args.tiny else "Qwen2.5-3B architecture, random weights",
        "parameters": params, "model_build_s": round(build_s, 1), "dtype": str(dtype).replace("torch.", ""),
        "prompt_tokens": prompt_tokens, "max_completion_length": config.max_completion_length,
        "num_generations": g, "micro_batch": config.per_device_train_batch_size,
        "gradient_accumulation_steps": config.gradient_accumulation_steps,
        "generation_batch_size": config.generation_batch_size, "gradient_checkpointing": config.gradient_checkpointing,
        "cache_implementation": config.cache_implementation, "lora_r": peft.r,
        "peak_allocated_gib": round(torch.cuda.max_memory_allocated() / gib, 2) if cuda else None,
        "peak_reserved_gib": round(torch.cuda.max_memory_reserved() / gib, 2) if cuda else None,
        **step_figures(trainer.state.log_history, clock, grpo, other, prompts_per_step),
    }


def table(results: list[dict]) -> str:
    head = ("| variant | prompt + completion | micro-batch x accumulation | peak allocated GiB | peak reserved GiB "
            "| s/step (median) | generation s/step | projected run (h) |\n|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['variant']} | | | {r['error']} | | | | |")
            continue
        lines.append(f"| {r['variant']} ({r['what']}) | {r['prompt_tokens']} + {r['max_completion_length']} | "
                     f"{r['micro_batch']} x {r['gradient_accumulation_steps']} | {r['peak_allocated_gib']} | "
                     f"{r['peak_reserved_gib']} | {r['median_step_s']} | {r['generation_s_per_step']} | "
                     f"{r['projected_hours']} ({r['recipe_steps']} steps) |")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recipe", default=str(ROOT / "configs" / "qwen2.5-3b_grpo.yaml"))
    ap.add_argument("--out", default=os.environ.get("OUT") or "runs/gpu_check")
    ap.add_argument("--steps", type=int, default=3, help="GRPO steps per variant (the first is warm-up)")
    ap.add_argument("--prompt-tokens", type=int, default=GUIDED_PROMPT_TOKENS)
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    ap.add_argument("--budget-s", type=float, default=420.0,
                    help="start no further variant once this many seconds have passed")
    ap.add_argument("--grace-s", type=float, default=150.0,
                    help="a variant still running this long after the budget is stopped")
    ap.add_argument("--tiny", action="store_true", help="a 2-layer model on CPU, short lengths: the code path only")
    ap.add_argument("--tiny-prompt-tokens", type=int, default=64)
    ap.add_argument("--tiny-completion-tokens", type=int, default=16)
    ap.add_argument("--run-variant", help=argparse.SUPPRESS)
    return ap


def variant_in_subprocess(args, name: str, out: Path, limit: float) -> dict:
    """Runs one variant in its own process (``--run-variant``), stopped after ``limit`` seconds: its
    measurements, or its error (out of memory, stopped, failed; the log is ``OUT/variant-NAME.log``)."""
    cmd = [sys.executable, __file__, "--run-variant", name, "--recipe", args.recipe, "--out", str(out),
           "--steps", str(args.steps), "--prompt-tokens", str(args.prompt_tokens),
           "--tiny-prompt-tokens", str(args.tiny_prompt_tokens),
           "--tiny-completion-tokens", str(args.tiny_completion_tokens)] + (["--tiny"] if args.tiny else [])
    log = out / f"variant-{name}.log"
    try:
        with open(log, "w") as f:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=limit).returncode
    except subprocess.TimeoutExpired:
        rc = None
    target = out / f"variant-{name}.json"
    if rc == 0 and target.is_file():
        return json.loads(target.read_text())
    if rc is None:
        return {"variant": name, "error": f"stopped after {limit:.0f} s (see {log.name})"}
    text = log.read_text(errors="replace")
    oom = "out of memory" in text.lower() or "OutOfMemoryError" in text
    return {"variant": name, "error": "out of memory" if oom else f"failed (exit {rc}): see {log.name}"}


def summary_line(r: dict) -> str:
    return "    " + (r["error"] if "error" in r else
                      f"peak {r['peak_allocated_gib']} GiB allocated, {r['peak_reserved_gib']} GiB reserved, "
                      f"{r['median_step_s']} s/step ({r['generation_s_per_step']} s generating), steps {r['step_s']}")


def run_variants(args, names: list[str], out: Path) -> list[dict]:
    """Each variant in its own process, in turn, while the time budget lasts (a variant not started is
    reported as not run); prints a line as each starts and ends."""
    start, results = time.perf_counter(), []
    for name in names:
        elapsed = time.perf_counter() - start
        if elapsed > args.budget_s:
            results.append({"variant": name, "error": f"not run: {elapsed:.0f} s of the {args.budget_s:.0f} s budget used"})
            continue
        print(f"[{elapsed:5.0f} s] {name}: {VARIANTS[name][0]}", flush=True)
        limit = max(60.0, args.budget_s + args.grace_s - elapsed)  # the whole check ends by budget + grace
        results.append(variant_in_subprocess(args, name, out, limit))
        print(summary_line(results[-1]), flush=True)
    return results


def main() -> int:
    ap = build_parser()
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.run_variant:
        result = run_variant(args, args.run_variant)
        (out / f"variant-{args.run_variant}.json").write_text(json.dumps(result, indent=2))
        return 0

    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variant(s) {unknown}; choose from {list(VARIANTS)}")
    results = run_variants(args, names, out)
    (out / "gpu_check.json").write_text(json.dumps(results, indent=2))
    (out / "gpu_check.md").write_text(table(results) + "\n")
    print(table(results))
    failed = [r for r in results if "error" in r and not r["error"].startswith("not run")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
