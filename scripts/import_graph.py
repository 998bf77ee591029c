"""Package-to-package imports of the project, checked against the direction of the data flow.

The pipeline reads spec -> graph -> sessions -> judge/metrics -> rewards -> environment/evaluation ->
training, so the packages are layered in that order:

    cypherturn what every package shares: the error hierarchy, the command lines' exit codes, an LRU cache
    graphs     world specs, the local Neo4j, the Cypher toolkit (graphs/cypher_syntax.py: lexer, keyword
               rule, clauses; graphs/cypher_guard.py), the safe executor
    benchmark  the session generator and the dataset (builds, HF export, annotation)
    scoring    the one judge, the record format, the metrics, summaries and reports
    rewards    the reward functions (they call the judge)
    envs       the environment, its TRL adapter and the evaluation application
    training   SFT and GRPO over all of the above

    scripts    the command lines under scripts/ (they may use every package; no package imports them)

A package may import the packages before it, never one after it: an import from a later package is
against the data flow and ``--check`` fails on it. A package's ``__main__`` (its command line) counts as
the package: ``python -m scoring score`` lives in ``scoring``, not in ``benchmark``. Inside a package the
modules import each other without a circle (``--check`` names any cycle). Every ``import`` counts, also
one inside a function.

    python scripts/import_graph.py [--check]
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("cypherturn", "graphs", "benchmark", "scoring", "rewards", "envs", "training", "scripts")


def _module(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, int]]:
    """(module name, line) of every import in ``tree``, relative ones resolved; ``from a import b`` gives
    ``a.b`` as well as ``a`` (b may be a module)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[:len(module.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([base] if base else []))
            out.append((base, node.lineno))
            out += [(f"{base}.{a.name}", node.lineno) for a in node.names]
    return out


def _walk(root: Path):
    """(package, module name, path, imports) for every Python file of every layer."""
    for package in LAYERS:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            module = _module(path, root)
            yield package, module, path, _imported(tree, module, path.name == "__init__.py")


def imports(root: Path = ROOT) -> dict[tuple[str, str], list[str]]:
    """{(importing package, imported package): [file:line, ...]} over every module of every layer."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for package, _, path, found in _walk(root):
        for name, line in found:
            top = name.split(".")[0]
            place = f"{path.relative_to(root)}:{line}"
            if top in LAYERS and top != package and place not in edges[(package, top)]:
                edges[(package, top)].append(place)
    return dict(edges)


def against_the_flow(edges: dict[tuple[str, str], list[str]]) -> dict[tuple[str, str], list[str]]:
    """The edges from a layer to a later one."""
    return {(src, dst): where for (src, dst), where in edges.items() if LAYERS.index(dst) > LAYERS.index(src)}


def module_cycles(root: Path = ROOT) -> list[list[str]]:
    """The circles among the modules of one package (strongly connected components of more than one
    module, or a module importing itself), each as its sorted module names."""
    graph: dict[str, set[str]] = {}
    for _, module, _, found in _walk(root):
        graph.setdefault(module, set())
    for _, module, _, found in _walk(root):
        # a module naming its own package (``from graphs import b``) needs that package's __init__ run first,
        # as every submodule does: no edge of its own
        graph[module] |= {name for name, _ in found
                          if name in graph and name != module and not module.startswith(name + ".")}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when an import runs against the data flow")
    args = ap.parse_args(argv)
    edges = imports()
    bad = against_the_flow(edges)
    cycles = module_cycles()
    print("layers, upstream first: " + " -> ".join(LAYERS))
    for (src, dst), where in sorted(edges.items(), key=lambda e: (LAYERS.index(e[0][0]), LAYERS.index(e[0][1]))):
        mark = "  AGAINST THE FLOW" if (src, dst) in bad else ""
        print(f"  {src:<9} imports {dst:<9} {len(where):3d} place(s){mark}")
    for (src, dst), where in sorted(bad.items()):
        print(f"{src} -> {dst}: " + ", ".join(where))
    for cycle in cycles:
        print("modules importing each other in a circle: " + ", ".join(cycle))
    if not bad:
        print("no import runs against the data flow")
    if not cycles:
        print("no circle among the modules of a package")
    return 1 if args.check and (bad or cycles) else 0


if __name__ == "__main__":
    sys.exit(main())
