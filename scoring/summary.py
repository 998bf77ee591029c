"""One run's metrics (``metrics.json``) and its human-readable ``report.md``, from its turn records.

Every metric comes from its own module in ``scoring.metrics``; this module only gathers them.
Turns whose ``ex`` is null (infrastructure errors) are excluded everywhere and counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scoring.judge import shared_judge
from scoring.metrics import actions, bleu, breakdown, cer, sem, significance, tokens
from scoring.records import is_scored, mean


def fill_psjs(records: list[dict], *, workers: int = 8) -> None:
    """Compute PSJS for every scored turn that lacks it, in one batch of the judge (``scoring.judge``:
    each distinct query's provenance once, ``workers`` at a time, gold provenances cached)."""
    todo = [r for r in records if is_scored(r) and r.get("psjs") is None]
    results = shared_judge(workers=workers).psjs_batch([(r["world"], r["gold_cypher"], r.get("prediction"))
                                                        for r in todo])
    for r, res in zip(todo, results):
        r["psjs"] = res.score


def summarize(records: list[dict], *, psjs: bool = True) -> dict[str, Any]:
    if psjs:
        fill_psjs(records)
    scored = [r for r in records if is_scored(r)]
    out: dict[str, Any] = {
        "turns": len(records),
        "turns_scored": len(scored),
        "infra_errors": len(records) - len(scored),
        "sessions": len({r["session_id"] for r in records}),
        "ex": mean([r["ex"] for r in scored]),
        "ex_relaxed": mean([r["ex_relaxed"] for r in scored if r.get("ex_relaxed") is not None]),
        "psjs": mean([r["psjs"] for r in scored if r.get("psjs") is not None]) if psjs else None,
        "sem": sem.session_exact_match(records)["sem"],
        "cer": {k: v for k, v in cer.conditional_error_rate(records).items() if k != "excluded_turns"},
        "tok_s": tokens.tokens_per_session(records)["tok_s"],
        "action_usage": actions.action_usage(records)["fractions"],
        "budget_exhaustion": actions.budget_exhaustion_rate(records)["rate"],
        "ex_excluding_cliff": actions.ex_excluding_cliff(records)["ex"],
        "google_bleu": bleu.gleu_records(records)["google_bleu"],
        "breakdowns": {k: v for k, v in breakdown.breakdowns(records).items() if k != "excluded_turns"},
        "ex_ci95": significance.bootstrap_ci(records, "ex") if scored else None,
    }
    return out


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _interval(ci: dict) -> str:
    if ci.get("sessions") == 1:
        return "one session: no interval"
    return f"95% CI {_pct(ci.get('low'))}–{_pct(ci.get('high'))}"


def write_report(path: Path, meta: dict, m: dict) -> None:
    ci = m.get("ex_ci95") or {}
    lines = [f"# CypherTurn run: {meta['model']} ({meta['protocol']}"
             + (f", x{meta['budget_multiplier']}" if meta["protocol"] == "agentic" else "")
             + (f", {meta['variant']}" if meta.get("variant") else "") + ")", "",
             f"Backend {meta['backend']}; dataset sha256 {meta['dataset_sha256'][:12]}; code {meta['code_version']}; "
             f"generation {meta['generation']}.", "",
             "| metric | value |", "|---|---|",
             f"| EX (strict) | {_pct(m['ex'])} ({_interval(ci)}) |",
             f"| EX relaxed | {_pct(m['ex_relaxed'])} |", f"| PSJS | {_pct(m['psjs'])} |",
             f"| SEM | {_pct(m['sem'])} |", f"| CER | {_pct(m['cer']['cer'])} |",
             f"| Tok/S | {'n/a' if m['tok_s'] is None else round(m['tok_s'], 1)} |",
             f"| Google-BLEU | {_pct(m['google_bleu'])} |",
             f"| EX excluding cliff turns | {_pct(m['ex_excluding_cliff'])} |",
             f"| budget exhaustion rate | {_pct(m['budget_exhaustion'])} |",
             f"| turns scored / infrastructure errors | {m['turns_scored']} / {m['infra_errors']} |", ""]
    usage = m.get("action_usage") or {}
    if any(v for v in usage.values()):
        lines += ["Action usage (excluding SUBMIT_ANSWER): "
                  + ", ".join(f"{k} {_pct(v)}" for k, v in usage.items()), ""]
    for dim, per_metric in m["breakdowns"].items():
        rows = per_metric.get("ex", {})
        if not rows:
            continue
        lines += [f"## EX by {dim}", "", f"| {dim} | EX | n |", "|---|---|---|"]
        lines += [f"| {key} | {_pct(v['mean'])} | {v['n']} |" for key, v in rows.items()]
        lines.append("")
    path.write_text("\n".join(lines))
