"""The import graph (scripts/import_graph.py): no package imports a package later in the data flow."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "import_graph.py"
spec = importlib.util.spec_from_file_location("import_graph", SCRIPT)
import_graph = importlib.util.module_from_spec(spec)
spec.loader.exec_module(import_graph)


def test_no_import_runs_against_the_data_flow():
    out = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no import runs against the data flow" in out.stdout
    edges = import_graph.imports()
    assert ("scoring", "graphs") in edges and ("envs", "scoring") in edges  # the walk saw real imports
    # the judge and the metrics need nothing of the generator: only the session format (its chain rule)
    for place in edges.get(("scoring", "benchmark"), []):
        path, line = place.rsplit(":", 1)
        assert "benchmark.session import" in (ROOT / path).read_text().splitlines()[int(line) - 1], place


def test_an_upstream_import_is_flagged_command_lines_and_scripts_included():
    edges = {("graphs", "envs"): ["graphs/schema.py:3"], ("benchmark", "scoring"): ["benchmark/__main__.py:9"],
             ("envs", "graphs"): ["envs/env.py:1"], ("scripts", "training"): ["scripts/demo_learning.py:5"],
             ("training", "scripts"): ["training/sft.py:2"]}
    assert import_graph.against_the_flow(edges) == {
        ("graphs", "envs"): ["graphs/schema.py:3"], ("benchmark", "scoring"): ["benchmark/__main__.py:9"],
        ("training", "scripts"): ["training/sft.py:2"]}
    # the real tree: the command lines and scripts are walked too
    edges = import_graph.imports()
    assert any(p.startswith("scoring/__main__.py") for p in edges[("scoring", "cypherturn")])
    assert ("scripts", "training") in edges


def test_a_circle_among_a_packages_modules_is_found(tmp_path):
    for name, text in {"graphs/__init__.py": "from graphs.a import x\n",
                       "graphs/a.py": "x = 1\ndef f():\n    from graphs import b\n",
                       "graphs/b.py": "from graphs.c import y\n",
                       "graphs/c.py": "from .a import x\ny = 2\n",
                       "graphs/d.py": "import graphs.a\n",
                       "benchmark/__init__.py": "", "benchmark/e.py": "from graphs import a\n"}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert import_graph.module_cycles(tmp_path) == [["graphs.a", "graphs.b", "graphs.c"]]
    (tmp_path / "graphs/a.py").write_text("x = 1\n")
    assert import_graph.module_cycles(tmp_path) == []  # a module naming its own package is no circle
