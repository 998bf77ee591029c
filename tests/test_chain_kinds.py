"""The gold Cypher of the question kinds added for issue 11, built without a database: an expansion
leaves its relationship anonymous until a turn asks about the relationship's own properties, a set
remembers the label it was reached from, date cuts compare with January 1st of a year, a per-member
count keeps the members without a neighbour (OPTIONAL MATCH), and a list may carry one more column."""

from __future__ import annotations

import datetime as dt

import pytest

from benchmark import chain
from benchmark.builder import is_year


def _reefs():
    return chain.open_anchored("Kingdom", "name", "Vor", "CLAIMS", True, "Reef", "name", "n1")


def test_expansion_leaves_the_relationship_anonymous_until_its_property_is_asked():
    step = chain.expand(_reefs().new_set, "SHELTERS", True, "Creature", "name", "n2")
    assert "MATCH (n1)-[:SHELTERS]->(n2:Creature)" in step.cypher and "e_n2" not in step.cypher
    agg = chain.aggregate_edges(step.new_set, "avg", "population")
    assert "MATCH (n1)-[e_n2:SHELTERS]->(n2:Creature)" in agg.cypher
    assert agg.cypher.endswith("RETURN avg(e_n2.population) AS avg_population")
    assert agg.cypher.count("e_n2") == 2
    filtered = chain.narrow(step.new_set, "name", [chain.equals("n2", "Creature", "tamed", True)])
    assert filtered.new_set.edge is None  # a filtered set is no longer one relationship per row
    with pytest.raises(ValueError):
        chain.aggregate_edges(filtered.new_set, "avg", "population")


def test_a_set_remembers_the_label_it_was_reached_from():
    reefs = _reefs().new_set
    assert reefs.origin == "Kingdom"
    creatures = chain.expand(reefs, "SHELTERS", True, "Creature", "name", "n2").new_set
    assert creatures.origin == "Reef"
    narrowed = chain.narrow(creatures, "name", [chain.equals("n2", "Creature", "species", "eel")]).new_set
    assert narrowed.origin == "Reef"
    assert chain.contrast(narrowed, "name").new_set.origin == "Reef"
    assert chain.top_k(creatures, "name", "age_years", True, 3).new_set.origin == "Reef"
    assert chain.open_filtered("Reef", "name", "zone", "sunlit", "n9").new_set.origin is None


def test_date_cut_by_year():
    before = chain.before_year("n1", "Kingdom", "founded", 500, True)
    assert before.text == "n1.founded < date('0500-01-01')"
    assert before.key_values[0].to_dict() == {"label": "Kingdom", "property": "founded", "value": "0500-01-01"}
    later = chain.before_year("n1", "Kingdom", "founded", 1200, False)
    assert later.text == "n1.founded >= date('1200-01-01')"
    assert later.key_values[0].value == dt.date(1200, 1, 1)


def test_per_member_count_keeps_members_without_a_neighbour():
    step = chain.count_neighbours(_reefs().new_set, "name", "YIELDS", True, "Pearl", "n2")
    lines = step.cypher.split("\n")
    assert lines[-2] == "OPTIONAL MATCH (n1)-[:YIELDS]->(n2:Pearl)"
    assert lines[-1] == "RETURN n1.name AS name, count(DISTINCT n2) AS count"
    assert step.columns == ("name", "count") and step.new_set is None
    assert "(:Reef)-[:YIELDS]->(:Pearl)" in step.triples
    assert chain.column_rule_violations(step.cypher) == []


def test_a_list_with_one_more_column():
    step = chain.expand(_reefs().new_set, "COMMANDS", False, "Kingdom", "name", "n2", extra=("government",))
    assert step.cypher.endswith("RETURN DISTINCT n2.name AS name, n2.government AS government")
    assert step.columns == ("name", "government")
    assert chain.column_rule_violations(step.cypher) == []


@pytest.mark.parametrize("prop, year", [("founded_year", True), ("since_year", True), ("year", True),
                                         ("age_years", False), ("tonnes_per_year", False),
                                         ("commits_last_year", False), ("experience_years", False)])
def test_only_calendar_years_are_said_exactly(prop, year):
    assert is_year(prop) is year
