"""The one judge (``scoring.judge``) on the real Neo4j, and the identical-verdict test: for the same pairs
the ``execution`` reward, the environment's turn reward and ``score_pair`` give the same values."""

from __future__ import annotations

import pickle

import pytest

from benchmark.session import Session, Turn
from cypherturn.errors import InfrastructureError
from envs.env import CypherTurnEnv, EnvConfig
from envs.prompts import GUIDED_CAP
from graphs.executor import QueryError, QueryResult, execute
from rewards.execution import (ExecutionReward, ExecutionRewardOptions, RewardInfrastructureError,
                               execution_reward, make_execution_reward)
from scoring.judge import GoldQueryError, Judge, JudgeLimits, Pair, shared_judge
from scoring.score import score_pair

pytestmark = pytest.mark.neo4j

W = "ancient_empire"
CAP = JudgeLimits().max_rows
T = 3.0  # a small timeout for every judge of the identical-verdict test (SLOW takes far longer)
GOLD = "MATCH (e:Emperor)-[:GOVERNS]->(p:Province) RETURN p.name AS name"
ORDERED = "MATCH (p:Province) RETURN p.name AS name ORDER BY p.population DESC, name LIMIT 5"
SLOW = "MATCH (a), (b), (c) WHERE a.name < b.name AND b.name < c.name RETURN count(*) AS name"
N_1500, N_1200 = "UNWIND range(1, 1500) AS x RETURN x", "UNWIND range(1, 1200) AS x RETURN x"
RENAMED = "match (x:Emperor)-[:GOVERNS]->(y:Province) return y.name as name"
OTHER_NAME = "MATCH (p:Province)<-[:GOVERNS]-(:Emperor) RETURN p.name AS province"
UNDER = f"UNWIND range(1, {CAP - 10}) AS x RETURN x"
assert CAP < 1200

# (name, gold, prediction, strict EX, relaxed EX): the verdict every judge must give
CASES = [
    ("1500 vs 1200 rows: both over the cap, same prefix", N_1500, N_1200, 0, 0),
    ("both over the cap, same rows, other text", N_1500, "UNWIND range(1, 1500) AS y RETURN y AS x", 0, 0),
    ("both over the cap, the gold's text", N_1500, N_1500 + " ;", 1, 1),
    ("prediction over the cap, gold not", UNDER, N_1200, 0, 0),
    ("gold over the cap, prediction not", N_1500, UNDER, 0, 0),
    ("timeout", GOLD, SLOW, 0, 0),
    ("syntax error", GOLD, "MATCH (e:Emperor RETURN e", 0, 0),
    ("refused write", GOLD, "CREATE (e:Emperor {name: 'Nobody'}) RETURN e.name AS name", 0, 0),
    ("missing prediction", GOLD, None, 0, 0),
    ("right, renamed", GOLD, RENAMED, 1, 1),
    ("other column name", GOLD, OTHER_NAME, 0, 1),
    ("extra column", GOLD, "MATCH (e:Emperor)-[:GOVERNS]->(p:Province) RETURN p.name AS name, e.name AS e", 0, 1),
    ("wrong rows", GOLD, "MATCH (p:Province) RETURN p.name AS name", 0, 0),
    ("ordered gold, same order", ORDERED,
     "MATCH (q:Province) RETURN q.name AS name ORDER BY q.population DESC, name LIMIT 5", 1, 1),
    ("ordered gold, other order", ORDERED,
     "MATCH (p:Province) RETURN p.name AS name ORDER BY p.population ASC, name LIMIT 5", 0, 0),
    ("unordered gold, ordered prediction", GOLD,
     "MATCH (e:Emperor)-[:GOVERNS]->(p:Province) RETURN p.name AS name ORDER BY name DESC", 1, 1),
]


def _gold_result(gold: str) -> tuple[list[str], list[list]]:
    r = execute(W, gold, max_rows=CAP * 10)  # the whole result, as a dataset would store it
    assert r.ok and not r.truncated
    return r.columns, r.rows


def _env_turn(gold: str, pred: str | None, *, execute_first: bool = False) -> tuple[float, dict]:
    """The environment's reward and record for one turn whose gold is ``gold``, answered with ``pred``
    (``execute_first``: run it with EXECUTE_CYPHER, then submit it: the judge takes that result)."""
    columns, rows = _gold_result(gold)
    turn = Turn(index=0, utterance="q", gold_cypher=gold, gold_columns=columns, gold_rows=rows,
                phenomenon="BASE", chain_mode="none", depends_on=None)
    env = CypherTurnEnv(config=EnvConfig(protocol="guided", timeout=T),
                        sessions=[Session(id="s", world=W, persona="student", turns=[turn])])
    env.reset(options={"session_id": "s"})
    if pred is None:  # the turn ends after the guided cap without a query
        for _ in range(GUIDED_CAP):
            _, reward, done, _, info = env.step("INSPECT_SCHEMA")
    else:
        if execute_first:
            _, _, done, _, _ = env.step(f"EXECUTE_CYPHER {pred}")
            assert not done and env.last_result is not None
        _, reward, done, _, info = env.step(f"SUBMIT_ANSWER {pred}")
    assert done
    return reward, info["record"]


def test_reward_env_and_scorer_give_identical_verdicts():
    golds = [g for _, g, _, _, _ in CASES]
    completions = ["no answer" if p is None else f"<answer>{p}</answer>" for _, _, p, _, _ in CASES]
    worlds = [W] * len(CASES)
    strict = make_execution_reward(timeout=T)(None, completions, gold_cypher=golds, world=worlds)
    stored = [_gold_result(g) for g in golds]  # the training rows' form: the stored gold result
    relaxed = make_execution_reward("relaxed", timeout=T)(None, completions, gold_cypher=golds, world=worlds,
                                                          gold_columns=[c for c, _ in stored],
                                                          gold_rows=[r for _, r in stored])
    for i, (name, gold, pred, ex, exr) in enumerate(CASES):
        scored = score_pair(W, gold, pred, timeout=T, with_psjs=False, cache=None)
        env_reward, record = _env_turn(gold, pred)
        ran_reward, ran_record = _env_turn(gold, pred, execute_first=pred is not None)
        assert (scored["ex"], scored["ex_relaxed"]) == (ex, exr), name
        assert (record["ex"], record["ex_relaxed"]) == (ex, exr), name
        assert (ran_record["ex"], ran_record["ex_relaxed"], ran_reward) == (ex, exr, env_reward), name
        assert env_reward == strict[i] == float(ex), name
        assert relaxed[i] == float(exr), name
        assert scored["truncated"] == ("over the cap" in name), name


def test_verdicts_of_a_batch_carry_errors_truncation_and_same_text():
    judge = Judge(JudgeLimits(timeout=T))
    jobs = []
    original = judge.run_queries
    judge.run_queries = lambda batch: jobs.append(list(batch)) or original(batch)
    pairs = [Pair(W, gold, pred) for _, gold, pred, _, _ in CASES]
    verdicts = judge.judge_batch(pairs)
    by_name = {name: v for (name, *_), v in zip(CASES, verdicts)}
    assert [v.ex for v in verdicts] == [ex for *_, ex, _ in CASES]
    assert by_name["timeout"].error == "timeout" and by_name["syntax error"].error == "syntax"
    assert by_name["refused write"].error == "refused" and by_name["missing prediction"].error == "missing"
    same = by_name["both over the cap, the gold's text"]
    assert same.same_text and same.truncated and same.pred is same.gold
    assert by_name["wrong rows"].ran and not by_name["wrong rows"].truncated
    # every distinct query once: the golds and the predictions, less the missing one and the gold's own text
    distinct = {(W, g) for _, g, _, _, _ in CASES} | {(W, p) for _, g, p, _, _ in CASES if p and p != g + " ;"}
    assert len(jobs) == 1 and sorted(jobs[0]) == sorted(distinct)
    again = judge.judge(W, GOLD, RENAMED)
    assert again.gold_cached and again.ex == 1 and jobs[1] == [(W, RENAMED)]


def test_a_result_the_caller_already_has_is_not_run_again():
    judge = Judge(JudgeLimits(timeout=T))
    jobs = []
    original = judge.run_queries
    judge.run_queries = lambda batch: jobs.append(list(batch)) or original(batch)
    wrong = execute(W, "MATCH (p:Province) RETURN p.name AS name")
    columns, rows = _gold_result(GOLD)
    # the caller's result stands: a prediction given the gold's rows scores 1 whatever its text
    v = judge.judge(W, GOLD, "MATCH (p:Province) RETURN p.name AS name", pred_result=execute(W, GOLD))
    assert v.ex == v.ex_relaxed == 1 and jobs == [[(W, GOLD)]] and v.db_ms == v.gold.elapsed_ms
    v = judge.judge(W, GOLD, "MATCH (p:Province) RETURN p.name AS name", gold_columns=columns, gold_rows=rows,
                    pred_result=wrong)
    assert v.ex == 0 and v.pred is wrong and jobs[1:] == [[]]
    # an infrastructure failure is not a result: the prediction runs
    down = QueryResult(error=QueryError("unavailable", "Neo4j at bolt://nowhere is unreachable"))
    v = judge.judge(W, GOLD, RENAMED, gold_columns=columns, gold_rows=rows, pred_result=down)
    assert v.ex == 1 and v.infra_error is None and jobs[2:] == [[(W, RENAMED)]]


def test_psjs_in_the_verdict_and_in_the_batch_agree():
    judge = Judge(JudgeLimits())
    preds = [GOLD, OTHER_NAME, "MATCH (p:Province) RETURN p.name AS name", "MATCH (n RETURN n", None]
    verdicts = judge.judge_batch([Pair(W, GOLD, p) for p in preds], psjs=True)
    batch = Judge(JudgeLimits()).psjs_batch([(W, GOLD, p) for p in preds])
    assert [v.psjs for v in verdicts] == [r.score for r in batch]
    assert verdicts[0].psjs == verdicts[1].psjs == 1.0 and 0 < verdicts[2].psjs < 1
    assert verdicts[3].psjs == verdicts[4].psjs == 0.0 and verdicts[4].psjs_reason == "no prediction"


def test_a_failing_gold_and_an_unreachable_database_are_no_verdict(monkeypatch):
    v = Judge().judge(W, "MATCH (e:Emperor RETURN e", GOLD)
    assert v.ex is None and not v.scored and "syntax" in v.gold_error
    with pytest.raises(GoldQueryError):
        v.raise_for_error()
    monkeypatch.setenv("CYPHERTURN_NEO4J_URI", "bolt://127.0.0.1:1")  # nothing listens there
    monkeypatch.delenv("CYPHERTURN_NEO4J_CONFIG", raising=False)
    down = Judge(JudgeLimits(retries=0))
    v = down.judge(W, GOLD, RENAMED, gold_columns=["name"], gold_rows=[["x"]])
    assert v.ex is None and v.ex_relaxed is None and v.infra_error and "unreachable" in v.infra_error
    with pytest.raises(InfrastructureError):
        v.raise_for_error()
    with pytest.raises(InfrastructureError):
        down.psjs_batch([(W, GOLD, GOLD)])
    assert down.judge(W, GOLD, GOLD, gold_columns=["name"], gold_rows=[["x"]]).ex == 1  # not run at all


def test_rewards_are_picklable_named_callables_configured_by_one_dataclass():
    clone = pickle.loads(pickle.dumps(execution_reward))
    assert clone.__name__ == "execution_reward" and clone.options == execution_reward.options
    assert clone(None, [f"<answer>{RENAMED}</answer>"], gold_cypher=[GOLD], world=[W]) == [1.0]
    configured = make_execution_reward("relaxed", exec_credit=0.1, timeout=3, max_workers=2,
                                       executor_options={"retries": 1}, name="ex_relaxed")
    assert configured.options == ExecutionRewardOptions(
        kind="relaxed", exec_credit=0.1, name="ex_relaxed",
        limits=JudgeLimits(timeout=3, workers=2, retries=1))
    assert pickle.loads(pickle.dumps(configured)).__name__ == "ex_relaxed"
    assert ExecutionRewardOptions.from_kwargs(limits=JudgeLimits(timeout=9)).limits.timeout == 9
    assert ExecutionRewardOptions().limits == JudgeLimits(timeout=5.0)  # the rewards' default: 5 s a query
    assert issubclass(RewardInfrastructureError, InfrastructureError)
    assert isinstance(ExecutionReward(), ExecutionReward) and shared_judge(timeout=T) is shared_judge(timeout=T)
