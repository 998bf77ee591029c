"""Package-to-package imports of the project, checked against the direction of the data flow.

The pipeline reads spec -> graph -> sessions -> judge/metrics -> rewards -> environment/evaluation ->
training, so the packages are layered in that order:

    graphs     world specs, the local Neo4j, the Cypher toolkit (graphs/cypher_syntax.py: lexer, keyword
               rule, clauses; graphs/cypher_guard.py), the safe executor
    benchmark  the session generator and the dataset (builds, HF export, annotation)
    scoring    the one judge, the record format, the metrics, summaries and reports
    rewards    the reward functions (they call the judge)
    envs       the environment, its TRL adapter and the evaluation application
    training   SFT and GRPO over all of the above

A package may import the packages before it, never one after it: an import from a later package is
against the data flow and ``--check`` fails on it. A package's ``__main__`` (its command line, which
may dispatch to any stage, e.g. ``python -m benchmark score``) is an entry point and exempt.
Every ``import`` counts, also one inside a function.

    python scripts/import_graph.py [--check]
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("graphs", "benchmark", "scoring", "rewards", "envs", "training")


def imports(root: Path = ROOT) -> dict[tuple[str, str], list[str]]:
    """{(importing package, imported package): [file:line, ...]} over every module of every package."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for package in LAYERS:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top in LAYERS and top != package:
                        edges[(package, top)].append(f"{path.relative_to(root)}:{node.lineno}")
    return dict(edges)


def against_the_flow(edges: dict[tuple[str, str], list[str]]) -> dict[tuple[str, str], list[str]]:
    """The edges from a package to a later one, less the imports made by ``__main__`` modules."""
    bad = {}
    for (src, dst), where in edges.items():
        if LAYERS.index(dst) > LAYERS.index(src):
            places = [w for w in where if not w.split(":")[0].endswith("__main__.py")]
            if places:
                bad[(src, dst)] = places
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when an import runs against the data flow")
    args = ap.parse_args(argv)
    edges = imports()
    bad = against_the_flow(edges)
    print("layers, upstream first: " + " -> ".join(LAYERS))
    for (src, dst), where in sorted(edges.items(), key=lambda e: (LAYERS.index(e[0][0]), LAYERS.index(e[0][1]))):
        mark = "  AGAINST THE FLOW" if (src, dst) in bad else ""
        print(f"  {src:<9} imports {dst:<9} {len(where):3d} place(s){mark}")
    for (src, dst), where in sorted(bad.items()):
        print(f"{src} -> {dst}: " + ", ".join(where))
    if not bad:
        print("no import runs against the data flow")
    return 1 if args.check and bad else 0


if __name__ == "__main__":
    sys.exit(main())
