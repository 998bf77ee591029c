"""SFT and GRPO on CypherTurn sessions: the library behind ``training/sft.py`` and ``training/grpo.py``.

``run_sft`` and ``run_grpo`` take the three configs that the scripts parse (``training.config``'s
arguments, TRL's ``SFTConfig`` / ``GRPOConfig`` and ``ModelConfig``), build the data from training-world
sessions, train with TRL, and write a checkpoint directory that ``python -m envs.evaluate --model DIR``
loads as it is:

- LoRA (``use_peft: true``): the adapter, the tokenizer and an ``adapter_config.json`` whose
  ``base_model_name_or_path`` is the base as the recipe named it (an alias of ``envs.models`` stays an
  alias, so the directory works on any machine that has the base);
- full fine-tuning: the whole model and the tokenizer;
- ``cypherturn.json``: the chat format the model was trained in (``tools`` or ``text``; the evaluator's
  ``--chat-format auto`` reads it), the base, the stage, the data and the held-out session ids;
- ``param_digest_rank<R>.json`` per process: SHA-256 of the trainable parameters before and after
  training (how a multi-process run shows that every rank holds the same model).

Intermediate ``checkpoint-N`` directories get the same marker and base fix, so each is evaluable too,
and ``resume_from_checkpoint: auto`` continues from the last one (``true``: transformers' own, which needs one).
``trainer_state.json`` (``Trainer.save_state``) holds every logged step.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from benchmark.session import read_sessions
from cypherturn.errors import InputError
from envs.models import load_causal_lm, load_tokenizer
from envs.prompts import GUIDED_CAP
import rewards
from rewards.registry import stated_weight
from training.config import (CypherTurnDataArguments, CypherTurnGRPOArguments, CypherTurnSFTArguments,
                             RecipeError)

log = logging.getLogger(__name__)
MARKER = "cypherturn.json"


# -- sessions ---------------------------------------------------------------------------------------------
def load_sessions(args: CypherTurnDataArguments) -> list:
    """The training sessions: ``args.dataset``, or a training build made on demand (``cached_dataset``:
    built once per code and spec version; the ranks of a multi-process run wait for one builder)."""
    if args.dataset:
        path = Path(args.dataset)
        if not path.exists():
            raise FileNotFoundError(f"dataset {path} does not exist (build one: python -m benchmark build --split "
                                    "train --out DIR)")
        return list(read_sessions(path))
    from benchmark.build import cached_dataset

    out = cached_dataset("train", seed=args.build_seed, sessions=args.build_sessions, hf=False)
    return list(read_sessions(out))


def _take(items: list, args: CypherTurnDataArguments, seed: int) -> list:
    items = list(items)
    random.Random(seed).shuffle(items)
    return items[:args.max_examples] if args.max_examples else items


# -- models -----------------------------------------------------------------------------------------------
def _dtype(model_args) -> Any:
    """TRL's rule (``auto`` passes through, a name becomes the torch dtype), except on a CPU-only machine,
    where ``auto`` would keep a bf16 checkpoint's bf16 weights and AdamW on them loses the small updates:
    float32 weights there, and ``bf16: true`` for bf16 autocast."""
    import torch

    dtype = getattr(model_args, "dtype", None)
    if dtype in (None, "auto"):
        return "auto" if torch.cuda.is_available() else torch.float32
    return getattr(torch, dtype)


def cpu_computes_bf16(cpuinfo: str | None = None) -> bool:
    """Whether this CPU has bf16 arithmetic (AVX512-BF16 or AMX-BF16 in /proc/cpuinfo's flags). Without it,
    torch's bf16 autocast emulates every matmul: measured on an AVX2-only AMD EPYC (2 cores), the first step of
    the CPU recipe took 505 s instead of about 50-170 s in fp32 elsewhere."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return True  # not Linux: leave the recipe's choice alone
    flags = {f for line in cpuinfo.splitlines() if line.startswith("flags") for f in line.split(":", 1)[1].split()}
    return bool(flags & {"avx512_bf16", "amx_bf16"})


def _cpu_precision(training_args) -> None:
    """``bf16: true`` on a CPU-only run whose CPU has no bf16 arithmetic becomes float32 (said in the log):
    the recipe's bf16 autocast is a speed lever only where the CPU computes bf16."""
    import torch

    if training_args.bf16 and not torch.cuda.is_available() and not cpu_computes_bf16():
        log.warning("bf16: true, but this CPU has no bf16 arithmetic (no avx512_bf16 or amx_bf16 flag): training "
                    "in float32 instead, which is faster here")
        training_args.bf16 = False
        if getattr(training_args, "mixed_precision", None) == "bf16":  # what __post_init__ derived from bf16
            training_args.mixed_precision = "no"


LORA_LAYERS_NEED_PEFT = "lora_layers needs use_peft: true (it restricts the LoRA adapter to the top layers)"


def load_for_training(model_args, gradient_checkpointing: bool = False, lora_layers: int | None = None):
    """(model, tokenizer, peft_config, base name). A checkpoint holding a LoRA adapter continues training
    that adapter on its recorded base; anything else is loaded by ``envs.models`` (aliases included) and
    gets TRL's LoRA config when ``use_peft`` (on the top ``lora_layers`` layers only, when given)."""
    from transformers import AutoTokenizer
    from trl import get_peft_config

    name = model_args.model_name_or_path
    if not name:
        raise RecipeError("model_name_or_path is required (a directory, a cached hub id, or smollm2-135m / tiny-llama)")
    kwargs: dict[str, Any] = {"dtype": _dtype(model_args)}
    if model_args.attn_implementation:
        kwargs["attn_implementation"] = model_args.attn_implementation
    adapter = Path(name) / "adapter_config.json"
    if adapter.is_file():
        from peft import PeftModel

        base = json.loads(adapter.read_text())["base_model_name_or_path"]
        model = PeftModel.from_pretrained(load_causal_lm(base, **kwargs), name, is_trainable=True)
        tok = AutoTokenizer.from_pretrained(name) if (Path(name) / "tokenizer_config.json").is_file() \
            else load_tokenizer(base)
        if model_args.use_peft:
            log.info("%s is a LoRA checkpoint: training continues on its adapter (the recipe's LoRA settings "
                     "are not used)", name)
        if gradient_checkpointing:
            model.enable_input_require_grads()  # gradients must reach the adapter through checkpointed blocks
        return model, tok, None, base
    if lora_layers is not None and not model_args.use_peft:  # refused before minutes of loading, not after
        raise RecipeError(LORA_LAYERS_NEED_PEFT)
    model = load_causal_lm(name, **kwargs)
    tok = load_tokenizer(name)
    base = name
    marker = Path(name) / MARKER
    if marker.is_file():  # a full fine-tuned checkpoint of ours: keep pointing at its own directory
        base = str(Path(name).resolve())
    peft_config = get_peft_config(model_args)
    if lora_layers is not None:
        peft_config = top_layers_only(peft_config, model, lora_layers)
    return model, tok, peft_config, base


def top_layers_only(peft_config, model, n: int):
    """``peft_config`` restricted to the top ``n`` decoder layers (``layers_to_transform``): nothing below
    them needs a gradient, so the backward pass stops there."""
    if peft_config is None:
        raise RecipeError(LORA_LAYERS_NEED_PEFT)
    total = model.config.num_hidden_layers
    if not 1 <= n <= total:
        raise RecipeError(f"lora_layers must be between 1 and the model's {total} layers, got {n}")
    peft_config.layers_to_transform = list(range(total - n, total))
    peft_config.layers_pattern = "layers"
    return peft_config


# -- checkpoints ------------------------------------------------------------------------------------------
def finalize_checkpoint(directory: str | Path, info: dict[str, Any]) -> None:
    """Make a saved directory evaluable as it is: the adapter names the recipe's base, and the marker
    file records how the model was trained."""
    directory = Path(directory)
    adapter = directory / "adapter_config.json"
    if adapter.is_file():
        config = json.loads(adapter.read_text())
        config["base_model_name_or_path"] = info["base_model"]
        adapter.write_text(json.dumps(config, indent=2) + "\n")
    (directory / MARKER).write_text(json.dumps(info, indent=1) + "\n")


class CheckpointMarkerCallback(TrainerCallback):
    """Writes the marker (and fixes the adapter's base) in every ``checkpoint-N`` the trainer saves."""

    def __init__(self, info: dict[str, Any]):
        self.info = info

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            path = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if path.is_dir():
                finalize_checkpoint(path, {**self.info, "global_step": state.global_step})


def parameter_digest(model) -> str:
    import torch

    h = hashlib.sha256()
    for name, p in sorted(model.named_parameters(), key=lambda item: item[0]):
        if p.requires_grad:
            h.update(name.encode())
            h.update(p.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return h.hexdigest()


class ParameterDigestCallback(TrainerCallback):
    """Each process writes ``param_digest_rank<R>.json``: the trainable parameters' digest before and after
    training (equal across ranks after a data-parallel run; different from "before" if anything trained)."""

    def __init__(self):
        self.before: str | None = None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if model is not None:
            self.before = parameter_digest(model)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if model is None:
            return
        rank = int(os.environ.get("RANK", args.process_index))
        Path(args.output_dir).mkdir(parents=True, exist_ok=True)
        (Path(args.output_dir) / f"param_digest_rank{rank}.json").write_text(json.dumps(
            {"rank": rank, "world_size": args.world_size, "global_step": state.global_step,
             "before": self.before, "after": parameter_digest(model)}) + "\n")


def _resume(training_args) -> str | bool | None:
    """``resume_from_checkpoint`` as ``Trainer.train`` takes it (a path; ``true``: the newest checkpoint in
    output_dir, an error when there is none), plus ``auto``: the newest checkpoint, or a fresh start when
    there is none. transformers has no such setting, and a resumable stage (scripts/demo_learning.py) must
    also run the first time."""
    from transformers.trainer_utils import get_last_checkpoint

    value = training_args.resume_from_checkpoint
    if value == "auto":
        out = Path(training_args.output_dir)
        return get_last_checkpoint(str(out)) if out.is_dir() else None
    return True if value in (True, "true", "True") else value or None


def _train_and_save(trainer, training_args, info: dict[str, Any]) -> Path:
    resume = _resume(training_args)
    if resume:
        trainer.accelerator.print(f"resuming from {resume}")
    trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(training_args.output_dir)
    out = Path(training_args.output_dir)
    if trainer.accelerator.is_main_process:
        info = {**info, "global_step": trainer.state.global_step}
        finalize_checkpoint(out, info)
    # transformers' own record of the run, log_history included (every logged step: loss, rewards/<name>/mean,
    # ...), whatever the reporters: what the curves are drawn from
    trainer.save_state()
    if trainer.accelerator.is_main_process:
        trainer.accelerator.print(f"checkpoint written to {out}: evaluate it with "
                                  f"python -m envs.evaluate --model {out}")
    return out


def _info(stage: str, base: str, chat_format: str, args: CypherTurnDataArguments, held: list, **extra) -> dict:
    return {"stage": stage, "base_model": base, "chat_format": chat_format, "dataset": args.dataset,
            "build_sessions": None if args.dataset else args.build_sessions,
            "build_seed": None if args.dataset else args.build_seed,
            "holdout_fraction": args.holdout_fraction, "turns": args.turns, "max_chain_depth": args.max_chain_depth,
            "heldout_sessions": sorted(s.id for s in held), **extra}


# -- SFT --------------------------------------------------------------------------------------------------
def run_sft(args: CypherTurnSFTArguments, training_args, model_args) -> Path:
    from accelerate import PartialState
    from datasets import Dataset
    from trl import SFTTrainer

    from training.data import SFT_FORMATS, sft_examples, split_sessions

    bad = [f for f in args.formats if f not in SFT_FORMATS]
    if bad:
        raise RecipeError(f"unknown SFT format(s) {bad}; use {list(SFT_FORMATS)}")
    if args.chat_format not in ("auto", "tools", "text"):
        raise RecipeError(f"chat_format must be auto, tools or text, got {args.chat_format!r}")
    if not 0 <= args.rename_schema <= 1:
        raise RecipeError(f"rename_schema must be a share in [0, 1], got {args.rename_schema}")
    from training.packing import PACK_BY

    if args.pack_by not in PACK_BY:
        raise RecipeError(f"pack_by must be one of {list(PACK_BY)}, got {args.pack_by!r}")
    if args.all_openings and not args.share_prefixes:
        raise RecipeError("all_openings packs the extra openings by world: it needs share_prefixes")
    _cpu_precision(training_args)  # after the recipe checks: a bad recipe fails before anything else
    chat_format = args.chat_format
    if chat_format == "auto":
        chat_format = "tools" if any(f.endswith("_tools") for f in args.formats) else "text"
    train, held = split_sessions(load_sessions(args), args.holdout_fraction)
    state = PartialState()
    examples = sft_examples(train, args.formats, verify=args.verify, turns=args.turns,
                            max_chain_depth=args.max_chain_depth,
                            chat_tools=chat_format == "tools", env_timeout=args.env_timeout,
                            progress=state.is_main_process, lookups=args.lookups,
                            search_scope=args.search_scope, inline_filters=args.inline_filters,
                            answer_first=args.answer_first, path_probes=args.path_probes,
                            set_recall=args.set_recall)
    everything = examples
    examples = (_take_sessions if args.share_prefixes else _take)(examples, args, training_args.seed)
    openings = _other_openings(everything, examples) if args.all_openings else []
    if not examples:
        raise InputError("no SFT examples: the training sessions are empty")
    if args.rename_schema:
        # one pass over both, so that the extra openings are renamed in the same share (none when they are empty)
        renamed = _renamed(examples + openings, train, args.rename_schema, training_args.seed,
                           by_session=args.share_prefixes)
        examples, openings = renamed[:len(examples)], renamed[len(examples):]
    model, tok, peft_config, base = load_for_training(model_args, training_args.gradient_checkpointing,
                                                      args.lora_layers)
    extra: dict[str, Any] = {}
    if args.share_prefixes:
        from training.packing import PrefixTreeCollator, attach_tree_mask, packed_rows

        rows = packed_rows(examples, tok, training_args.max_length or 4096, by=args.pack_by)
        rows += packed_rows(openings, tok, training_args.max_length or 4096, by="world")  # the trainer shuffles
        dataset = Dataset.from_list(rows)
        # the rows are already tokenized and carry their own mask data: TRL must neither re-tokenize nor drop it
        training_args.dataset_kwargs = {**(training_args.dataset_kwargs or {}), "skip_prepare_dataset": True}
        training_args.remove_unused_columns = False
        # the rows' targets are the answer tokens already (training.packing); TRL's own answer masks read the
        # conversation, which these rows no longer carry
        training_args.assistant_only_loss = False
        training_args.completion_only_loss = False
        extra["data_collator"] = PrefixTreeCollator(tok.pad_token_id)
        packing_info = {"rows": len(rows), "row_tokens": sum(len(r["input_ids"]) for r in rows),
                        "example_tokens": sum(r["example_tokens"] for r in rows)}
        log.info("prefix-tree packing: %d examples in %d rows, %d tokens instead of %d",
                 len(examples) + len(openings),
                 packing_info["rows"], packing_info["row_tokens"], packing_info["example_tokens"])
    else:
        dataset = Dataset.from_list([{"messages": e["messages"], "tools": e["tools"]} for e in examples])
        packing_info = None
    info = _info("sft", base, chat_format, args, held, formats=list(args.formats),
                 examples=len(examples) + len(openings), all_openings=len(openings) if args.all_openings else None,
                 rename_schema=args.rename_schema,
                 renamed=sum("renaming" in e for e in examples + openings) if args.rename_schema else None,
                 lookups=args.lookups, search_scope=args.search_scope,
                 inline_filters=args.inline_filters, answer_first=args.answer_first,
                 path_probes=args.path_probes, set_recall=args.set_recall, share_prefixes=packing_info)
    trainer = SFTTrainer(model=model, args=training_args, train_dataset=dataset, processing_class=tok,
                         peft_config=peft_config, **extra,
                         callbacks=[CheckpointMarkerCallback(info), ParameterDigestCallback()])
    if args.share_prefixes:
        attach_tree_mask(trainer.model)
    return _train_and_save(trainer, training_args, info)


def _take_sessions(examples: list[dict], args: CypherTurnDataArguments, seed: int) -> list[dict]:
    """``_take`` by whole sessions (prefix-tree packing shares a prompt only within a session): the sessions in
    a shuffled order, each with every example of it, until ``max_examples`` (the last session cut to fit)."""
    by_session: dict[str, list[dict]] = {}
    for e in examples:
        by_session.setdefault(e["session"], []).append(e)
    order = sorted(by_session)
    random.Random(seed).shuffle(order)
    out: list[dict] = []
    for sid in order:
        out += by_session[sid]
    return out[:args.max_examples] if args.max_examples else out


# renamed sessions of a world that share one draw of names: about as many openings as one 4,096-token row holds
SESSIONS_PER_DRAW = 12


def _other_openings(examples: list[dict], taken: list[dict]) -> list[dict]:
    """The opening-turn examples (its lookups and its answer) of every session ``taken`` has none of."""
    sessions = {e["session"] for e in taken}
    return [e for e in examples if e["turn"] == 0 and e["session"] not in sessions]


def _renamed(examples: list[dict], sessions: list, share: float, seed: int, *, by_session: bool = False) -> list[dict]:
    """``examples`` with a ``share`` of the guided_action ones renamed (``training.renaming``), chosen and
    renamed with ``seed``; a turn's lookups and their observations are renamed with it. ``by_session``: a
    session's examples are all renamed or none, and the renamed sessions of a world share one draw of names
    ``SESSIONS_PER_DRAW`` at a time: a session's turns, and a row of a world's openings
    (``training.packing.packed_rows`` groups by the draw), still share their prompt. A renamed example's
    ``renaming`` field names its draw (``own`` without ``by_session``)."""
    from training.renaming import named_texts, renamed_conversation, renaming

    world = {s.id: s.world for s in sessions}
    rng = random.Random(seed)
    if not by_session:
        return [{**e, "messages": renamed_conversation(e["messages"], world[e["session"]], rng), "renaming": "own"}
                if e["format"] == "guided_action" and rng.random() < share else e for e in examples]
    chosen: dict[str, bool] = {}
    for e in examples:
        if e["format"] == "guided_action" and e["session"] not in chosen:
            chosen[e["session"]] = rng.random() < share
    draw: dict[str, str] = {}  # session -> its draw, "world/k"
    for w in sorted({world[s] for s, yes in chosen.items() if yes}):
        mine = sorted(s for s, yes in chosen.items() if yes and world[s] == w)
        draw.update({s: f"{w}/{i // SESSIONS_PER_DRAW}" for i, s in enumerate(mine)})
    texts: dict[str, list[str]] = {}
    for e in examples:
        if e["format"] == "guided_action" and e["session"] in draw:
            texts.setdefault(draw[e["session"]], []).append(named_texts(e["messages"]))
    # a label whose noun is in a value any of the draw's sessions names keeps its name in all of them
    names = {d: renaming(d.split("/")[0], random.Random(f"{seed}:{d}"), answer="\n".join(t))
             for d, t in texts.items()}
    return [{**e, "messages": renamed_conversation(e["messages"], world[e["session"]], names=names[d]), "renaming": d}
            if e["format"] == "guided_action" and (d := draw.get(e["session"])) else e for e in examples]


# -- GRPO -------------------------------------------------------------------------------------------------
def resolve_rewards(specs: list, *, multi_turn: bool,
                    recipe_weights: list[float] | None = None) -> tuple[list, list[float]]:
    """Reward functions and weights from specs (``rewards.weighted``); ``env[:W]`` is the environment's
    turn EX (``envs.trl_adapter.env_reward``), available in multi-turn mode only. Bad specs raise
    ``rewards.RewardSpecError`` before anything is generated.

    ``recipe_weights`` (``GRPOConfig.reward_weights``), when set, are the weights; a spec may state a weight
    too only where it is the same, else ``RecipeError`` names both settings. A spec that states no weight
    weighs 1 when the recipe sets none."""
    from envs.trl_adapter import env_reward

    funcs: list = []
    weights: list[float] = []
    for spec in specs:
        name, _, weight = spec.partition(":") if isinstance(spec, str) else (None, "", "")
        if name == "env" and (not weight or _is_number(weight)):
            if not multi_turn:
                raise rewards.RewardSpecError("the `env` reward needs mode multi_turn (the environment in the loop)")
            funcs.append(env_reward)
            weights.append(float(weight) if weight else 1.0)
            continue
        f, w = rewards.weighted([spec])
        funcs += f
        weights += w
    if not funcs:
        raise rewards.RewardSpecError("no reward functions: give at least one spec")
    if recipe_weights is None:
        return funcs, weights
    recipe_weights = [float(w) for w in recipe_weights]
    if len(recipe_weights) != len(funcs):
        raise RecipeError(f"reward_weights {recipe_weights} has {len(recipe_weights)} weights, but rewards "
                          f"{list(specs)} names {len(funcs)} reward functions: give one weight per reward")
    for i, (spec, weight) in enumerate(zip(specs, recipe_weights)):
        stated = stated_weight(spec)
        if stated is not None and stated != weight:
            raise RecipeError(f"rewards[{i}] {spec!r} states weight {stated:g} but reward_weights[{i}] is {weight:g}: "
                              "set each weight in one place (rewards: NAME:WEIGHT, or reward_weights)")
    return funcs, recipe_weights


def max_tool_calling_iterations(rows: list[dict], sessions: list, budget_multiplier: int) -> int:
    """The default of ``GRPOConfig.max_tool_calling_iterations``: the most actions the environment lets one
    rollout take, so that none is cut before the environment ends its turn. Each tool call is one action.
    Guided: ``GUIDED_CAP`` a turn. Agentic: no cap a turn, only the session's budget; a rollout at turn k
    starts with the even share (T - k) x m of it (``envs.trl_adapter``) and may spend all of it there."""
    turns = {s.id: len(s.turns) for s in sessions}
    return max(GUIDED_CAP if row["protocol"] == "guided" else (turns[row["session"]] - row["turn"]) * budget_multiplier
               for row in rows)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def run_grpo(args: CypherTurnGRPOArguments, training_args, model_args) -> Path:
    from datasets import Dataset
    from trl import GRPOTrainer

    from envs.env import EnvConfig
    from envs.trl_adapter import make_env_factory
    from training.data import grpo_rows, split_sessions

    if args.mode not in ("multi_turn", "single_turn"):
        raise RecipeError(f"mode must be multi_turn or single_turn, got {args.mode!r}")
    multi = args.mode == "multi_turn"
    funcs, training_args.reward_weights = resolve_rewards(  # fail before any work
        args.reward_specs(), multi_turn=multi, recipe_weights=training_args.reward_weights)
    _cpu_precision(training_args)
    train, held = split_sessions(load_sessions(args), args.holdout_fraction)
    rows = _take(grpo_rows(train, args.mode, args.protocol, turns=args.turns, max_chain_depth=args.max_chain_depth,
                           env_timeout=args.env_timeout,
                           lookups=args.lookups, search_scope=args.search_scope, path_probes=args.path_probes),
                 args, training_args.seed)
    if not rows:
        raise InputError("no GRPO rows: the training sessions are empty")
    dataset = Dataset.from_list(rows)
    factory = None
    if multi:
        factory = make_env_factory(sessions=train, expose_reward=False, config=EnvConfig(
            protocol=args.protocol, timeout=args.env_timeout, budget_multiplier=args.budget_multiplier))
        if training_args.max_tool_calling_iterations is None:
            training_args.max_tool_calling_iterations = max_tool_calling_iterations(rows, train,
                                                                                    args.budget_multiplier)
    model, tok, peft_config, base = load_for_training(model_args, training_args.gradient_checkpointing,
                                                      args.lora_layers)
    info = _info("grpo", base, "tools" if multi else "text", args, held, mode=args.mode, protocol=args.protocol,
                 rewards=[str(s) for s in args.reward_specs()], examples=len(rows))
    trainer = GRPOTrainer(model=model, reward_funcs=funcs, args=training_args, train_dataset=dataset,
                          processing_class=tok, peft_config=peft_config, environment_factory=factory,
                          callbacks=[CheckpointMarkerCallback(info), ParameterDigestCallback()])
    return _train_and_save(trainer, training_args, info)
