"""Issue 14, bad input: bounded action parsing, records that hold any string, sessions validated field by
field, and CLI arguments and unreachable or broken model servers that end with a clear message and a
non-zero status instead of a traceback or a silent rc 0."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from benchmark.session import Session, Turn, read_sessions, write_sessions
from envs.actions import MAX_JSON_DEPTH, ParseError, parse_action
from scoring.records import append_records, read_records

DEEP = "[" * 3000


@pytest.mark.parametrize("text", [
    '{"action": "EXECUTE_CYPHER", "input": ' + DEEP,
    '{"action": "EXECUTE_CYPHER", "input": ' + DEEP + "1" + "]" * 3000 + "}",
    '<tool_call>{"name": "execute_cypher", "arguments": {"query": ' + "{" * 5000,
    "x" * 300_000,
])
def test_deep_or_huge_actions_are_parse_errors_not_recursion_errors(text):
    parsed = parse_action(text)
    assert isinstance(parsed, ParseError)
    assert str(MAX_JSON_DEPTH) in parsed.message or "limit" in parsed.message


def test_records_survive_a_lone_surrogate(tmp_path):
    record = {"session_id": "s", "prediction": "RETURN '\ud800' AS x", "output_text": "é \udfff"}
    append_records(tmp_path / "t.jsonl", [record])
    assert list(read_records(tmp_path / "t.jsonl")) == [record]


def _session(**turn_overrides) -> dict:
    turn = {"index": 0, "utterance": "How many deities?", "gold_cypher": "MATCH (d:Deity) RETURN count(d) AS n",
            "gold_columns": ["n"], "gold_rows": [[1]], "phenomenon": "OPENING", "chain_mode": "none",
            "depends_on": None, **turn_overrides}
    return {"id": "s1", "world": "ancient_empire", "persona": "journalist", "turns": [turn]}


@pytest.mark.parametrize("override, field", [({"gold_columns": None}, "turns[0].gold_columns"),
                                             ({"gold_cypher": 7}, "turns[0].gold_cypher"),
                                             ({"index": True}, "turns[0].index"),
                                             ({"gold_rows": "x"}, "turns[0].gold_rows"),
                                             ({"surprise": 1}, "turns[0].surprise")])
def test_sessions_are_validated_field_by_field(tmp_path, override, field):
    path = tmp_path / "sessions.jsonl"
    path.write_text(json.dumps(_session()) + "\n" + json.dumps(_session(**override)) + "\n")
    with pytest.raises(ValueError) as info:
        list(read_sessions(path))
    assert f"{path}:2:" in str(info.value) and field in str(info.value)


@pytest.mark.parametrize("flag, value", [("--limit", "-719"), ("--limit", "0"), ("--limit", "two"),
                                         ("--concurrency", "0"), ("--top-p", "0"), ("--max-new-tokens", "-1"),
                                         ("--api-retries", "-2"), ("--infra-retries", "-1"), ("--budget", "0")])
def test_evaluate_refuses_bad_arguments(capsys, flag, value):
    from envs.evaluate import main

    with pytest.raises(SystemExit) as info:
        main(["--model", "oracle", flag, value])
    assert info.value.code == 2 and flag in capsys.readouterr().err


def test_ask_names_an_unknown_world(tmp_path):
    raw = _session()
    raw["world"] = "atlantis"
    (tmp_path / "sessions.jsonl").write_text(json.dumps(raw) + "\n")
    out = subprocess.run([sys.executable, "-m", "envs.ask", "--dataset", str(tmp_path), "--session", "s1",
                          "--turn", "0", "Which one?"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "atlantis" in out.stderr and "Traceback" not in out.stderr


class _NotUtf8(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's naming
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"choices": [{"message": {"content": "\xff\xfe"}}]}')

    def log_message(self, *args):
        pass


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.neo4j
@pytest.mark.parametrize("kind", ["unreachable", "not utf-8"])
def test_a_model_server_that_never_answers_usably_ends_non_zero(tmp_path, kind):
    turn = Turn(**{k: v for k, v in _session()["turns"][0].items()})
    write_sessions(tmp_path / "sessions.jsonl", [Session(id="s1", world="ancient_empire", persona="journalist",
                                                         turns=[turn])])
    server = None
    if kind == "unreachable":
        base = f"http://127.0.0.1:{_closed_port()}/v1"
    else:
        server = HTTPServer(("127.0.0.1", 0), _NotUtf8)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_port}/v1"
    try:
        out = subprocess.run([sys.executable, "-m", "envs.evaluate", "--model", "m", "--backend", "openai",
                              "--api-base", base, "--api-retries", "0", "--infra-retries", "0", "--dataset",
                              str(tmp_path), "--out", str(tmp_path / "run"), "--quiet", "--no-psjs"],
                             capture_output=True, text=True, timeout=300)
    finally:
        if server is not None:
            server.shutdown()
    assert out.returncode == 3 and "no turn was scored" in out.stderr, out.stderr
    records = list(read_records(tmp_path / "run" / "trajectories.jsonl"))
    expected = "cannot reach" if kind == "unreachable" else "not valid UTF-8"
    assert records and all(r["ex"] is None and expected in r["infra_error"] for r in records), records


@pytest.mark.neo4j
def test_env_step_survives_deep_brackets_and_surrogates():
    from envs.env import CypherTurnEnv, EnvConfig

    turn = Turn(**{k: v for k, v in _session()["turns"][0].items()})
    env = CypherTurnEnv(config=EnvConfig(protocol="agentic", budget_multiplier=10, timeout=5.0),
                        sessions=[Session(id="s1", world="ancient_empire", persona="journalist", turns=[turn])])
    env.reset(options={"session_id": "s1"})
    for action in ['{"action": "EXECUTE_CYPHER", "input": ' + DEEP, "SEARCH_VALUES " + DEEP,
                   "EXECUTE_CYPHER RETURN '\ud800' AS x"]:
        obs, _, done, _, _ = env.step(action)
        assert not done and ("Invalid action" in obs or "Error" in obs), obs
    _, _, done, _, info = env.step("SUBMIT_ANSWER RETURN '\ud800' AS x")
    assert done and info["records"][0]["prediction"] == "RETURN '\ud800' AS x"
