"""Trivial turns and clarifications that contradict their wording (issue 20).

The audit's checks flag each defect on hand-made turns and pass its clean counterpart; the wordings
say "the big ones" only in the size family and never "above the cutoff"; the builder picks the
ambiguous family from the world spec's ``size`` / ``top_is_low`` flags; and a small real build (on the
Neo4j server) has none of the defects."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from pathlib import Path

import pytest

from benchmark import templates
from benchmark.build import build
from benchmark.session import Session, Turn
from benchmark.world_builder import MIN_AGGREGATED, MIN_COUNTED, WorldBuilder
from graphs.generator import generate
from graphs.spec import SpecError, get_spec, parse_spec

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("audit_sessions", ROOT / "scripts" / "audit_sessions.py")
audit_sessions = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(audit_sessions)

TRIVIAL = ("count_after_one_item_list", "count_over_small_set", "aggregate_over_one_row", "aggregate_over_small_set",
           "recurse_on_recurse", "big_small_on_non_size", "cutoff_without_earlier_cutoff", "rank_direction")
MODES = {"OPENING": "none", "EXPAND": "expand", "RECURSE": "expand", "PIVOT": "pivot", "AGG_COUNT": "aggregate",
         "AGG_AVG": "agg_numeric", "AGG_MAX": "agg_numeric", "THRESHOLD": "value_narrow", "FILTER": "narrow"}


def _turn(index, utterance, cypher, columns, rows, phenomenon, depends_on, ambiguity=None):
    return Turn(index=index, utterance=utterance, gold_cypher=cypher, gold_columns=list(columns), gold_rows=rows,
                phenomenon=phenomenon, chain_mode=MODES[phenomenon], depends_on=depends_on, ambiguity_info=ambiguity)


def _counts(world, turns):
    report = audit_sessions.audit([Session(id=f"{world}-0001", world=world, persona="student", turns=turns)])
    return {k: report["checks"].get(k, {"count": 0})["count"] for k in TRIVIAL}


# --------------------------------------------------------------------------------------------------
# the audit's checks on hand-made turns

OFFICIALS = "MATCH (a_n1:Ministry {name: 'Rites'})<-[:WORKS_IN]-(n1:Official)"


def _officials(n):
    return _turn(0, "Which officials work in the ministry Rites?", OFFICIALS + "\nRETURN DISTINCT n1.name AS name",
                 ["name"], [[f"O{i}"] for i in range(n)], "OPENING", None)


def test_count_and_aggregate_over_a_tiny_set_are_flagged():
    count = "MATCH (n1:Official)\nRETURN count(n1) AS count"
    avg = OFFICIALS + "\nWITH DISTINCT n1\nRETURN avg(n1.stipend) AS avg_stipend"
    bad = _counts("celestial_court", [_officials(1), _turn(1, "How many officials? Just the number.", count,
                                                           ["count"], [[1]], "AGG_COUNT", 0),
                                      _turn(2, "Their average stipend?", avg, ["avg_stipend"], [[40.0]], "AGG_AVG", 0)])
    assert bad["count_after_one_item_list"] == bad["count_over_small_set"] == 1
    assert bad["aggregate_over_one_row"] == bad["aggregate_over_small_set"] == 1
    two = _counts("celestial_court", [_officials(2), _turn(1, "Their average stipend?", avg, ["avg_stipend"],
                                                           [[40.0]], "AGG_AVG", 0)])
    assert two["aggregate_over_one_row"] == 0 and two["aggregate_over_small_set"] == 1
    n = max(MIN_COUNTED, MIN_AGGREGATED)
    ok = _counts("celestial_court", [_officials(n), _turn(1, "How many officials?", count, ["count"], [[n]],
                                                          "AGG_COUNT", 0),
                                     _turn(2, "Their average stipend?", avg, ["avg_stipend"], [[40.0]], "AGG_AVG", 0)])
    assert not any(ok.values()), ok


def test_a_grouped_count_with_one_group_is_flagged():
    grouped = OFFICIALS + "\nWITH DISTINCT n1\nRETURN n1.grade AS grade, count(n1) AS count"
    one = _counts("celestial_court", [_officials(4), _turn(1, "How many per grade?", grouped, ["grade", "count"],
                                                           [["jade", 4]], "AGG_COUNT", 0)])
    assert one["count_over_small_set"] == 1
    two = _counts("celestial_court", [_officials(4), _turn(1, "How many per grade?", grouped, ["grade", "count"],
                                                           [["jade", 3], ["gold", 1]], "AGG_COUNT", 0)])
    assert two["count_over_small_set"] == 0


def test_recursion_over_a_recursion_along_the_same_relationship_is_flagged():
    down = OFFICIALS + "\nWITH DISTINCT n1\nMATCH (n1)<-[:SERVES_UNDER*1..]-(n2:Official)"
    again = down + "\nWITH DISTINCT n2\nMATCH (n2)<-[:SERVES_UNDER*1..]-(n3:Official)"
    turns = [_officials(3),
             _turn(1, "Every official under those, at any depth?", down + "\nRETURN DISTINCT n2.name AS name",
                   ["name"], [["A"], ["B"], ["C"]], "RECURSE", 0),
             _turn(2, "And every official under those, at any depth?", again + "\nRETURN DISTINCT n3.name AS name",
                   ["name"], [["C"]], "RECURSE", 1)]
    assert _counts("celestial_court", turns)["recurse_on_recurse"] == 1
    assert _counts("celestial_court", turns[:2])["recurse_on_recurse"] == 0


def _threshold(utterance, prop, op, value, clar):
    return {"utterance": utterance, "clarification": f"I mean the ones with {clar} {op} {value}."}


def test_big_small_only_on_a_size_and_no_cutoff_out_of_nowhere():
    stores = "MATCH (a_n1:Trader {name: 'Vell'})-[:OWNS]->(n1:Storehouse)"
    year = stores + "\nWHERE n1.opened_year < 1409\nRETURN DISTINCT n1.name AS name"
    cap = stores + "\nWHERE n1.capacity_tonnes > 500\nRETURN DISTINCT n1.name AS name"
    opening = _turn(0, "Which storehouses does the trader Vell own?", stores + "\nRETURN DISTINCT n1.name AS name",
                    ["name"], [["S1"], ["S2"], ["S3"]], "OPENING", None)
    small = _turn(1, "Only the storehouses with opening year less than 1409.", year, ["name"], [["S1"]], "THRESHOLD",
                  0, _threshold("Drop everything but the small storehouses.", "opened_year", "less than", 1409,
                                "opening year"))
    assert _counts("merchant_harbor", [opening, small])["big_small_on_non_size"] == 1
    big = _turn(1, "Only the storehouses with capacity in tonnes more than 500.", cap, ["name"], [["S2"]], "THRESHOLD",
                0, _threshold("Only keep the big ones among those storehouses.", "capacity_tonnes", "more than", 500,
                              "capacity in tonnes"))
    assert _counts("merchant_harbor", [opening, big])["big_small_on_non_size"] == 0
    remark = "I know that might seem like a small detail, but it matters quite a bit for what I'm trying to piece " \
             "together, so I'd appreciate a careful answer."  # a persona's remark, not the question
    avg = _turn(1, "Their average monthly rent?", stores + "\nRETURN avg(n1.rent_per_month) AS avg_rent_per_month",
                ["avg_rent_per_month"], [[80.0]], "AGG_AVG", 0,
                {"utterance": f"What do those storehouses come to on average? {remark}",
                 "clarification": "I meant their average monthly rent."})
    assert _counts("merchant_harbor", [opening, avg])["big_small_on_non_size"] == 0
    cutoff = _turn(1, "Only the storehouses with capacity in tonnes more than 500.", cap, ["name"], [["S2"]],
                   "THRESHOLD", 0, _threshold("Just the storehouses that are above the cutoff, please.",
                                              "capacity_tonnes", "more than", 500, "capacity in tonnes"))
    assert _counts("merchant_harbor", [opening, cutoff])["cutoff_without_earlier_cutoff"] == 1
    earlier = _turn(1, "Only the storehouses with capacity in tonnes more than 200.", cap.replace("500", "200"),
                    ["name"], [["S2"], ["S3"]], "THRESHOLD", 0)
    cutoff2 = dataclasses.replace(cutoff, index=2, depends_on=1)
    assert _counts("merchant_harbor", [opening, earlier, cutoff2])["cutoff_without_earlier_cutoff"] == 0


def test_rank_direction_read_against_its_meaning_is_flagged():
    pivot = (OFFICIALS + "\nWITH DISTINCT n1 WHERE n1.rank IS NOT NULL\nWITH n1 ORDER BY n1.rank ASC LIMIT 1\n"
             "MATCH (n1)-[:PROCLAIMED]->(n2:Edict)\nRETURN DISTINCT n2.title AS title")
    loose = _turn(1, "Take the official with the lowest rank: which edicts did that official proclaim?", pivot,
                  ["title"], [["E1"]], "PIVOT", 0)
    assert _counts("celestial_court", [_officials(3), loose])["rank_direction"] == 1
    exact = _turn(1, "Take the official with the lowest rank number: which edicts did that official proclaim?",
                  pivot, ["title"], [["E1"]], "PIVOT", 0)
    assert _counts("celestial_court", [_officials(3), exact])["rank_direction"] == 0
    left_out = _turn(1, exact.utterance, pivot, ["title"], [["E1"]], "PIVOT", 0,
                     {"utterance": "Take the bottom official of those officials and show me the edicts they "
                                   "proclaimed.", "clarification": "I mean the one with the lowest rank number."})
    assert _counts("celestial_court", [_officials(3), left_out])["rank_direction"] == 1


# --------------------------------------------------------------------------------------------------
# wordings and the world spec

def test_ambiguous_threshold_wordings_say_big_only_of_a_size_and_no_cutoff():
    for family in ("THRESHOLD_AMBIGUOUS", "THRESHOLD_AMBIGUOUS_SIZE"):
        for cores in templates._CORES[family].values():
            for core in cores:
                assert not re.search(r"cutoff|cut-off|limit|threshold\b(?! to)", core), core
                assert ("{big}" in core) == (family == "THRESHOLD_AMBIGUOUS_SIZE"), core
    assert "THRESHOLD_AMBIGUOUS_SIZE" in templates.AMBIGUOUS_FAMILIES
    # no other ambiguous wording calls an entity big or small ("the biggest one" of a year)
    for family in set(templates.AMBIGUOUS_FAMILIES) - {"THRESHOLD_AMBIGUOUS_SIZE"}:
        for cores in templates._CORES[family].values():
            assert not [c for c in cores if audit_sessions._BIG_SMALL.search(c)], family


def test_size_and_top_is_low_flags_follow_the_spec_and_keep_the_graph():
    court = get_spec("celestial_court")
    official = {p.name: p for p in court.node("Official").properties}
    assert official["rank"].top_is_low and not official["rank"].size
    assert {p.name for p in court.node("Province").properties if p.size} == {"population"}
    # the flags are words, not data: the graph (and its checksum) is the one loaded on the server
    plain = dataclasses.replace(court, nodes=tuple(
        dataclasses.replace(n, properties=tuple(dataclasses.replace(p, size=False, top_is_low=False)
                                                for p in n.properties)) for n in court.nodes))
    assert generate(plain).checksum() == generate(court).checksum()
    with pytest.raises(SpecError):
        parse_spec({"world": "w", "title": "W", "split": "training", "seed": 1, "nodes": [
            {"label": "A", "count": 2, "key": "name", "properties": [
                {"name": "name", "type": "string", "gen": "serial", "pattern": "a{n}"},
                {"name": "kind", "type": "string", "values": ["x"], "size": True}]}], "relationships": []})


@pytest.mark.neo4j
def test_the_builder_picks_the_ambiguous_family_from_the_spec():
    from graphs.executor import SafeExecutor
    court = WorldBuilder(get_spec("celestial_court"), SafeExecutor("celestial_court"))
    assert court.ambiguous_family("PIVOT", "Official", "rank") is None
    assert court.ambiguous_family("THRESHOLD", "Official", "rank") is None
    assert court.ambiguous_family("THRESHOLD", "Official", "stipend") == "THRESHOLD_AMBIGUOUS"
    assert court.ambiguous_family("THRESHOLD", "Province", "population") == "THRESHOLD_AMBIGUOUS_SIZE"
    assert court.ambiguous_family("AGG_MAX", "Official", "rank") == "AGG_MAX_AMBIGUOUS"
    assert court.ambiguous_family("FILTER", "Official", "grade") is None


# --------------------------------------------------------------------------------------------------
# a small real build

@pytest.mark.neo4j
def test_a_small_build_has_no_trivial_turn_and_no_contradicting_clarification(tmp_path):
    result = build("test", tmp_path / "b", seed=5, sessions=14, worlds=["celestial_court", "merchant_harbor"],
                   hf=False)
    report = audit_sessions.audit(result.sessions)
    applied = {k: report["checks"].get(k, {"count": 0, "of": 0}) for k in TRIVIAL}
    assert not any(v["count"] for v in applied.values()), (applied, {k: report["examples"].get(k) for k in TRIVIAL})
    assert applied["count_over_small_set"]["of"] + applied["aggregate_over_small_set"]["of"] > 0  # it did look
    assert result.manifest["gate_failures"].get("trivial_aggregate", 0) > 0  # the gate turned some away
