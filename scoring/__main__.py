"""python -m scoring score | report (see the README): one predicted query judged against a gold one on a
world; the leaderboard, per-slice tables, significance and figures over evaluation runs."""

from __future__ import annotations

import argparse
import sys

from cypherturn.cli import run_command
from scoring.report import write_report
from scoring.score import add_score_command


def cmd_report(args) -> int:
    path = write_report(args.runs, args.out)
    print(f"wrote {path} and its figures")
    return 0


COMMANDS = {"report": cmd_report}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m scoring", description="CypherTurn scoring")
    sub = p.add_subparsers(dest="command", required=True)
    add_score_command(sub, COMMANDS)  # registers "score" and maps it to cmd_score
    r = sub.add_parser("report", help="leaderboard, per-slice tables, significance and figures over runs")
    r.add_argument("runs", nargs="+", help="run directories written by python -m envs.evaluate")
    r.add_argument("--out", default="reports/latest", help="output directory (default reports/latest)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command(COMMANDS[args.command], args, input_errors=(ValueError, FileNotFoundError))


if __name__ == "__main__":
    sys.exit(main())
