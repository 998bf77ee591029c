"""The three question kinds added for issue 20: aggregates over a range of years ("how many of those
were founded between 1200 and 1300?"), sorted lists ("... with their strength, highest first") and swaps
("what about the kingdom Vor?"). Their gold Cypher on examples (no database), then a small build on the
real server in which each kind occurs, executes, reproduces its stored rows (in order for a sorted
list), scores +1 on the paper rewards, and a swap's gold is the swapped turn's with only the anchor
changed."""

from __future__ import annotations

import datetime as dt
import re
import sys
from pathlib import Path

import pytest

from benchmark import chain
from benchmark.session import PERSONAS
from benchmark.world_builder import WorldBuilder, session_rng, stored_rows, turn_count
from graphs.executor import SafeExecutor
from graphs.spec import get_spec
from rewards import gold_from_cypher
from scoring.metrics.ex import ex_strict, is_ordered

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from audit_sessions import range_sort_swap_kinds  # noqa: E402


def _reefs():
    return chain.open_anchored("Kingdom", "name", "Vor", "CLAIMS", True, "Reef", "name", "n1")


def test_a_range_of_dates_counts_the_members_from_january_1st_to_january_1st():
    cond = chain.year_range("n1", "Reef", "last_survey", 1200, 1300, dated=True)
    step = chain.aggregate_in_range(_reefs().new_set, cond)
    assert step.cypher.split("\n")[1:] == [
        "WITH DISTINCT n1",
        "WHERE n1.last_survey >= date('1200-01-01') AND n1.last_survey < date('1300-01-01')",
        "RETURN count(n1) AS count"]
    assert step.columns == ("count",) and step.new_set is None  # an aggregate keeps the active set
    assert [kv.to_dict()["value"] for kv in step.key_values] == ["Vor", "1200-01-01", "1300-01-01"]


def test_a_range_of_year_numbers_sums_over_a_filtered_set_with_one_where():
    libraries = chain.open_filtered("Library", "name", "order", "grey", "n2").new_set
    cond = chain.year_range("n2", "Library", "founded_year", 1400, 1500, dated=False)
    step = chain.aggregate_in_range(libraries, cond, "sum", "volumes")
    assert step.cypher == ("MATCH (n2:Library)\n"
                           "WHERE n2.order = 'grey' AND n2.founded_year >= 1400 AND n2.founded_year < 1500\n"
                           "RETURN sum(n2.volumes) AS sum_volumes")
    assert step.columns == ("sum_volumes",) and not chain.column_rule_violations(step.cypher)


def test_a_sorted_expansion_returns_the_sort_property_and_orders_by_it_without_a_limit():
    step = chain.expand_sorted(_reefs().new_set, "SHELTERS", True, "Creature", "name", "n2", "age_years", True)
    assert step.cypher.split("\n")[-2:] == ["RETURN DISTINCT n2.name AS name, n2.age_years AS age_years",
                                            "ORDER BY age_years DESC"]
    assert is_ordered(step.cypher) and step.new_set.label == "Creature"
    asc = chain.expand_sorted(_reefs().new_set, "SHELTERS", True, "Creature", "name", "n2", "age_years", False)
    assert asc.cypher.endswith("ORDER BY age_years ASC")


@pytest.mark.parametrize("step", [
    chain.aggregate_in_range(_reefs().new_set, chain.year_range("n1", "Reef", "last_survey", 1140, 1150, True)),
    chain.aggregate_in_range(_reefs().new_set, chain.year_range("n1", "Reef", "depth", 600, 700, False), "avg",
                             "depth"),
    chain.expand_sorted(_reefs().new_set, "SHELTERS", True, "Creature", "name", "n2", "age_years", False)])
def test_the_rewards_derive_the_builders_key_values_and_triples_from_the_new_golds(step):
    assert gold_from_cypher.gold_triples(step.cypher) == list(step.triples)
    assert gold_from_cypher.gold_key_values(step.cypher) == [kv.to_dict() for kv in step.key_values]


def test_order_counts_for_a_sorted_gold_and_is_stored_as_returned():
    gold = chain.expand_sorted(_reefs().new_set, "SHELTERS", True, "Creature", "name", "n2", "age_years", True).cypher
    rows = [["Ka", 9], ["Lo", 4], ["Mu", 1]]
    assert stored_rows(gold, rows) == rows  # not the canonical order
    assert ex_strict(["name", "age_years"], rows, ["name", "age_years"], rows, ordered=is_ordered(gold)) == 1
    assert ex_strict(["name", "age_years"], rows, ["name", "age_years"], rows[::-1], ordered=is_ordered(gold)) == 0


# -- a small build on the real server --------------------------------------------------------------------------
WORLDS = ("ocean_kingdom", "arcane_archive")


@pytest.fixture(scope="module")
def built():
    """Sessions of two benchmark worlds built as the benchmark builds them (test wording pool)."""
    out = []
    for world in WORLDS:
        b = WorldBuilder(get_spec(world), SafeExecutor(world, timeout=60.0), split="test")
        for i in range(10):
            rng = session_rng(0, "test", world, i)
            s = b.build_session(f"{world}-{i:04d}", PERSONAS[i % len(PERSONAS)], turn_count(rng), rng)
            if s is not None:
                out.append(s)
    return out


_RANGE = re.compile(r"(\w+\.\w+) >= (?:date\('[^']*'\)|-?\d+) AND \1 < (?:date\('[^']*'\)|-?\d+)")


def _kind(sessions, kind):
    return [(s, t) for s in sessions for t in s.turns if kind in range_sort_swap_kinds(s, t)]


@pytest.mark.parametrize("kind, phenomena", [("date_range_aggregate", {"AGG_COUNT", "AGG_SUM", "AGG_AVG"}),
                                             ("sorted_list", {"EXPAND"}), ("swap", {"TOPIC_SHIFT"})])
def test_each_kind_occurs_and_its_gold_reproduces_its_stored_rows(built, kind, phenomena):
    found = _kind(built, kind)
    assert found, kind
    for s, t in found:
        assert t.phenomenon in phenomena, (kind, t.phenomenon)
        r = SafeExecutor(s.world, timeout=60.0).run(t.gold_cypher, max_rows=1000)
        assert r.error is None and r.rows and list(r.columns) == t.gold_columns
        assert stored_rows(t.gold_cypher, r.rows) == t.gold_rows, t.gold_cypher
        if kind == "sorted_list":  # stored in the query's order, a total order (no ties)
            values = [row[1] for row in t.gold_rows]
            assert len(set(map(str, values))) == len(values)
            desc = t.gold_cypher.endswith("DESC")
            assert values == sorted(values, reverse=desc)
        if kind == "date_range_aggregate":  # the range holds some members of the set but not all
            body, ret = t.gold_cypher.rsplit("\n", 1)
            var = re.search(r"\((\w+)[.)]", ret).group(1)
            ex = SafeExecutor(s.world, timeout=60.0)
            inside = ex.run(f"{body}\nRETURN count({var}) AS c").rows[0][0]
            whole = ex.run(f"{_RANGE.sub('true', body)}\nRETURN count({var}) AS c").rows[0][0]
            assert 0 < inside < whole, t.gold_cypher


def test_a_swap_changes_only_the_anchor_and_gives_another_result(built):
    found = _kind(built, "swap")
    assert found
    for s, t in found:
        before = s.turns[t.index - 1]
        assert t.depends_on is None and before.phenomenon in ("OPENING", "TOPIC_SHIFT")
        old = next(kv for kv in before.gold_key_values)
        new = next(kv for kv in t.gold_key_values)
        assert (old["label"], old["property"]) == (new["label"], new["property"]) and old["value"] != new["value"]
        assert t.gold_cypher == before.gold_cypher.replace(chain.literal(old["value"]), chain.literal(new["value"]))
        assert t.gold_rows and t.gold_rows != before.gold_rows
        assert new["value"] in t.utterance  # the user names the other entity, not the whole question


def test_the_paper_rewards_score_the_oracle_response_plus_one_on_the_new_kinds(built):
    from rewards.paper import answer_reward, format_reward, key_value_reward, triple_reward
    from training.data import paper_response

    turns = [t for kind in ("date_range_aggregate", "sorted_list", "swap") for _, t in _kind(built, kind)]
    completions = [[{"role": "assistant", "content": paper_response(t)}] for t in turns]
    kwargs = {"gold_cypher": [t.gold_cypher for t in turns], "gold_key_values": [t.gold_key_values for t in turns],
              "gold_triples": [t.gold_triples for t in turns]}
    for reward in (format_reward, answer_reward, key_value_reward, triple_reward):
        assert reward([None] * len(turns), completions, **kwargs) == [1.0] * len(turns), reward.__name__
