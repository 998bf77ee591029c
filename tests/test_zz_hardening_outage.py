"""Issue 14, outages: Neo4j SIGKILLed in the middle of an oracle evaluation is infrastructure, never a
traceback or a model error. The evaluator retries, the turns that still fail are recorded as
infrastructure errors, a resumed run replays exactly those sessions, and the run ends with every turn
scored and EX 1.0, with the server back on the same ports. Destructive: the file name sorts last."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from benchmark.build import build
from graphs import server

pytestmark = [pytest.mark.neo4j, pytest.mark.destructive]


def test_neo4j_killed_mid_run_then_resumed_scores_every_turn(tmp_path):
    dataset = tmp_path / "set"
    build("test", dataset, seed=5, sessions=6, hf=False)
    ports = server.serve(progress=lambda *_: None).ports
    out = tmp_path / "run"
    args = [sys.executable, "-m", "envs.evaluate", "--model", "oracle", "--protocol", "agentic", "--dataset",
            str(dataset), "--out", str(out), "--concurrency", "4", "--quiet", "--no-psjs", "--infra-retries", "0"]
    # no autostart in the first run: the outage outlasts env.reset's retries, so turns become infra errors
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "CYPHERTURN_NO_AUTOSTART": "1"})
    traj = out / "trajectories.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (traj.is_file() and len(traj.read_text().splitlines()) >= 2):
        time.sleep(0.02)
    os.kill(server.running_state().pid, signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=600)
    assert "Traceback" not in stderr, stderr
    assert proc.returncode in (0, 3), stderr  # 3: turns lost to the outage are reported, not scored
    first = [json.loads(line) for line in traj.read_text().splitlines()]
    spoiled = {r["session_id"] for r in first if r["infra_error"]}
    assert all(r["ex"] is None for r in first if r["infra_error"])  # never scored as a model error
    assert proc.returncode == 3 and spoiled, (proc.returncode, stderr)
    assert "infrastructure errors" in stderr
    kept = [line for line in traj.read_text().splitlines() if json.loads(line)["session_id"] not in spoiled]

    resumed = subprocess.run(args[:-2] + ["--infra-retries", "3"], capture_output=True, text=True, timeout=900)
    # the resumed run replayed exactly the spoiled sessions: every other line is untouched
    assert [line for line in traj.read_text().splitlines() if json.loads(line)["session_id"] not in spoiled] == kept
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["ex"] == 1.0 and metrics["infra_errors"] == 0 and metrics["sessions"] == 6
    records = [json.loads(line) for line in traj.read_text().splitlines()]
    assert len(records) == metrics["turns"] == metrics["turns_scored"]  # each turn once, all scored
    assert len({(r["session_id"], r["turn_index"]) for r in records}) == len(records)
    assert server.running_state() is not None and server.running_state().ports == ports
