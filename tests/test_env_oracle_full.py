"""The harness's sanity check: the oracle scores EX = 1.0 on every turn of the full default test build,
under both protocols at x3 (guided: SUBMIT the gold; agentic: INSPECT_SCHEMA then SUBMIT the gold)."""

from __future__ import annotations

import pytest

from benchmark.build import default_dataset
from envs.env import CypherTurnEnv, EnvConfig, load_dataset
from envs.oracle import OracleAgent
from envs.runner import run_sessions

pytestmark = pytest.mark.neo4j


@pytest.mark.parametrize("protocol", ["guided", "agentic"])
def test_oracle_scores_one_on_every_turn_of_the_default_build(protocol):
    sessions = load_dataset(default_dataset("test"))
    config = EnvConfig(protocol=protocol, budget_multiplier=3)
    results = run_sessions(lambda: CypherTurnEnv(config=config, sessions=sessions),
                           lambda: OracleAgent(sessions, protocol), [s.id for s in sessions], concurrency=8)
    assert len(results) == len(sessions) == 721
    records = [r for recs in results.values() for r in recs]
    assert len(records) == sum(len(s.turns) for s in sessions)
    bad = [(r["session_id"], r["turn_index"], r["ex"], r["infra_error"]) for r in records
           if r["ex"] != 1 or r["cliff"]]
    assert not bad, bad[:5]
