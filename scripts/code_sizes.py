"""The largest files and the longest functions of the project, and its imports inside functions: the figures
a maintainer reads before and after a clean-up.

Counts every Python file of the packages and of ``scripts/`` (the layers of ``scripts/import_graph.py``;
tests are not counted). A function's length is its lines from ``def`` (decorators excluded) to its last line,
nested functions counted in their own right as well. An import inside a function counts when it names one
of the project's packages.

    python scripts/code_sizes.py [--files 12] [--functions 10] [--rev GIT_REV] [--json OUT]

``--rev`` reads the files of a git revision (``git show``), without a checkout: ``--rev dc88aea`` gives the
figures before issue 21's work.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from pathlib import Path

from import_graph import LAYERS, ROOT


def _sources(rev: str | None) -> dict[str, str]:
    """{path: text} of every Python file under the layers, in the working tree or at ``rev``."""
    if rev is None:
        return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
                for layer in LAYERS for p in sorted((ROOT / layer).rglob("*.py"))}
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "--", *LAYERS], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    return {n: subprocess.run(["git", "show", f"{rev}:{n}"], cwd=ROOT, check=True, capture_output=True,
                              text=True).stdout for n in names if n.endswith(".py")}


def measure(sources: dict[str, str]) -> dict:
    """Line counts per file, lengths per function, and the project imports inside functions."""
    files, functions, inner_imports = [], [], []
    for path, text in sources.items():
        files.append({"path": path, "lines": len(text.splitlines())})
        tree = ast.parse(text, filename=path)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            functions.append({"function": f"{path}:{node.name}", "line": node.lineno,
                              "lines": node.end_lineno - node.lineno + 1})
            for inner in ast.walk(node):
                names = ([a.name for a in inner.names] if isinstance(inner, ast.Import)
                         else [inner.module or ""] if isinstance(inner, ast.ImportFrom) and not inner.level
                         else ["."] if isinstance(inner, ast.ImportFrom) else [])
                if any(n == "." or n.split(".")[0] in LAYERS for n in names):
                    inner_imports.append(f"{path}:{inner.lineno}")
    return {"files": sorted(files, key=lambda f: (-f["lines"], f["path"])),
            "functions": sorted(functions, key=lambda f: (-f["lines"], f["function"])),
            "imports_inside_functions": sorted(set(inner_imports))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=12, help="how many of the largest files to list")
    ap.add_argument("--functions", type=int, default=10, help="how many of the longest functions to list")
    ap.add_argument("--rev", help="a git revision to measure instead of the working tree")
    ap.add_argument("--json", type=Path, help="write every figure to this file")
    args = ap.parse_args(argv)
    sizes = measure(_sources(args.rev))
    where = args.rev or "working tree"
    print(f"{where}: {len(sizes['files'])} files, {sum(f['lines'] for f in sizes['files'])} lines")
    print(f"\nlargest {args.files} files (lines):")
    for f in sizes["files"][:args.files]:
        print(f"  {f['lines']:5d}  {f['path']}")
    print(f"\nlongest {args.functions} functions (lines):")
    for f in sizes["functions"][:args.functions]:
        print(f"  {f['lines']:5d}  {f['function']} (line {f['line']})")
    print(f"\nproject imports inside functions: {len(sizes['imports_inside_functions'])}")
    if args.json:
        args.json.write_text(json.dumps(sizes, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
