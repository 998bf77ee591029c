"""The evaluate CLI end to end on the real Neo4j: oracle scores, resumable runs, infrastructure
errors kept out of the scores, the report command."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from benchmark.build import build

pytestmark = pytest.mark.neo4j


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("evalset")
    build("test", out, seed=4, sessions=14, hf=False)
    return out


def _evaluate(*args, timeout=900):
    return subprocess.run([sys.executable, "-m", "envs.evaluate", *args, "--quiet"], capture_output=True, text=True,
                          timeout=timeout)


def _metrics(run):
    return json.loads((run / "metrics.json").read_text())


@pytest.mark.parametrize("protocol", ["guided", "agentic"])
def test_oracle_scores_one_and_writes_every_output(dataset, tmp_path, protocol):
    out = _evaluate("--model", "oracle", "--protocol", protocol, "--dataset", str(dataset), "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    m = _metrics(tmp_path)
    assert m["ex"] == m["sem"] == m["ex_relaxed"] == m["psjs"] == 1.0
    assert m["infra_errors"] == 0 and m["sessions"] == 14
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["protocol"] == protocol and len(meta["dataset_sha256"]) == 64 and meta["world_checksums"]
    assert "| EX (strict) | 1.000" in (tmp_path / "report.md").read_text()
    timing = json.loads((tmp_path / "timing.json").read_text())
    assert timing["sessions_played"] == 14 and timing["turns_played"] == timing["turns_scored"] == m["turns"]
    # the oracle submits each gold's own text, which the judge does not run again (scoring.judge): its
    # play may spend no time in Neo4j at all
    assert 0 <= timing["neo4j_seconds_during_play"] < timing["play_seconds"] * timing["concurrency"]
    assert timing["model_seconds_during_play"] == 0
    assert timing["concurrency"] == 8 and timing["overhead_ms_per_turn"] is None  # defined one session at a time


def test_a_killed_run_resumes_to_the_same_metrics(dataset, tmp_path):
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    args = ["--model", "oracle", "--protocol", "agentic", "--dataset", str(dataset), "--concurrency", "1"]
    assert _evaluate(*args, "--out", str(whole)).returncode == 0
    proc = subprocess.Popen([sys.executable, "-m", "envs.evaluate", *args, "--out", str(broken), "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    traj = broken / "trajectories.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (traj.is_file() and len({json.loads(line)["session_id"]
                                                                       for line in traj.read_text().splitlines()}) >= 3):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    sessions_before = {json.loads(line)["session_id"] for line in traj.read_text().splitlines()}
    assert 3 <= len(sessions_before) < 14 and not (broken / "metrics.json").exists()
    assert _evaluate(*args, "--out", str(broken)).returncode == 0
    lines = traj.read_text().splitlines()
    assert len({json.loads(line)["session_id"] for line in lines}) == 14
    assert len(lines) == len((whole / "trajectories.jsonl").read_text().splitlines())  # nothing played twice
    assert _metrics(broken) == _metrics(whole)
    timing = json.loads((whole / "timing.json").read_text())
    assert timing["concurrency"] == 1 and timing["overhead_ms_per_turn"] > 0


def test_resuming_with_other_settings_is_refused(dataset, tmp_path):
    assert _evaluate("--model", "oracle", "--dataset", str(dataset), "--limit", "2", "--out", str(tmp_path)).returncode == 0
    out = _evaluate("--model", "oracle", "--dataset", str(dataset), "--limit", "3", "--out", str(tmp_path))
    assert out.returncode == 2 and "other settings" in out.stderr


class _AlwaysDown(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's naming
        self.send_response(503)
        self.end_headers()
        self.wfile.write(b"overloaded")

    def log_message(self, *args):
        pass


def test_persistent_api_failures_are_counted_not_scored(dataset, tmp_path):
    # A real HTTP server on loopback that always answers 503 stands in for an overloaded API.
    server = HTTPServer(("127.0.0.1", 0), _AlwaysDown)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        out = _evaluate("--model", "some-model", "--backend", "openai", "--api-base",
                        f"http://127.0.0.1:{server.server_port}/v1", "--api-retries", "1", "--dataset", str(dataset),
                        "--limit", "2", "--out", str(tmp_path), "--infra-retries", "0")
    finally:
        server.shutdown()
    assert out.returncode == 3 and "no turn was scored" in out.stderr, out.stderr  # never a silent rc 0
    m = _metrics(tmp_path)
    assert m["turns_scored"] == 0 and m["infra_errors"] == m["turns"] > 0 and m["ex"] is None
    records = [json.loads(line) for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    assert all(r["ex"] is None and "503" in r["infra_error"] for r in records)


def test_report_command_writes_leaderboard_and_figures(dataset, tmp_path):
    runs = []
    for protocol in ("guided", "agentic"):
        run = tmp_path / protocol
        assert _evaluate("--model", "oracle", "--protocol", protocol, "--dataset", str(dataset), "--limit", "4",
                         "--out", str(run), "--no-psjs").returncode == 0
        runs.append(str(run))
    out = subprocess.run([sys.executable, "-m", "scoring", "report", *runs, "--out", str(tmp_path / "rep")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    report = (tmp_path / "rep" / "report.md").read_text()
    assert "| oracle | guided | 1.000" in report and "| oracle | agentic x3 | 1.000" in report
    assert "## EX by phenomenon" in report
    for fig in ("ex_by_budget.png", "ex_by_turn_position.png", "cer_by_turn_position.png", "phenomenon_heatmap.png"):
        data = (tmp_path / "rep" / fig).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000


def test_limit_takes_the_worlds_in_turn(dataset, tmp_path):
    from benchmark.session import read_sessions, worlds_interleaved
    from envs.evaluate import EvaluationConfig, run

    sessions = list(read_sessions(dataset))
    assert len({s.world for s in sessions[:3]}) < 3  # a build lists its worlds one after the other
    run(EvaluationConfig("oracle", dataset=str(dataset), limit=3, out=str(tmp_path), quiet=True))
    played = {json.loads(line)["session_id"] for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()}
    chosen = worlds_interleaved(sessions)[:3]
    assert played == {s.id for s in chosen} and len({s.world for s in chosen}) == 3
    assert worlds_interleaved(["a1", "a2", "a3", "b1", "c1", "c2"], lambda x: x[0]) == ["a1", "b1", "c1", "a2", "c2", "a3"]


def test_the_python_api_takes_an_evaluation_config_like_the_command_line(dataset, tmp_path):
    from envs.evaluate import EvaluationConfig, EvaluationConfigError, build_parser, run

    # the command line's defaults are the config's
    assert EvaluationConfig.from_args(build_parser().parse_args(["--model", "oracle"])) == EvaluationConfig("oracle")
    for name, value in (("protocol", "free"), ("budget", 0), ("budget", True), ("limit", 0), ("top_p", 0.0),
                        ("temperature", -1), ("infra_retries", -1), ("backend", "tgi"), ("variant", "none"),
                        ("dtype", "int4")):
        with pytest.raises(EvaluationConfigError, match=f"^{name} must be"):
            EvaluationConfig("oracle", **{name: value})
    metrics = run(EvaluationConfig("oracle", protocol="agentic", dataset=str(dataset), limit=3, concurrency=2,
                                   out=str(tmp_path / "api"), quiet=True))
    assert metrics["ex"] == 1.0 and metrics["sessions"] == 3
    meta = json.loads((tmp_path / "api" / "meta.json").read_text())
    assert meta["protocol"] == "agentic" and meta["limit"] == 3


def test_a_model_retrained_in_place_is_scored_anew_not_resumed(dataset, tmp_path):
    """A model directory rewritten with new weights (what ``demo_learning.py --ship`` does to the main job's
    adapter) is not the model whose answers the run directory holds: resuming is refused, and
    ``--replace-stale`` plays the run again from its first session."""
    import shutil

    from safetensors.torch import load_file, save_file

    from envs.evaluate import model_sha256
    from envs.models import tiny_model_dir

    model, run = tmp_path / "model", tmp_path / "run"
    shutil.copytree(tiny_model_dir("tiny-llama"), model)
    args = ["--model", str(model), "--dataset", str(dataset), "--limit", "1", "--max-new-tokens", "4",
            "--concurrency", "1", "--no-psjs", "--out", str(run)]
    assert _evaluate(*args).returncode == 0
    first = json.loads((run / "meta.json").read_text())["model_sha256"]
    assert first == model_sha256(str(model))
    turns = len((run / "trajectories.jsonl").read_text().splitlines())

    weights = load_file(model / "model.safetensors")
    save_file({k: v + 0.01 for k, v in weights.items()}, model / "model.safetensors", metadata={"format": "pt"})
    out = _evaluate(*args)
    assert out.returncode == 2 and "model_sha256" in out.stderr and "--replace-stale" in out.stderr, out.stderr
    assert json.loads((run / "meta.json").read_text())["model_sha256"] == first  # the refused run changed nothing

    assert _evaluate(*args, "--replace-stale").returncode == 0
    meta = json.loads((run / "meta.json").read_text())
    assert meta["model_sha256"] == model_sha256(str(model)) != first
    assert len((run / "trajectories.jsonl").read_text().splitlines()) == turns  # played once more, not appended
