"""Issue 14, outages: Neo4j SIGKILLed during an oracle evaluation is infrastructure, never a traceback
or a model error. Turns that still fail are recorded as infrastructure errors, a resumed run replays
exactly those sessions, and the run ends with every turn scored and EX 1.0, with the server back on the
same ports. Destructive (kills the server): the file name sorts last."""

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


def _args(dataset, out, *extra):
    return [sys.executable, "-m", "envs.evaluate", "--model", "oracle", "--protocol", "agentic", "--dataset",
            str(dataset), "--out", str(out), "--concurrency", "6", "--quiet", "--no-psjs", *extra]


def _kill_server() -> None:
    os.kill(server.running_state().pid, signal.SIGKILL)
    while server.running_state() is not None:
        time.sleep(0.05)


def _records(out) -> list[dict]:
    return [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]


def _assert_all_scored(out, sessions: int) -> None:
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["ex"] == 1.0 and metrics["infra_errors"] == 0 and metrics["sessions"] == sessions
    records = _records(out)
    assert len(records) == metrics["turns"] == metrics["turns_scored"]  # each turn once, all scored
    assert len({(r["session_id"], r["turn_index"]) for r in records}) == len(records)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("outage")
    build("test", path, seed=5, sessions=6, hf=False)
    return path


def test_an_outage_outlasting_the_retries_is_recorded_then_replayed_on_resume(dataset, tmp_path):
    ports = server.serve(progress=lambda *_: None).ports
    out = tmp_path / "run"
    _kill_server()
    # no autostart: the outage outlasts env.reset's retries, so every turn becomes an infrastructure error
    first = subprocess.run(_args(dataset, out, "--infra-retries", "0"), capture_output=True, text=True,
                           timeout=600, env={**os.environ, "CYPHERTURN_NO_AUTOSTART": "1"})
    assert first.returncode == 3 and "no turn was scored" in first.stderr, first.stderr
    assert "Traceback" not in first.stderr
    records = _records(out)
    assert records and all(r["infra_error"] and r["ex"] is None for r in records)  # never a model error

    resumed = subprocess.run(_args(dataset, out), capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0 and "Traceback" not in resumed.stderr, resumed.stderr
    _assert_all_scored(out, 6)
    assert server.running_state().ports == ports  # the evaluator restarted it where it was


def test_neo4j_killed_mid_run_then_resumed_scores_every_turn(dataset, tmp_path):
    ports = server.serve(progress=lambda *_: None).ports
    out = tmp_path / "run"
    proc = subprocess.Popen(_args(dataset, out, "--concurrency", "2", "--infra-retries", "0"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    traj = out / "trajectories.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (traj.is_file() and traj.read_text().strip()):
        time.sleep(0.02)
    _kill_server()
    _, stderr = proc.communicate(timeout=600)
    assert "Traceback" not in stderr, stderr
    assert proc.returncode in (0, 3), stderr  # 3: turns lost to the outage are reported, not scored
    spoiled = {r["session_id"] for r in _records(out) if r["infra_error"]}
    kept = [line for line in traj.read_text().splitlines() if json.loads(line)["session_id"] not in spoiled]

    resumed = subprocess.run(_args(dataset, out, "--concurrency", "2"), capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0 and "Traceback" not in resumed.stderr, resumed.stderr
    # the resumed run replayed exactly the spoiled sessions: every other line is untouched
    assert [line for line in traj.read_text().splitlines() if json.loads(line)["session_id"] not in spoiled] == kept
    _assert_all_scored(out, 6)
    assert server.running_state().ports == ports
