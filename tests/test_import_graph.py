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


def test_an_upstream_import_is_flagged_and_a_command_line_is_not():
    edges = {("graphs", "envs"): ["graphs/schema.py:3"], ("benchmark", "scoring"): ["benchmark/__main__.py:9"],
             ("envs", "graphs"): ["envs/env.py:1"]}
    assert import_graph.against_the_flow(edges) == {("graphs", "envs"): ["graphs/schema.py:3"]}
