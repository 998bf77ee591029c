"""python -m envs.ask --dataset DIR --session ID --turn K "question" [--persona P] [--asks N] [--json]

Asks the agentic user simulator one question about turn K (its 0-based index) of a session and prints
{"intent": "reject|disambiguate|general", "reply": str, "leak_replaced": bool}; for people who tune the
simulator's probe and clarification patterns. Schema terms come from the world's spec.
"""

from __future__ import annotations

import argparse
import json
import sys

from benchmark.session import read_sessions
from envs.simulator import UserSimulator
from graphs.spec import SpecError, get_spec


def schema_terms(world: str) -> set[str]:
    spec = get_spec(world)
    terms = set(spec.labels) | set(spec.relationship_types)
    terms |= {p.name for n in spec.nodes for p in n.properties}
    terms |= {p.name for r in spec.relationships for p in r.properties}
    return terms


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m envs.ask", description=__doc__.splitlines()[0])
    p.add_argument("--dataset", required=True, help="a build directory or sessions.jsonl")
    p.add_argument("--session", required=True)
    p.add_argument("--turn", type=int, required=True, help="the turn's 0-based index")
    p.add_argument("question")
    p.add_argument("--persona", help="default: the session's persona")
    p.add_argument("--asks", type=int, default=1, help="how many asks this turn so far, this one included")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.asks < 1:
        p.error(f"--asks must be >= 1 (this question counts), got {args.asks}")
    try:
        session = next((s for s in read_sessions(args.dataset) if s.id == args.session), None)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if session is None:
        print(f"error: no session {args.session!r} in {args.dataset}", file=sys.stderr)
        return 2
    turn = next((t for t in session.turns if t.index == args.turn), None)
    if turn is None:
        print(f"error: session {args.session} has no turn {args.turn}", file=sys.stderr)
        return 2
    try:
        terms = schema_terms(session.world)
    except SpecError as exc:
        print(f"error: session {args.session} names world {session.world!r}, which has no spec: {exc}", file=sys.stderr)
        return 2
    sim = UserSimulator(terms)
    reply = sim.reply(args.question, turn, args.persona or session.persona, args.asks)
    print(json.dumps(reply.to_dict(), ensure_ascii=False) if args.json else f"[{reply.intent}] {reply.reply}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
