"""The filter variants of issue 20 (either/or, name match, existence subquery, a user's correction): the
chain builders' Cypher and exact golds on examples, and a small build on the real Neo4j where each kind
occurs, executes, and keeps a strict part of the set it filters (a correction: the corrected turn's
query with the corrected value, a strict part of that turn's base)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmark import chain
from rewards import gold_from_cypher

ROOT = Path(__file__).resolve().parent.parent
PROVINCES = chain.open_anchored("Emperor", "name", "Quabro Tasherk", "GOVERNS", True, "Province", "name", "n1").new_set
HEAD = "MATCH (a_n1:Emperor {name: 'Quabro Tasherk'})-[:GOVERNS]->(n1:Province)\nWITH DISTINCT n1\n"


def test_either_or_is_a_value_in_a_list_of_two():
    step = chain.narrow(PROVINCES, "name", [chain.either("n1", "Province", "climate", ("arid", "temperate"))])
    assert step.cypher == HEAD + "WHERE n1.climate IN ['arid', 'temperate']\nRETURN DISTINCT n1.name AS name"
    assert [kv.value for kv in step.key_values] == ["Quabro Tasherk", "arid", "temperate"]
    assert "climate" in step.new_set.filtered_props


def test_name_match_starts_with_or_contains():
    starts = chain.narrow(PROVINCES, "name", [chain.name_match("n1", "Province", "name", "Qu", True)])
    contains = chain.narrow(PROVINCES, "name", [chain.name_match("n1", "Province", "name", "O'Reef", False)])
    assert starts.cypher.endswith("WHERE n1.name STARTS WITH 'Qu'\nRETURN DISTINCT n1.name AS name")
    assert "WHERE n1.name CONTAINS 'O\\'Reef'\n" in contains.cypher  # a quote in the fragment stays a literal
    assert starts.key_values[-1] == chain.KeyValue("Province", "name", "Qu")


def test_existence_subquery_adds_its_relationship_to_the_triples_and_its_complement_keeps_it():
    none = chain.narrow(PROVINCES, "name", [chain.linked("n1", "Province", "GARRISONS", True, "Legion", False)])
    assert none.cypher == HEAD + "WHERE NOT EXISTS { (n1)-[:GARRISONS]->(:Legion) }\nRETURN DISTINCT n1.name AS name"
    assert none.triples == ("(:Emperor)-[:GOVERNS]->(:Province)", "(:Province)-[:GARRISONS]->(:Legion)")
    back = chain.linked("n1", "Province", "GOVERNS", False, "Emperor", True)  # read against the stored direction
    assert back.text == "EXISTS { (n1)<-[:GOVERNS]-(:Emperor) }"
    assert back.triples == ("(:Emperor)-[:GOVERNS]->(:Province)",)
    allied = chain.linked("n1", "Faction", "ALLIED_WITH", True, "Faction", True, symmetric=True)
    assert allied.text == "EXISTS { (n1)-[:ALLIED_WITH]-(:Faction) }"
    rest = chain.contrast(none.new_set, "name")
    assert "WHERE EXISTS { (n1)-[:GARRISONS]->(:Legion) }\n" in rest.cypher  # never null: no coalesce
    assert rest.triples == none.triples


@pytest.mark.parametrize(("test", "complement"), [
    (chain.linked("n1", "Province", "GARRISONS", True, "Legion", True), "NOT EXISTS { (n1)-[:GARRISONS]->(:Legion) }"),
    (chain.exists("n1", "population", True), "n1.population IS NULL"),
    (chain.exists("n1", "population", False), "n1.population IS NOT NULL"),
    (chain.compare("n1", "Province", "population", True, 30000), "NOT coalesce(n1.population > 30000, false)"),
])
def test_a_contrast_negates_a_test_that_is_never_null_as_it_stands_and_keeps_the_nulls_of_a_comparison(
        test, complement):
    rest = chain.contrast(chain.narrow(PROVINCES, "name", [test]).new_set, "name")
    assert rest.cypher == HEAD + f"WHERE {complement}\nRETURN DISTINCT n1.name AS name"


def test_a_contrast_of_several_tests_that_are_never_null_negates_their_conjunction():
    both = chain.narrow(PROVINCES, "name", [chain.exists("n1", "population", True),
                                            chain.linked("n1", "Province", "GARRISONS", True, "Legion", False)])
    rest = chain.contrast(both.new_set, "name")
    assert ("WHERE NOT (n1.population IS NOT NULL AND NOT EXISTS { (n1)-[:GARRISONS]->(:Legion) })\n"
            in rest.cypher)


def test_a_correction_rederives_the_base_not_a_filter_of_the_wrong_result():
    wrong = chain.narrow(PROVINCES, "name", [chain.compare("n1", "Province", "population", True, 30000),
                                             chain.equals("n1", "Province", "climate", "temperate")])
    fixed = chain.correct(wrong.new_set, "name", [chain.compare("n1", "Province", "population", True, 30000),
                                                  chain.equals("n1", "Province", "climate", "arid")])
    assert fixed.cypher == wrong.cypher.replace("'temperate'", "'arid'")
    assert fixed.new_set.parent is PROVINCES  # a later CONTRAST complements within the same base
    assert [kv.value for kv in fixed.key_values] == ["Quabro Tasherk", 30000, "arid"]
    with pytest.raises(chain.ChainError):
        chain.correct(PROVINCES, "name", [])


def test_the_reward_parser_derives_the_builders_exact_golds_for_every_variant():
    conds = [chain.either("n1", "Province", "climate", ("arid", "temperate")),
             chain.name_match("n1", "Province", "name", "Lower", True),
             chain.name_match("n1", "Province", "name", "polis", False),
             chain.linked("n1", "Province", "GARRISONS", True, "Legion", True),
             chain.linked("n1", "Province", "CONTAINS", True, "City", False)]
    for cond in conds:
        step = chain.narrow(PROVINCES, "name", [cond])
        for s in (step, chain.contrast(step.new_set, "name")):
            assert gold_from_cypher.gold_triples(s.cypher) == list(s.triples), s.cypher
            assert gold_from_cypher.gold_key_values(s.cypher) == [kv.to_dict() for kv in s.key_values], s.cypher


def test_the_audit_counts_a_variant_on_the_turn_that_asks_it_and_tells_a_correction_from_a_refinement():
    sys.path.insert(0, str(ROOT / "scripts"))
    from audit_sessions import filter_variant_kinds, question_kinds

    from benchmark.session import Session, Turn

    def turn(i, step, phen, mode, dep):
        return Turn(i, "...", step.cypher, list(step.columns), [], phen, mode, dep,
                    gold_key_values=[kv.to_dict() for kv in step.key_values], gold_triples=list(step.triples))
    opening = chain.open_anchored("Emperor", "name", "Quabro Tasherk", "GOVERNS", True, "Province", "name", "n1")
    arid = chain.narrow(PROVINCES, "name", [chain.equals("n1", "Province", "climate", "arid")])
    either = chain.narrow(PROVINCES, "name", [chain.either("n1", "Province", "climate", ("arid", "cold"))])
    fixed = chain.correct(arid.new_set, "name", [chain.equals("n1", "Province", "climate", "temperate")])
    named = chain.narrow(fixed.new_set, "name", [chain.name_match("n1", "Province", "name", "Lower", True)])
    turns = [turn(0, opening, "OPENING", "none", None), turn(1, arid, "FILTER", "narrow", 0),
             turn(2, fixed, "FILTER", "narrow", 1), turn(3, named, "REFINE", "narrow", 2),
             turn(4, chain.count(named.new_set), "AGG_COUNT", "aggregate", 3),
             turn(5, either, "FILTER", "narrow", 0)]
    session = Session("w-0000", "ancient_empire", "student", turns)
    assert [sorted(filter_variant_kinds(session, t)) for t in turns] == [
        [], [], ["correction"], ["string_match"], [], ["either_or"]]  # the count over "Lower" asks nothing new
    assert "correction" in question_kinds(session, turns[2])
    linked = chain.narrow(PROVINCES, "name", [chain.linked("n1", "Province", "GARRISONS", True, "Legion", True)])
    session.turns.append(turn(6, linked, "FILTER", "narrow", 0))
    assert filter_variant_kinds(session, session.turns[6]) == {"existence_subquery"}


def undirected(triples: list[str]) -> list[str]:
    return [t.replace("]->", "]-") for t in triples]


# -- a small build on the real server ---------------------------------------------------------------
@pytest.fixture(scope="module")
def variant_build(tmp_path_factory):
    from benchmark.build import build

    out = tmp_path_factory.mktemp("filter-kinds")
    result = build("test", out, seed=20260, sessions=16, worlds=["ocean_kingdom", "stellar_colony"], hf=False)
    return result.sessions


@pytest.mark.neo4j
def test_each_variant_occurs_executes_and_keeps_a_strict_part_of_its_set(variant_build):
    sys.path.insert(0, str(ROOT / "scripts"))
    from audit_sessions import FILTER_VARIANT_KINDS, filter_variant_kinds

    from benchmark.chain import literal
    from benchmark.world_builder import canonical_rows
    from graphs.executor import SafeExecutor
    from rewards.paper import answer_reward, format_reward, key_value_reward, triple_reward
    from training.data import paper_response

    seen = {k: 0 for k in FILTER_VARIANT_KINDS}
    mine = []
    for s in variant_build:
        ex = SafeExecutor(s.world, timeout=60)
        for t in s.turns:
            kinds = filter_variant_kinds(s, t)
            if not kinds:
                continue
            mine.append(t)
            r = ex.run(t.gold_cypher, max_rows=1000)
            assert r.error is None and canonical_rows(r.rows) == t.gold_rows, (s.id, t.index)
            dep = s.turns[t.depends_on]
            rows = {row[0] for row in t.gold_rows}
            for kind in kinds:
                seen[kind] += 1
                if kind != "correction":
                    assert t.phenomenon in ("FILTER", "REFINE") and t.chain_mode == "narrow", (s.id, t.index)
                    # (the set it filters may have been listed with one more column: its members are the keys)
                    assert rows and rows < {row[0] for row in dep.gold_rows}, (s.id, t.index)
                    continue
                # the corrected turn's own query with the corrected value: the same base, another condition
                # it takes the corrected turn's label and follows it (past a figure asked about its set at most)
                assert t.phenomenon == dep.phenomenon, (s.id, t.index)
                assert all(x.chain_mode in ("aggregate", "agg_numeric") for x in s.turns[dep.index + 1:t.index])
                old = [kv for kv in dep.gold_key_values if kv not in t.gold_key_values]
                new = [kv for kv in t.gold_key_values if kv not in dep.gold_key_values]
                assert len(old) == len(new) == 1 and old[0]["property"] == new[0]["property"], (s.id, t.index)
                swapped = dep.gold_cypher.replace(f" {literal(old[0]['value'])}", f" {literal(new[0]['value'])}")
                assert swapped == t.gold_cypher, (s.id, t.index)
                base = s.turns[dep.depends_on]
                assert rows and rows < {row[0] for row in base.gold_rows}, (s.id, t.index)
                assert rows != {row[0] for row in dep.gold_rows}, (s.id, t.index)
            # the golds a turn records are what the reward's parser reads off its query (which reads a
            # symmetric type, matched both ways, as undirected; the builder records the stored direction)
            derived = gold_from_cypher.gold_triples(t.gold_cypher)
            assert undirected(derived) == undirected(t.gold_triples), (s.id, t.index)
            assert gold_from_cypher.gold_key_values(t.gold_cypher) == t.gold_key_values, (s.id, t.index)
    assert all(seen.values()), seen
    completions = [[{"role": "assistant", "content": paper_response(t)}] for t in mine]
    kwargs = {"gold_cypher": [t.gold_cypher for t in mine], "gold_key_values": [t.gold_key_values for t in mine],
              "gold_triples": [t.gold_triples for t in mine]}
    for reward in (format_reward, answer_reward, key_value_reward, triple_reward):
        assert reward([None] * len(mine), completions, **kwargs) == [1.0] * len(mine), reward.__name__
