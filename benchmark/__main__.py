"""python -m benchmark build | review-export | review-import (see the README; scoring and reports are
``python -m scoring``)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from benchmark.annotation import export_review, import_reviews, write_review_report
from benchmark.build import BuildError, DEFAULT_SESSIONS, build, write_build
from benchmark.rewrite import HFRewriter, OpenAIRewriter
from benchmark.session import read_sessions
from benchmark.stats import render_overlap, wording_overlap
from cypherturn.cli import run_command
from cypherturn.errors import InputError
from graphs import connections, server


def cmd_build(args) -> int:
    from tqdm import tqdm

    if connections.external_config() is None:
        server.serve(progress=lambda m: print(m, file=sys.stderr))
    total = args.sessions or DEFAULT_SESSIONS[args.split]
    rewriter = None
    if args.rewrite == "openai":
        import os

        if not (args.rewrite_url and args.rewrite_model):
            raise InputError("--rewrite openai needs --rewrite-url and --rewrite-model")
        rewriter = OpenAIRewriter(args.rewrite_url, args.rewrite_model,
                                  api_key=os.environ.get(args.rewrite_api_key_env) if args.rewrite_api_key_env else None)
    elif args.rewrite == "hf":
        if not args.rewrite_model:
            raise InputError("--rewrite hf needs --rewrite-model (a local path or hub id)")
        rewriter = HFRewriter(args.rewrite_model)
    t0 = time.perf_counter()
    with tqdm(total=total, desc=f"building {args.split} sessions", unit="session", file=sys.stderr,
              disable=args.quiet) as bar:
        result = build(args.split, args.out, seed=args.seed, sessions=args.sessions, worlds=args.worlds,
                       progress=bar.update, hf=not args.no_hf, rewriter=rewriter)
    m = result.manifest
    print(f"{m['sessions']} sessions, {m['turns']} turns ({m['turns'] / max(1, m['sessions']):.2f} per session) "
          f"in {time.perf_counter() - t0:.1f} s -> {result.out}")
    print(f"dataset sha256 {m['dataset_sha256']}")
    failures = ", ".join(f"{k} {v}" for k, v in m["gate_failures"].items()) or "none"
    print(f"candidates rejected by the gates: {failures}")
    if "rewrite" in m:
        print(f"LLM rewrite pass: {m['rewrite']}")
    if args.compare_with:  # the wording this split shares with another build, added to its stats.md
        other = list(read_sessions(args.compare_with))
        lines = render_overlap("this split", f"`{args.compare_with}`", wording_overlap(result.sessions, other))
        stats = Path(result.out) / "stats.md"
        stats.write_text(stats.read_text() + "\n" + "\n".join(lines))
        print("\n".join(lines[2:]).strip())
    return 0


def cmd_review_export(args) -> int:
    sessions = list(read_sessions(args.dataset))
    export_review(sessions, args.out)
    print(f"wrote a review sheet of {sum(len(s.turns) for s in sessions)} turns to {args.out}")
    return 0


def cmd_review_import(args) -> int:
    manifest = json.loads((Path(args.dataset) / "manifest.json").read_text())
    sessions = list(read_sessions(args.dataset))
    outcome = import_reviews(sessions, args.a, args.b)
    write_build(args.out, manifest["split"], manifest["seed"], outcome.sessions, manifest["world_checksums"],
                manifest.get("gate_failures", {}), hf=not args.no_hf)
    write_review_report(outcome, Path(args.out) / "review.md")
    print(f"Cohen's kappa (keep vs reject): {outcome.kappa:.3f}; {outcome.n_revised} turns revised, "
          f"{outcome.n_rejected_turns} rejected, {outcome.n_dropped_sessions} sessions dropped, "
          f"{len(outcome.revision_errors)} revisions failed to execute -> {args.out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmark", description="CypherTurn sessions")
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="generate verified multi-turn sessions")
    b.add_argument("--split", choices=["test", "train"], required=True,
                   help="test: the seven benchmark worlds; train: the schema-disjoint training worlds")
    b.add_argument("--out", required=True, help="output directory")
    b.add_argument("--seed", type=int, help="default: 20260 (test) / 777 (train)")
    b.add_argument("--sessions", type=int, help="default: 721 (test) / 2000 (train)")
    b.add_argument("--worlds", nargs="+", metavar="WORLD", help="only these worlds of the split")
    b.add_argument("--no-hf", action="store_true", help="skip the Hugging Face dataset")
    b.add_argument("--rewrite", choices=["off", "openai", "hf"], default="off",
                   help="optional LLM rewrite of utterances for naturalness (names and values are checked)")
    b.add_argument("--rewrite-url", help="OpenAI-compatible base URL, e.g. http://localhost:8000/v1")
    b.add_argument("--rewrite-model", help="model name (openai) or local path / hub id (hf)")
    b.add_argument("--rewrite-api-key-env", default="OPENAI_API_KEY",
                   help="environment variable holding the API key (default OPENAI_API_KEY)")
    b.add_argument("--compare-with", metavar="BUILD",
                   help="another build (e.g. the other split): report the wording both use in stats.md")
    b.add_argument("--quiet", action="store_true")
    e = sub.add_parser("review-export", help="export a dataset to a review sheet (CSV or JSONL)")
    e.add_argument("--dataset", required=True)
    e.add_argument("--out", required=True, help="sheet path: .csv or .jsonl")
    i = sub.add_parser("review-import", help="import two annotators' sheets, re-execute revisions, report kappa")
    i.add_argument("--dataset", required=True)
    i.add_argument("--a", required=True, help="annotator A's sheet")
    i.add_argument("--b", required=True, help="annotator B's sheet")
    i.add_argument("--out", required=True, help="directory for the reviewed dataset")
    i.add_argument("--no-hf", action="store_true")
    return p


COMMANDS = {"build": cmd_build, "review-export": cmd_review_export, "review-import": cmd_review_import}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command(COMMANDS[args.command], args, input_errors=(BuildError, ValueError, FileNotFoundError))


if __name__ == "__main__":
    sys.exit(main())
