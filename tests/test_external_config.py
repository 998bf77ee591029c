"""The external-Neo4j code path (config file or environment variables), exercised against the local
server's Bolt ports as if they were a remote Neo4j."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from graphs import connections, server
from graphs.executor import SafeExecutor

pytestmark = pytest.mark.neo4j


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CYPHERTURN_NEO4J_")}
    env.update(extra)
    return env


def test_config_file_maps_each_world_to_its_uri(tmp_path, monkeypatch):
    state = server.running_state()
    config = {"default": {"uri": "bolt://127.0.0.1:1", "user": "neo4j", "password": "unused"},
              "worlds": {w: {"uri": f"bolt://127.0.0.1:{p}"} for w, p in state.ports.items()}}
    path = tmp_path / "neo4j.yaml"
    path.write_text(json.dumps(config))  # JSON is valid YAML
    monkeypatch.setenv("CYPHERTURN_NEO4J_CONFIG", str(path))
    target = connections.resolve("magic_academy")
    assert target.local is False and target.uri == f"bolt://127.0.0.1:{state.ports['magic_academy']}"
    assert target.user == "neo4j" and target.password == "unused"  # taken from default
    r = SafeExecutor("magic_academy", target=target).run("MATCH (n) RETURN count(n) > 0 AS any")
    assert r.error is None and r.rows == [[True]]
    out = subprocess.run([sys.executable, "-m", "graphs", "status", "--json", "--worlds", "ancient_empire"],
                         capture_output=True, text=True, timeout=300, env=_env(CYPHERTURN_NEO4J_CONFIG=str(path)))
    status = json.loads(out.stdout)
    assert status["external"] is True
    assert status["worlds"][0]["loaded"] is True, status


def test_environment_variables_configure_one_uri_for_all_worlds():
    state = server.running_state()
    port = state.ports["celestial_court"]
    out = subprocess.run([sys.executable, "-m", "graphs", "query", "celestial_court",
                          "MATCH (n) RETURN count(n) AS n", "--json"], capture_output=True, text=True,
                         timeout=300, env=_env(CYPHERTURN_NEO4J_URI=f"bolt://127.0.0.1:{port}"))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["rows"][0][0] > 0


def test_unreachable_external_neo4j_reports_unavailable_not_a_crash(tmp_path, monkeypatch):
    monkeypatch.setenv("CYPHERTURN_NEO4J_URI", "bolt://127.0.0.1:1")
    ex = SafeExecutor("ancient_empire", retries=1, backoff=0.05)
    r = ex.run("MATCH (n) RETURN n LIMIT 1")
    assert r.error is not None and r.error.kind == "unavailable"
    assert "127.0.0.1:1" in r.error.message


def test_malformed_config_file_is_a_clear_error(tmp_path, monkeypatch):
    path = tmp_path / "bad.yaml"
    path.write_text("worlds: [1, 2]\n")
    monkeypatch.setenv("CYPHERTURN_NEO4J_CONFIG", str(path))
    with pytest.raises(connections.ConfigError, match="expected keys"):
        connections.resolve("ancient_empire")
    path.write_text("default: {user: x}\n")
    with pytest.raises(connections.ConfigError, match="no 'uri'"):
        connections.resolve("ancient_empire")
