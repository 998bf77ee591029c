"""``python -m scoring score`` and ``scoring.score.score_pair``."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from scoring.judge import GoldCache, GoldQueryError, shared_judge
from scoring.score import add_score_command, cmd_score, score_pair

pytestmark = pytest.mark.neo4j

W = "ancient_empire"
GOLD = "MATCH (e:Emperor)-[:GOVERNS]->(p:Province) RETURN e.name AS name, count(p) AS n ORDER BY n DESC, name LIMIT 3"
PRED = "MATCH (p:Province)<-[:GOVERNS]-(x:Emperor) RETURN x.name AS who, count(*) AS c ORDER BY c DESC, who LIMIT 3"


def _cli(*args, env=None, timeout=180):
    return subprocess.run([sys.executable, "-m", "scoring", "score", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_cli_json():
    out = _cli("--world", W, "--gold", GOLD, "--pred", PRED, "--json")
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    assert (payload["ex"], payload["ex_relaxed"], payload["psjs"]) == (0, 1, 1.0)
    assert payload["ordered"] is True
    assert payload["gold"]["columns"] == ["name", "n"] and payload["pred"]["columns"] == ["who", "c"]
    assert len(payload["gold"]["rows"]) == 3


def test_cli_text_and_errors():
    out = _cli("--world", W, "--gold", GOLD, "--pred", GOLD)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("EX 1  EX relaxed 1  PSJS 1.000")
    out = _cli("--world", W, "--gold", GOLD, "--pred", "MATCH (e:Emperor RETURN e", "--no-psjs")
    assert out.returncode == 0 and "prediction: syntax error" in out.stdout
    out = _cli("--world", W, "--gold", "MATCH (e:Emperor RETURN e", "--pred", GOLD)
    assert out.returncode == 2 and "gold query failed" in out.stderr
    out = _cli("--world", "atlantis", "--gold", "RETURN 1", "--pred", "RETURN 1")
    assert out.returncode == 2 and "atlantis" in out.stderr


def test_cli_infrastructure_error_is_not_a_score():
    env = {**os.environ, "CYPHERTURN_NEO4J_URI": "bolt://127.0.0.1:1"}  # nothing listens there
    out = _cli("--world", W, "--gold", GOLD, "--pred", PRED, "--json", env=env)
    assert out.returncode == 3, (out.stdout, out.stderr)
    assert "infrastructure" in out.stderr and out.stdout == ""


def test_cmd_score_on_its_own_parser(capsys):
    parser = argparse.ArgumentParser()
    commands: dict = {}
    add_score_command(parser.add_subparsers(dest="command"), commands)
    args = parser.parse_args(["score", "--world", W, "--gold", GOLD, "--pred", PRED, "--json"])
    assert commands["score"] is cmd_score and args.func is cmd_score
    assert cmd_score(args) == 0
    assert json.loads(capsys.readouterr().out)["ex_relaxed"] == 1


def test_score_pair_uses_the_shared_judges_gold_cache_by_default():
    """One gold cache per judge: score_pair's default is the process-wide judge's (of its limits)."""
    cache = shared_judge(timeout=60.0).gold_cache
    gold = "MATCH (e:Emperor) RETURN e.name AS name, 60 AS marker"
    first = score_pair(W, gold, PRED, timeout=60.0, with_psjs=False)
    second = score_pair(W, gold, PRED, timeout=60.0, with_psjs=False)
    assert not first["gold_cached"] and second["gold_cached"]
    assert cache.get((W, gold)) is not None
    assert shared_judge().gold_cache.get((W, gold)) is None  # other limits, another judge and cache


def test_score_pair_cache_and_missing_prediction():
    cache = GoldCache(maxsize=2)
    first = score_pair(W, GOLD, PRED, cache=cache)
    second = score_pair(W, GOLD, GOLD, cache=cache)
    assert not first["gold_cached"] and second["gold_cached"]
    assert (second["ex"], second["ex_relaxed"], second["psjs"]) == (1, 1, 1.0)
    assert cache.stats()["hits"] == 1 and cache.stats()["misses"] == 1
    none = score_pair(W, GOLD, None, cache=cache)
    assert (none["ex"], none["ex_relaxed"], none["psjs"], none["pred"]) == (0, 0, 0.0, None)
    for q in ("RETURN 1", "RETURN 2", "RETURN 3"):
        score_pair(W, q, q, cache=cache, with_psjs=False)
    assert len(cache) == 2  # LRU bound
    failing = score_pair(W, GOLD, "MATCH (e:Emperor) RETURN e.name / 0 AS x", cache=None)
    assert failing["ex"] == 0 and failing["pred"]["error"]["kind"] == "runtime" and failing["psjs"] == 0.0
    with pytest.raises(GoldQueryError):
        score_pair(W, "MATCH (e:Emperor RETURN e", PRED, cache=None)
