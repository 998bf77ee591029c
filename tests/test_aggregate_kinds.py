"""The aggregate variants of issue 20: comparisons with the user's number ("Are there more than 10 of
those?"), yes/no questions over the members ("Is any of them marked as protected?"), percentages and
per-group sums / means. Their gold Cypher and column names without a database; then, on the real
Neo4j, a small build where every kind occurs and its golds execute, both answers of the yes/no and
comparison kinds, the judge scoring the gold 1 and a wrong answer 0, and the paper rewards scoring the
oracle's tagged response +1."""

from __future__ import annotations

import importlib.util
import random
import re
from pathlib import Path

import pytest

from benchmark import chain
from benchmark.build import build
from benchmark.session import read_sessions
from benchmark.world_builder import GateFailure, WorldBuilder, near_round
from envs.prompts import COLUMN_RULE
from graphs.executor import SafeExecutor
from graphs.spec import get_spec
from rewards import gold_from_cypher
from scoring.judge import shared_judge
from training.data import paper_response

_SPEC = importlib.util.spec_from_file_location(
    "audit_sessions", Path(__file__).resolve().parent.parent / "scripts" / "audit_sessions.py")
audit_sessions = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(audit_sessions)
AGGREGATE_VARIANT_KINDS, aggregate_variant_kinds = audit_sessions.AGGREGATE_VARIANT_KINDS, audit_sessions.aggregate_variant_kinds


def _provinces():
    return chain.open_anchored("Emperor", "name", "Quabro Tasherk", "GOVERNS", True, "Province", "name", "n1").new_set


def test_comparison_golds_name_the_figure_and_the_direction():
    s = _provinces()
    more = chain.compare_figure(s, "count", None, True, 10)
    assert more.cypher.split("\n")[-1] == "RETURN count(n1) > 10 AS count_above"
    assert more.columns == ("count_above",) and more.new_set is None
    assert [kv.property for kv in more.key_values] == ["name"]  # a count's number is no property's value
    avg = chain.compare_figure(s, "avg", "population", False, 12.5)
    assert avg.cypher.split("\n")[-1] == "RETURN avg(n1.population) < 12.5 AS avg_population_below"
    assert avg.key_values[-1] == chain.KeyValue("Province", "population", 12.5)
    for step in (more, avg):
        assert chain.column_rule_violations(step.cypher) == []
        assert gold_from_cypher.gold_key_values(step.cypher) == [kv.to_dict() for kv in step.key_values]
        assert gold_from_cypher.gold_triples(step.cypher) == list(step.triples)


def test_yes_no_and_percentage_golds():
    s = _provinces()
    arid = chain.equals("n1", "Province", "climate", "arid")
    anyone = chain.any_or_all(s, "any", arid, "climate")
    assert anyone.cypher.split("\n")[-1] == "RETURN any(x IN collect(n1) WHERE x.climate = 'arid') AS any_climate"
    everyone = chain.any_or_all(s, "all", chain.exists("n1", "motto", True), "motto")
    assert everyone.cypher.split("\n")[-1] == "RETURN all(x IN collect(n1) WHERE x.motto IS NOT NULL) AS all_motto"
    assert anyone.key_values[-1] == chain.KeyValue("Province", "climate", "arid")
    pct = chain.percentage(s, arid, "climate")
    assert pct.cypher.split("\n")[-1] == ("RETURN 100.0 * count(CASE WHEN n1.climate = 'arid' THEN 1 END) / count(n1) "
                                          "AS pct_climate")
    assert gold_from_cypher.gold_key_values(pct.cypher) == [kv.to_dict() for kv in pct.key_values]
    grouped = chain.aggregate_by(s, "sum", "population", "climate")
    assert grouped.cypher.split("\n")[-1] == "RETURN n1.climate AS climate, sum(n1.population) AS sum_population"
    assert grouped.columns == ("climate", "sum_population")
    for step in (anyone, everyone, pct, grouped):
        assert step.cypher.split("\n")[:2] == s.distinct() and chain.column_rule_violations(step.cypher) == []
    with pytest.raises(chain.ChainError):
        chain.any_or_all(s, "most", arid, "climate")


@pytest.mark.parametrize("ret, bad", [
    ("RETURN count(n) > 3 AS more", "count_above"),
    ("RETURN count(n) < 3 AS count_above", "count_below"),
    ("RETURN avg(n.age) > 40 AS avg_age", "avg_age_above"),
    ("RETURN any(x IN collect(n) WHERE x.protected = true) AS answer", "any_protected"),
    ("RETURN all(x IN collect(n) WHERE x.region = 'north') AS any_region", "all_region"),
    ("RETURN 100.0 * count(CASE WHEN n.arid = true THEN 1 END) / count(n) AS share", "pct_arid"),
])
def test_the_column_rule_names_booleans_and_percentages(ret, bad):
    found = chain.column_rule_violations("MATCH (n:Province)\n" + ret)
    assert len(found) == 1 and bad in found[0]
    assert re.sub(r"AS \w+$", f"AS {bad}", ret) and not chain.column_rule_violations(
        "MATCH (n:Province)\n" + re.sub(r"AS \w+$", f"AS {bad}", ret))
    # the prompt states the names the rule checks
    for name in ("any_protected", "all_climate", "count_above", "avg_age_below", "pct_"):
        assert name in COLUMN_RULE


def test_the_users_number_is_round_and_on_the_drawn_side():
    assert near_round(13, True, True) == 12 and near_round(13, False, True) == 14
    assert near_round(41.37, True, False) == 40 and near_round(41.37, False, False) == 45
    assert near_round(2, True, True) is None  # "more than 1?" is no question a user asks of a count
    assert near_round(0, True, False) is None
    for v in (3, 7, 58, 1234, 0.37, 987654.3):
        for below in (True, False):
            t = near_round(v, below, isinstance(v, int))
            assert t is None or (t < v if below else t > v)


# -- on the real Neo4j ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("agg") / "b"
    build("test", out, seed=20, sessions=28, hf=False)
    return list(read_sessions(out))


def _turns_of(sessions, kind):
    return [(s, t) for s in sessions for t in s.turns if kind in aggregate_variant_kinds(t)]


@pytest.mark.neo4j
def test_every_kind_occurs_in_a_small_build_and_its_gold_executes(built):
    for kind in AGGREGATE_VARIANT_KINDS:
        assert _turns_of(built, kind), kind
    for s, t in (x for kind in AGGREGATE_VARIANT_KINDS for x in _turns_of(built, kind)):
        assert t.phenomenon.startswith("AGG_") and t.depends_on is not None
        r = SafeExecutor(s.world).run(t.gold_cypher)
        assert r.error is None and list(r.columns) == t.gold_columns and not chain.column_rule_violations(t.gold_cypher)
        assert sorted(map(repr, r.rows)) == sorted(map(repr, t.gold_rows))
    report = audit_sessions.audit(built)
    assert report["checks"]["aggregate_label_mismatch"]["count"] == 0
    assert report["checks"]["ungrammatical_aggregate"]["count"] == 0


@pytest.mark.neo4j
def test_the_judge_scores_the_gold_one_and_a_wrong_answer_zero(built):
    judge = shared_judge()
    for kind in AGGREGATE_VARIANT_KINDS:
        s, t = _turns_of(built, kind)[0]
        assert judge.judge(s.world, t.gold_cypher, t.gold_cypher).ex == 1
        # the same answer written another way: strict EX where the column is named by the rule
        ret = t.gold_cypher.rfind("RETURN")
        if kind == "percentage":  # computed in another order: the float tolerance of EX relaxed takes it
            m = re.search(r"100\.0 \* (count\(CASE WHEN .* END\)) / (count\(\w+\)) AS (\w+)", t.gold_cypher)
            other = t.gold_cypher[:ret] + f"RETURN toFloat({m[1]}) / {m[2]} * 100 AS {m[3]}"
            v = judge.judge(s.world, t.gold_cypher, other)
            assert v.ex_relaxed == 1
        if kind in ("comparison", "yes_no"):  # the other answer, and 1 / 0 for true / false
            (value,), = t.gold_rows
            # a constant answer, one row (the gold's set before its RETURN would give one row per member)
            flipped = f"RETURN {str(not value).lower()} AS {t.gold_columns[0]}"
            assert judge.judge(s.world, t.gold_cypher, flipped).ex_relaxed == 0
            same = f"RETURN {str(value).lower()} AS {t.gold_columns[0]}"
            assert judge.judge(s.world, t.gold_cypher, same).ex == 1
            as_int = f"RETURN {int(value)} AS {t.gold_columns[0]}"
            assert judge.judge(s.world, t.gold_cypher, as_int).ex_relaxed == 0  # a number is no yes/no
        wrong = "RETURN 1 AS " + ", 2 AS ".join(t.gold_columns)
        assert judge.judge(s.world, t.gold_cypher, wrong).ex_relaxed == 0


@pytest.mark.neo4j
def test_the_oracles_paper_response_scores_plus_one(built):
    from rewards.paper import answer_reward, format_reward, key_value_reward, triple_reward

    turns = [t for kind in AGGREGATE_VARIANT_KINDS for _, t in _turns_of(built, kind)]
    completions = [[{"role": "assistant", "content": paper_response(t)}] for t in turns]
    kwargs = {"gold_cypher": [t.gold_cypher for t in turns], "gold_key_values": [t.gold_key_values for t in turns],
              "gold_triples": [t.gold_triples for t in turns]}
    for reward in (format_reward, answer_reward, key_value_reward, triple_reward):
        assert reward([None] * len(turns), completions, **kwargs) == [1.0] * len(turns), reward.__name__


@pytest.mark.neo4j
@pytest.mark.parametrize("world", ["ancient_empire", "ocean_kingdom"])
def test_yes_no_and_comparisons_give_both_answers(world):
    """Drawn again and again on real sets, each question form answers yes and no: the answer is drawn
    first and the question made to fit it."""
    wb = WorldBuilder(get_spec(world), SafeExecutor(world, timeout=60.0), split="test")
    answers: dict[str, set] = {"AGG_ANY": set(), "AGG_ALL": set(), "AGG_COUNT_COMPARE": set(),
                               "AGG_FIGURE_COMPARE": set()}
    rng = random.Random(7)
    for i in range(30):
        step, _, _ = wb.make_opening(rng, f"n{i}", None)
        base = step.new_set
        for make in (lambda: wb._yes_no(base, rng, {}), lambda: wb._compare(None, base, rng, {}),
                     lambda: wb._compare("AGG_AVG", base, rng, {})):
            try:
                made = make()
            except GateFailure:
                continue
            if made is None:
                continue
            gold, slots = made[0], made[1]
            r = wb.run(gold.cypher)
            assert r.error is None and isinstance(r.rows[0][0], bool), gold.cypher
            answers[slots["family"]].add(r.rows[0][0])
    assert answers["AGG_COUNT_COMPARE"] == {True, False} and answers["AGG_FIGURE_COMPARE"] == {True, False}
    assert answers["AGG_ANY"] | answers["AGG_ALL"] == {True, False}
    assert answers["AGG_ANY"] and answers["AGG_ALL"]
