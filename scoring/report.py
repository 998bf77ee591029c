"""python -m scoring report runs/A runs/B ... [--out reports/NAME]

Compares evaluation runs (each a directory written by ``python -m envs.evaluate``): a leaderboard in
the shape of the paper's Table 2 (EX, PSJS, SEM, Tok/S per protocol, with a dagger where a model is
significantly below the best model of that protocol by a paired bootstrap over the same sessions),
per-slice EX tables (world, phenomenon, chain mode, persona, turn position; the paper's Appendix E),
Spearman's rho between the guided and agentic rankings, and PNG figures: EX by budget multiplier, EX
by turn position per protocol, CER by turn position, and a phenomenon x model heatmap.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from cypherturn.errors import InputError
from scoring.metrics import breakdown, cer, significance
from scoring.records import read_records


def load_run(path: Path) -> dict:
    path = Path(path)
    for name in ("meta.json", "metrics.json", "trajectories.jsonl"):
        if not (path / name).is_file():
            raise FileNotFoundError(f"{path} is not a finished evaluation run (no {name}); run envs.evaluate first")
    meta = json.loads((path / "meta.json").read_text())
    label = Path(str(meta["model"]).rstrip("/")).name
    setting = meta["protocol"] + (f" x{meta['budget_multiplier']}" if meta["protocol"] == "agentic" else "") + (
        f" {meta['variant']}" if meta.get("variant") else "")
    return {"path": path, "meta": meta, "metrics": json.loads((path / "metrics.json").read_text()),
            "records": list(read_records(path / "trajectories.jsonl")), "model": label, "setting": setting}


def _fmt(x) -> str:
    return "—" if x is None else f"{x:.3f}"


def leaderboard(runs: list[dict]) -> tuple[list[str], dict]:
    by_setting: dict[str, list[dict]] = defaultdict(list)
    for run in runs:
        by_setting[run["setting"]].append(run)
    lines = ["| model | setting | EX | EX relaxed | PSJS | SEM | Tok/S | turns |", "|---|---|---|---|---|---|---|---|"]
    marks = {}
    for setting, group in sorted(by_setting.items()):
        best = max(group, key=lambda r: r["metrics"].get("ex") or 0)
        for run in sorted(group, key=lambda r: -(r["metrics"].get("ex") or 0)):
            mark = ""
            if run is not best:
                test = significance.paired_bootstrap(run["records"], best["records"], "ex")
                marks[(run["model"], setting)] = test
                mark = " †" if test.get("significant") and (test.get("delta") or 0) < 0 else ""
            m = run["metrics"]
            lines.append(f"| {run['model']} | {setting} | {_fmt(m.get('ex'))}{mark} | {_fmt(m.get('ex_relaxed'))} | "
                         f"{_fmt(m.get('psjs'))} | {_fmt(m.get('sem'))} | "
                         f"{'—' if m.get('tok_s') is None else round(m['tok_s'], 1)} | {m.get('turns_scored')} |")
    return lines, marks


def _figures(runs: list[dict], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    agentic = [r for r in runs if r["meta"]["protocol"] == "agentic" and not r["meta"].get("variant")]
    if agentic:
        fig, ax = plt.subplots(figsize=(6, 4))
        per_model: dict[str, list] = defaultdict(list)
        for r in agentic:
            per_model[r["model"]].append((r["meta"]["budget_multiplier"], r["metrics"].get("ex") or 0))
        for model, pts in sorted(per_model.items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=model)
        ax.set(xlabel="budget multiplier m", ylabel="EX", title="Agentic EX by budget multiplier", ylim=(0, 1.05))
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "ex_by_budget.png", dpi=120)
        plt.close(fig)
        made.append("ex_by_budget.png")
    for name, title, fn in (("ex_by_turn_position.png", "EX by turn position", None),
                            ("cer_by_turn_position.png", "CER by turn position", "cer")):
        fig, ax = plt.subplots(figsize=(6, 4))
        for r in runs:
            if fn is None:
                rows = breakdown.breakdown(r["records"], "turn_position", "ex")["groups"]
                pts = sorted((int(k), v["mean"]) for k, v in rows.items() if v["mean"] is not None)
            else:
                by_pos = cer.conditional_error_rate(r["records"])["by_position"]
                pts = sorted((int(k), v["cer"]) for k, v in by_pos.items())
            if pts:
                style = "-" if r["meta"]["protocol"] == "guided" else "--"
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker=".",
                        label=f"{r['model']} ({r['setting']})")
        ax.set(xlabel="turn position", ylabel=title.split()[0], title=title + " (solid: guided, dashed: agentic)",
               ylim=(0, 1.05))
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6)
        else:  # e.g. CER of runs without consecutive errors
            ax.text(0.5, 0.5, "no data points", ha="center", transform=ax.transAxes)
        fig.tight_layout()
        fig.savefig(out / name, dpi=120)
        plt.close(fig)
        made.append(name)
    phenomena = sorted({r["phenomenon"] for run in runs for r in run["records"]})
    labels = [f"{r['model']} ({r['setting']})" for r in runs]
    grid = []
    for r in runs:
        rows = breakdown.breakdown(r["records"], "phenomenon", "ex")["groups"]
        grid.append([(rows.get(p) or {}).get("mean") if (rows.get(p) or {}).get("mean") is not None else float("nan")
                     for p in phenomena])
    fig, ax = plt.subplots(figsize=(1 + 0.6 * len(phenomena), 1 + 0.45 * len(runs)))
    im = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(phenomena)), phenomena, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            if v == v:  # not NaN
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6, color="w" if v < 0.6 else "k")
    fig.colorbar(im, ax=ax, label="EX")
    ax.set_title("EX by phenomenon")
    fig.tight_layout()
    fig.savefig(out / "phenomenon_heatmap.png", dpi=120)
    plt.close(fig)
    made.append("phenomenon_heatmap.png")
    return made


def write_report(run_dirs: list[str | Path], out: str | Path) -> Path:
    runs = [load_run(Path(p)) for p in run_dirs]
    if not runs:
        raise InputError("give at least one run directory")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    lines = ["# CypherTurn leaderboard", "", "† EX significantly below the best model of the same setting "
             "(paired bootstrap over sessions, 10,000 resamples, 95%).", ""]
    board, _ = leaderboard(runs)
    lines += board + [""]
    guided = {r["model"]: r["metrics"].get("ex") for r in runs if r["setting"] == "guided"}
    agentic = {r["model"]: r["metrics"].get("ex") for r in runs if r["setting"] == "agentic x3"}
    if len(set(guided) & set(agentic)) >= 3:
        rho = significance.rank_correlation(guided, agentic)
        lines += [f"Spearman's rho between the guided and agentic x3 rankings: {rho['rho']:.3f} "
                  f"(p = {rho['p_value']:.3g}, {rho['n']} models).", ""]
    for dim in breakdown.DIMENSIONS:
        keys = sorted({str(k) for r in runs for k in breakdown.breakdown(r["records"], dim, "ex")["groups"]},
                      key=lambda k: (len(k), k) if dim == "turn_position" else k)
        lines += [f"## EX by {dim}", "", "| " + dim + " | " + " | ".join(f"{r['model']} ({r['setting']})" for r in runs)
                  + " |", "|---" * (len(runs) + 1) + "|"]
        tables = [{str(k): v for k, v in breakdown.breakdown(r["records"], dim, "ex")["groups"].items()} for r in runs]
        for k in keys:
            lines.append(f"| {k} | " + " | ".join(_fmt((t.get(k) or {}).get("mean")) for t in tables) + " |")
        lines.append("")
    figures = _figures(runs, out)
    lines += ["## Figures", ""] + [f"![{f}]({f})" for f in figures]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return out / "report.md"
