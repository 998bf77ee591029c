"""The execution-backed rewards against the real Neo4j: EX strict / relaxed, partial credit, batching,
the gold cache, failures as model failures and an unreachable database as an error."""

from __future__ import annotations

import time

import pytest

from graphs.executor import execute
from rewards.execution import (RewardInfrastructureError, execution_relaxed_reward, execution_reward,
                               make_execution_reward, make_partial_reward, partial_psjs_reward, partial_reward,
                               row_f1)

pytestmark = pytest.mark.neo4j

WORLD = "ancient_empire"
GOLD = "MATCH (e:Emperor)-[:GOVERNS]->(p:Province) RETURN p.name AS name"
ORDERED_GOLD = "MATCH (p:Province) RETURN p.name AS name ORDER BY p.population DESC, name LIMIT 5"
TIMEOUT_QUERY = "MATCH (a), (b), (c) WHERE a.name < b.name AND b.name < c.name RETURN count(*)"

# (completion, strict EX, relaxed EX)
CASES = [
    ("<answer>MATCH (e:Emperor)-[:GOVERNS]->(p:Province) RETURN p.name AS name</answer>", 1.0, 1.0),
    ("<answer>match (x:Emperor)-[:GOVERNS]->(y:Province) return y.name as name;</answer>", 1.0, 1.0),
    ("<answer>MATCH (p:Province)<-[:GOVERNS]-(:Emperor) RETURN p.name AS province</answer>", 0.0, 1.0),
    ("<answer>MATCH (p:Province)<-[:GOVERNS]-(e:Emperor) RETURN p.name AS name, e.name AS emperor</answer>", 0.0, 1.0),
    ("<answer>MATCH (p:Province) RETURN p.name AS name</answer>", 0.0, 0.0),
    ("<answer>MATCH (e:Emperor)-[:GOVERNS]->(p:Province) RETURN DISTINCT p.name AS name LIMIT 2</answer>", 0.0, 0.0),
    ("<answer>MATCH (n) DETACH DELETE n</answer>", 0.0, 0.0),           # refused
    ("<answer>CALL dbms.listConfig() YIELD name RETURN name</answer>", 0.0, 0.0),  # refused
    ("<answer>MATCH (n RETURN n</answer>", 0.0, 0.0),                   # syntax
    ("<answer>RETURN 1/0 AS name</answer>", 0.0, 0.0),                  # runtime
    ("MATCH (e:Emperor)-[:GOVERNS]->(p:Province) RETURN p.name AS name", 0.0, 0.0),  # outside <answer>
    ("", 0.0, 0.0),
]


def kwargs_for(n: int, gold: str = GOLD, world: str = WORLD) -> dict:
    return {"gold_cypher": [gold] * n, "world": [world] * n}


def test_strict_and_relaxed_ex_plain_and_conversational():
    completions = [c for c, _, _ in CASES]
    conversations = [[{"role": "user", "content": "q"}, {"role": "assistant", "content": c}] for c in completions]
    for batch in (completions, conversations):
        assert execution_reward(None, batch, **kwargs_for(len(batch))) == [s for _, s, _ in CASES]
        assert execution_relaxed_reward(None, batch, **kwargs_for(len(batch))) == [r for _, _, r in CASES]


def test_partial_credit_is_row_f1():
    from collections import Counter

    gold = execute(WORLD, GOLD)  # provinces once per governing emperor: duplicates
    everything = execute(WORLD, "MATCH (p:Province) RETURN p.name AS name")
    assert gold.ok and everything.ok
    scores = partial_reward(None, [c for c, _, _ in CASES], **kwargs_for(len(CASES)))
    assert scores[:4] == [1.0, 1.0, 1.0, 1.0]  # renamed / extra columns: aligned by values
    common = sum((Counter(r[0] for r in gold.rows) & Counter(r[0] for r in everything.rows)).values())
    precision, recall = common / len(everything.rows), common / len(gold.rows)
    assert 0 < precision * recall < 1
    assert scores[4] == pytest.approx(2 * precision * recall / (precision + recall))
    assert 0 < scores[5] < 1
    assert scores[6:] == [0.0] * (len(CASES) - 6)


def test_ordered_gold_compares_rows_in_order():
    asc = "<answer>MATCH (p:Province) RETURN p.name AS name ORDER BY p.population ASC, name LIMIT 5</answer>"
    same = "<answer>MATCH (q:Province) RETURN q.name AS name ORDER BY q.population DESC, name LIMIT 5</answer>"
    gold = execute(WORLD, ORDERED_GOLD)
    reversed_rows = "<answer>UNWIND $x AS r RETURN r AS name</answer>"  # parameters unsupported: just fails
    scores = execution_reward(None, [same, asc, reversed_rows], **kwargs_for(3, ORDERED_GOLD))
    assert scores[0] == 1.0 and scores[1] == 0.0 and scores[2] == 0.0
    # the same five rows in another order: EX 0 (ordered gold), partial credit 1 (order ignored)
    values = ", ".join("'" + r[0].replace("'", "\\'") + "'" for r in reversed(gold.rows))
    shuffled = f"<answer>UNWIND [{values}] AS name RETURN name</answer>"
    assert execution_reward(None, [shuffled], **kwargs_for(1, ORDERED_GOLD)) == [0.0]
    assert partial_reward(None, [shuffled], **kwargs_for(1, ORDERED_GOLD)) == [1.0]


def test_exec_credit_and_failure_score():
    fn = make_execution_reward(exec_credit=0.1, failure_score=-1.0)
    completions = [CASES[0][0], CASES[4][0], CASES[6][0], "no answer"]
    assert fn(None, completions, **kwargs_for(4)) == [1.0, 0.1, -1.0, -1.0]


def test_timeout_is_a_model_failure():
    fn = make_execution_reward(timeout=1.0, failure_score=-1.0, exec_credit=0.1)
    t0 = time.perf_counter()
    scores = fn(None, [f"<answer>{TIMEOUT_QUERY}</answer>", CASES[0][0]], **kwargs_for(2))
    assert scores == [-1.0, 1.0]
    assert time.perf_counter() - t0 < 12  # the parallel pass and the timed-out query's one retry alone
    calls = []
    no_retry = make_execution_reward(timeout=1.0, retry_timeouts=False)
    original = no_retry.judge.executor

    def counting(world, **kw):
        calls.append(world)
        return original(world, **kw)

    no_retry.judge.executor = counting
    assert no_retry(None, [f"<answer>{TIMEOUT_QUERY}</answer>", CASES[4][0]], **kwargs_for(2)) == [0.0, 0.0]
    assert len(calls) == 3  # gold + two predictions, no second run


def test_gold_results_given_in_the_dataset_are_used_as_they_are():
    gold = execute(WORLD, GOLD)
    fn = make_execution_reward()
    kw = {**kwargs_for(2), "gold_columns": [gold.columns] * 2, "gold_rows": [gold.rows] * 2}
    assert fn(None, [CASES[0][0], CASES[4][0]], **kw) == [1.0, 0.0]
    assert len(fn.gold_cache) == 0  # never ran the gold
    # a deliberately different stored result wins over the query (a prediction with the gold's very
    # text is the gold, whose result is the stored one: not run, scored 1)
    kw["gold_rows"] = [[["Nowhere"]]] * 2
    assert fn(None, [CASES[1][0], CASES[0][0]], **kw) == [0.0, 1.0]
    # the Hugging Face export's JSON form
    import json

    kw = {**kwargs_for(1), "gold_columns": [gold.columns], "gold_rows_json": [json.dumps(gold.rows)]}
    assert fn(None, [CASES[0][0]], **kw) == [1.0]
    # no gold query at all: the stored result alone (rows compared as a multiset)
    assert fn(None, [CASES[0][0]], world=[WORLD], gold_columns=[gold.columns], gold_rows=[gold.rows]) == [1.0]
    with pytest.raises(ValueError, match="neither a gold result nor a gold query"):
        fn(None, [CASES[0][0]], world=[WORLD], gold_columns=[None], gold_rows=[None])


def test_gold_cache_and_one_run_per_distinct_query():
    fn = make_execution_reward()
    jobs: list[list] = []
    original = fn.judge.run_queries

    def spy(batch):
        jobs.append(list(batch))
        return original(batch)

    fn.judge.run_queries = spy
    batch = [CASES[0][0]] * 5 + [CASES[4][0]] * 3
    assert fn(None, batch, **kwargs_for(8)) == [1.0] * 5 + [0.0] * 3
    assert len(jobs[0]) == 2  # the gold text equals the first prediction: 2 distinct queries in all
    assert len(fn.gold_cache) == 1
    assert fn(None, [CASES[4][0]], **kwargs_for(1)) == [0.0]
    assert jobs[1] == [(WORLD, "MATCH (p:Province) RETURN p.name AS name")]  # the gold came from the cache
    uncached = make_execution_reward(gold_cache_size=0)
    uncached(None, [CASES[4][0]], **kwargs_for(1))
    assert len(uncached.gold_cache) == 0


def test_several_worlds_in_one_batch():
    gold_b = "MATCH (n) RETURN count(n) AS count"
    completions = [CASES[0][0], f"<answer>{gold_b}</answer>", f"<answer>{gold_b}</answer>"]
    kw = {"gold_cypher": [GOLD, gold_b, gold_b], "world": [WORLD, "merchant_harbor", WORLD]}
    assert execution_reward(None, completions, **kw) == [1.0, 1.0, 1.0]
    # the same count query on two worlds gives two different numbers: cross-check one against the other
    kw["gold_cypher"] = [GOLD, gold_b, "MATCH (n:Emperor) RETURN count(n) AS count"]
    assert execution_reward(None, completions, **kw) == [1.0, 1.0, 0.0]


def test_a_failing_gold_scores_none_and_missing_columns_are_errors():
    fn = make_execution_reward()
    assert fn(None, [CASES[0][0], CASES[0][0]], gold_cypher=["MATCH (n RETURN n", GOLD],
              world=[WORLD, WORLD]) == [None, 1.0]
    with pytest.raises(ValueError, match="world"):
        fn(None, [CASES[0][0]], gold_cypher=[GOLD])
    with pytest.raises(ValueError, match="gold_cypher"):
        fn(None, [CASES[0][0]], world=[WORLD])
    with_default = make_execution_reward(world=WORLD)
    assert with_default(None, [CASES[0][0]], gold_cypher=[GOLD]) == [1.0]


def test_parallel_batch_of_64_matches_one_by_one_scoring():
    completions, expected_strict, expected_relaxed = [], [], []
    for i in range(64):
        text, strict, relaxed = CASES[i % len(CASES)]
        if strict == 1.0 or relaxed == 1.0:
            # distinct texts (a trailing comment) so that every completion is its own query
            text = text.replace("</answer>", f" // variant {i}</answer>")
        completions.append(text)
        expected_strict.append(strict)
        expected_relaxed.append(relaxed)
    fn = make_execution_reward(max_workers=16)
    t0 = time.perf_counter()
    scores = fn(None, completions, **kwargs_for(64))
    elapsed = time.perf_counter() - t0
    assert scores == expected_strict
    one_by_one = [fn(None, [c], **kwargs_for(1))[0] for c in completions]
    assert one_by_one == scores
    relaxed = make_execution_reward("relaxed", max_workers=16)(None, completions, **kwargs_for(64))
    assert relaxed == expected_relaxed
    partial = make_partial_reward(max_workers=16)(None, completions, **kwargs_for(64))
    assert all(0.0 <= p <= 1.0 for p in partial) and len(partial) == 64
    assert elapsed < 30


def test_unreachable_database_raises(monkeypatch):
    """An infrastructure failure is not a score: the training step must fail loudly."""
    monkeypatch.setenv("CYPHERTURN_NEO4J_URI", "bolt://127.0.0.1:1")  # nothing listens there
    monkeypatch.delenv("CYPHERTURN_NEO4J_CONFIG", raising=False)
    fn = make_execution_reward(executor_options={"retries": 1, "backoff": 0.05})
    with pytest.raises(RewardInfrastructureError, match="unavailable"):
        fn(None, [CASES[0][0]], **kwargs_for(1))
    # also when the gold result is stored and only the prediction needs the database
    partial = make_partial_reward(executor_options={"retries": 0})
    with pytest.raises(RewardInfrastructureError):
        partial(None, [CASES[0][0], CASES[4][0]], **kwargs_for(2), gold_columns=[["name"]] * 2,
                gold_rows=[[["x"]]] * 2)
    # a completion without a query needs no database and scores as a failure, no error
    assert make_execution_reward(executor_options={"retries": 0})(
        None, ["no answer"], **kwargs_for(1), gold_columns=[["name"]], gold_rows=[[["x"]]]) == [0.0]


def test_row_f1_units():
    cols = ["a", "b"]
    gold = [[1, "x"], [2, "y"], [2, "y"]]
    assert row_f1(cols, gold, cols, gold) == 1.0
    assert row_f1(cols, gold, ["b", "a"], [["x", 1], ["y", 2], ["y", 2]]) == 1.0      # columns by name
    assert row_f1(cols, gold, ["p", "q"], [["x", 1.0], ["y", 2], ["y", 2]]) == 1.0  # by values; 1 == 1.0
    assert row_f1(cols, gold, cols, [[1, "x"]]) == pytest.approx(0.5)               # P 1, R 1/3
    assert row_f1(cols, gold, ["a"], [[1]]) == 0.0                                  # a gold column is missing
    assert row_f1(cols, [], cols, []) == 1.0 and row_f1(cols, gold, cols, []) == 0.0
    assert row_f1(["x"], [[0.1 + 0.2]], ["x"], [[0.3]]) == 1.0                      # float tolerance
    assert row_f1(cols, gold, cols, gold[:1], pred_row_count=1001) < 0.01           # truncated prediction


def test_row_f1_follows_the_judges_rules():
    """Row F1 aligns columns and compares values as EX relaxed does (``align_columns``, ``close``). Each
    case scored otherwise under the reward's former rules (greedy column alignment, names first, floats
    rounded to 12 significant digits): the former score is in the comment."""
    # greedy: gold a took the leftmost predicted column with the most overlap (p), leaving b the wrong one
    assert row_f1(["a", "b"], [[1, 2], [2, 1]], ["p", "q", "r"], [[1, 1, 2], [2, 2, 1]]) == 1.0  # was 0.0
    # names first: a predicted column named like the gold's but holding other values was taken
    assert row_f1(["a"], [[1], [2]], ["a", "b"], [[9, 1], [9, 2]]) == 1.0                       # was 0.0
    # float tolerance: rel 1e-6 and abs 1e-9, not 12 significant digits
    assert row_f1(["x"], [[1.0]], ["x"], [[1.0000001]]) == 1.0                                  # was 0.0
    assert row_f1(["x"], [[1e-20], [2.0]], ["x"], [[2e-20], [2.0]]) == 1.0                      # was 0.5
    assert row_f1(["x"], [[1.0]], ["x"], [[1.001]]) == 0.0                                      # as before
    assert row_f1(["n"], [[1000000]], ["n"], [[1000001]]) == 0.0                                # ints: exact


def test_partial_and_relaxed_rewards_agree():
    """On the real world, the partial reward is 1.0 exactly where the relaxed EX reward is."""
    relaxed = execution_relaxed_reward(None, [c for c, _, _ in CASES], **kwargs_for(len(CASES)))
    partial = partial_reward(None, [c for c, _, _ in CASES], **kwargs_for(len(CASES)))
    assert [p == 1.0 for p in partial] == [r == 1.0 for r in relaxed]
    assert 0.0 < partial[4] < 1.0 and relaxed[4] == 0.0  # all provinces: partial credit, no EX


def test_psjs_partial_credit():
    completions = [CASES[0][0], CASES[2][0], CASES[4][0], CASES[6][0], "no answer"]
    scores = partial_psjs_reward(None, completions, **kwargs_for(len(completions)))
    assert scores[0] == 1.0 and scores[1] == 1.0      # same subgraph, other direction / column name
    assert 0.0 < scores[2] < 1.0                       # all provinces: a larger subgraph
    assert scores[3:] == [0.0, 0.0]                    # refused, no query
    assert len(partial_psjs_reward.gold_cache) >= 1
    from rewards import resolve

    assert resolve("partial_psjs") is partial_psjs_reward


def test_psjs_unreachable_database_raises(monkeypatch):
    monkeypatch.setenv("CYPHERTURN_NEO4J_URI", "bolt://127.0.0.1:1")
    monkeypatch.delenv("CYPHERTURN_NEO4J_CONFIG", raising=False)
    from scoring import judge

    monkeypatch.setattr(judge, "_SHARED", {})  # the shared judges' executors were made for the real server
    with pytest.raises(RewardInfrastructureError):
        make_partial_reward("psjs")(None, [CASES[0][0]], **kwargs_for(1))
