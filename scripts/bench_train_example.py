"""Seconds per SFT example of SmolLM2-135M on this CPU, one speed lever at a time, side by side.

    python scripts/bench_train_example.py --dataset runs/demo/train                  # every lever
    python scripts/bench_train_example.py --dataset DIR --levers full_fp32 lora_top10_bf16 --examples 4

Every lever trains the same examples (guided turn prompts of about the median length, answered in
``--format``) with TRL's ``SFTTrainer`` exactly as ``training/sft.py`` does (batch 1, AdamW, loss on the
answer only); one warm-up step is not counted. Printed per lever: the median and mean seconds of an
optimizer step (one example) and the trainable parameters. The levers:

- ``full_fp32``: full fine-tuning in fp32 (the starting point);
- ``full_bf16``: full fine-tuning under bf16 autocast (``bf16: true``; the CPU's AVX512-BF16);
- ``lora_fp32`` / ``lora_bf16``: LoRA r=16 on every linear layer of every decoder layer;
- ``lora_topN_fp32`` / ``lora_topN_bf16``: LoRA on the top N decoder layers only (``lora_layers: N``):
  the backward pass stops below them;
- ``lora_topN_attn_bf16``: the same on the attention projections only;
- any of them with ``_tree`` (``lora_top16_bf16_tree``): the examples of a session packed into one
  prefix-tree row (``share_prefixes: true``, ``training/packing.py``), the prompt they share computed once;
  its seconds per example are the rows' time divided by the examples in them (its "median" is that mean).

Compare a ``_tree`` lever with its flat twin on whole sessions: ``--sessions 2`` trains every guided example
of the first two sessions (instead of ``--examples`` of median length) under every lever.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmark.session import read_sessions  # noqa: E402
from envs.models import load_tokenizer  # noqa: E402

DEFAULT_LEVERS = ["full_fp32", "full_bf16", "lora_fp32", "lora_bf16", "lora_top16_fp32", "lora_top16_bf16",
                  "lora_top10_bf16", "lora_top8_bf16", "lora_top16_attn_bf16"]
_LEVER = re.compile(r"\A(full|lora)(?:_top(\d+))?(_attn)?_(fp32|bf16)(_tree)?\Z")


def parse_lever(name: str) -> dict:
    m = _LEVER.match(name)
    if not m:
        raise SystemExit(f"unknown lever {name!r}: full|lora[_topN][_attn]_fp32|bf16, e.g. lora_top10_bf16")
    kind, top, attn, dtype, tree = m.groups()
    if kind == "full" and (top or attn):
        raise SystemExit(f"{name}: top-layer and attention-only levers apply to LoRA")
    return {"peft": kind == "lora", "layers": int(top) if top else None,
            "modules": ["q_proj", "k_proj", "v_proj", "o_proj"] if attn else "all-linear", "bf16": dtype == "bf16",
            "tree": bool(tree)}


def pick_examples(dataset: str, fmt: str, n: int, tokenizer, sessions_n: int | None = None) -> list[dict]:
    """``n`` SFT examples whose prompts lie closest to the median prompt length of the first sessions, or
    every example of the first ``sessions_n`` sessions in turn order."""
    from training.data import sft_examples

    sessions = list(read_sessions(dataset))[:sessions_n or 12]
    examples = sft_examples(sessions, [fmt], chat_tools=False)
    if sessions_n:
        print(f"{len(examples)} examples of {len(sessions)} sessions", flush=True)
        return examples
    lengths = [len(tokenizer(tokenizer.apply_chat_template(e["messages"][:-1], tokenize=False))["input_ids"])
               for e in examples]
    median = statistics.median(lengths)
    order = sorted(range(len(examples)), key=lambda i: abs(lengths[i] - median))[:n]
    picked = [examples[i] for i in order]
    print(f"{n} examples, prompt tokens {[lengths[i] for i in order]} (median of {len(examples)}: {median:.0f})",
          flush=True)
    return picked


def time_lever(name: str, examples: list[dict], warmup: int, out: Path, *, dropout: float = 0.0,
               loss_type: str | None = None, checkpointing: bool = False) -> dict:
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import ModelConfig, SFTConfig, SFTTrainer

    from training.trainers import load_for_training

    lever = parse_lever(name)
    model_args = ModelConfig(model_name_or_path="smollm2-135m", use_peft=lever["peft"], lora_r=16, lora_alpha=32,
                             lora_dropout=dropout,
                             lora_target_modules=lever["modules"])
    model, tok, peft_config, _ = load_for_training(model_args, lora_layers=lever["layers"])
    extra = {}
    if lever["tree"]:
        from training.packing import PrefixTreeCollator, attach_tree_mask, packed_rows

        rows = packed_rows(examples, tok, 8192)
        data = rows[:warmup] + rows
        per_step = [r["examples"] for r in rows]
        extra = {"data_collator": PrefixTreeCollator(tok.pad_token_id)}
    else:
        data = [{"messages": e["messages"]} for e in (examples[:warmup] + examples)]
        per_step = [1] * len(examples)
    steps = len(data)
    args = SFTConfig(output_dir=str(out / name), max_steps=steps, per_device_train_batch_size=1,
                     gradient_accumulation_steps=1, learning_rate=1e-4, use_cpu=True, bf16=lever["bf16"],
                     assistant_only_loss=not lever["tree"], max_length=4096, logging_steps=1000, save_strategy="no",
                     report_to="none", seed=0, dataloader_num_workers=0, gradient_checkpointing=checkpointing,
                     loss_type=loss_type, remove_unused_columns=not lever["tree"],
                     dataset_kwargs={"skip_prepare_dataset": True} if lever["tree"] else None)

    class Clock(TrainerCallback):
        def __init__(self):
            self.times: list[float] = []

        def on_step_begin(self, *a, **k):
            self.start = time.perf_counter()

        def on_step_end(self, *a, **k):
            self.times.append(time.perf_counter() - self.start)

    clock = Clock()
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(data), processing_class=tok,
                         peft_config=peft_config, callbacks=[clock], **extra)
    if lever["tree"]:
        attach_tree_mask(trainer.model)
    # every lever sees the same examples, so the mean is comparable across levers
    trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
    trainer.train()
    counted = clock.times[warmup:]
    del trainer, model
    torch.cuda.empty_cache() if torch.cuda.is_available() else None
    mean = sum(counted) / sum(per_step)
    # the trainer samples rows in its own order: a row lever's figure is its total time over its examples
    return {"lever": name, "median_s": mean if lever["tree"] else statistics.median(counted), "mean_s": mean,
            "steps": counted, "examples_per_step": per_step, "trainable_params": trainable}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", required=True, help="a training build (python -m benchmark build --split train)")
    p.add_argument("--format", default="guided_action", help="SFT format of the examples (training.data.SFT_FORMATS)")
    p.add_argument("--levers", nargs="+", default=DEFAULT_LEVERS)
    p.add_argument("--examples", type=int, default=4)
    p.add_argument("--sessions", type=int, help="every example of the first N sessions instead of --examples")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own choice)")
    p.add_argument("--lora-dropout", type=float, default=0.0, help="the CPU recipe's (0.0)")
    p.add_argument("--loss-type", help="SFTConfig.loss_type (default TRL's: chunked_nll)")
    p.add_argument("--checkpointing", action="store_true",
                   help="gradient checkpointing (TRL's default; the CPU recipes turn it off: memory is plenty here)")
    p.add_argument("--json", help="write the figures to this file")
    p.add_argument("--work", default="runs/bench_train_example")
    args = p.parse_args(argv)
    for name in args.levers:
        parse_lever(name)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    examples = pick_examples(args.dataset, args.format, args.examples, load_tokenizer("smollm2-135m"), args.sessions)
    results = []
    for name in args.levers:
        r = time_lever(name, examples, args.warmup, Path(args.work), dropout=args.lora_dropout,
                       loss_type=args.loss_type, checkpointing=args.checkpointing)
        results.append(r)
        print(f"{name:24s} {r['median_s']:6.2f} s/example (mean {r['mean_s']:.2f}; trainable "
              f"{r['trainable_params'] / 1e6:.2f} M)", flush=True)
    base = results[0]["median_s"]
    print(f"\n| lever | s/example (median) | vs {results[0]['lever']} | trainable params |\n|---|---|---|---|")
    for r in results:
        print(f"| {r['lever']} | {r['median_s']:.2f} | {base / r['median_s']:.2f}x | {r['trainable_params'] / 1e6:.2f} M |")
    if args.json:
        Path(args.json).write_text(json.dumps({"threads": torch.get_num_threads(), "format": args.format,
                                               "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
