"""How an evaluated model used SEARCH_VALUES: per split, the turns with a lookup, the lookups whose text
names one of the gold's string values (the search then shows it: re-run here on the real server), and the
answers after such a lookup that spell the gold's value as stored (not as typed).

python scripts/lookup_analysis.py runs/demo9/eval/sft-heldout [more run directories]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from envs.env import search_arguments  # noqa: E402
from envs.prompts import GRAPH_SEARCH_ROWS  # noqa: E402
from graphs.cypher_syntax import string_values  # noqa: E402
from graphs.search import SearchError, search_graph, search_values  # noqa: E402


def strings(cypher: str | None) -> set[str]:
    """The strings a query compares with, by the report's rule (demo_learning's gold values)."""
    return string_values(cypher or "")


def found(world: str, payload) -> set[str]:
    """The values the lookup showed the model (the environment's own reading of the action and its search,
    re-run); a malformed lookup showed an error: nothing."""
    arguments = search_arguments(payload)
    if isinstance(arguments, str):
        return set()
    try:
        if "label" in arguments:
            return set(map(str, search_values(world, str(arguments["label"]), str(arguments["property"]),
                                              arguments["query"]).values))
        return {m.value for m in search_graph(world, arguments["query"], limit=GRAPH_SEARCH_ROWS)}
    except SearchError:
        return set()


def analyse(run: Path) -> dict:
    records = [json.loads(line) for line in (run / "trajectories.jsonl").read_text().splitlines()]
    out = {"run": str(run), "turns": len(records), "ex": sum(r["ex"] or 0 for r in records),
           "turns_with_lookup": 0, "lookups": 0, "lookups_showing_a_gold_value": 0,
           "answers_after_such_a_lookup": 0, "of_which_spell_it_as_stored": 0, "of_which_ex": 0}
    for r in records:
        searches = [a for a in r["actions"] if a["type"] == "SEARCH_VALUES"]
        if not searches:
            continue
        out["turns_with_lookup"] += 1
        gold = strings(r["gold_cypher"])
        shown = set()
        for a in searches:
            out["lookups"] += 1
            hit = found(r["world"], a["payload"]) & gold
            out["lookups_showing_a_gold_value"] += bool(hit)
            shown |= hit
        if shown and r["prediction"]:
            out["answers_after_such_a_lookup"] += 1
            out["of_which_spell_it_as_stored"] += shown <= strings(r["prediction"])
            out["of_which_ex"] += r["ex"] or 0
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path, help="evaluation directories (each with trajectories.jsonl)")
    args = p.parse_args(argv)
    missing = [str(r) for r in args.runs if not (r / "trajectories.jsonl").is_file()]
    if missing:
        p.error(f"no trajectories.jsonl in {', '.join(missing)}")
    for run in args.runs:
        print(json.dumps(analyse(run)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
