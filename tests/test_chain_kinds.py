"""The gold Cypher of the question kinds added for issue 11, built without a database: an expansion
leaves its relationship anonymous until a turn asks about the relationship's own properties, a set
remembers the label it was reached from, date cuts compare with January 1st of a year, a per-member
count keeps the members without a neighbour (OPTIONAL MATCH), and a list may carry one more column."""

from __future__ import annotations

import datetime as dt

import pytest

from benchmark import chain
from benchmark.world_builder import is_year


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


def test_filters_are_joined_and_distinct_only_where_a_node_may_repeat():
    """The minimal gold: a filter on a set that already binds each node once joins its WHERE with AND
    (never ``WHERE a WITH DISTINCT x WHERE b``); WITH DISTINCT comes only after a traversal."""
    opening = chain.open_filtered("Reef", "name", "zone", "sunlit", "n1").new_set
    assert opening.distinct_rows
    deep = chain.narrow(opening, "name", [chain.compare("n1", "Reef", "depth", True, 50)])
    assert deep.cypher == ("MATCH (n1:Reef)\nWHERE n1.zone = 'sunlit' AND n1.depth > 50\n"
                           "RETURN DISTINCT n1.name AS name")
    other = chain.contrast(deep.new_set, "name")
    assert other.cypher == ("MATCH (n1:Reef)\nWHERE n1.zone = 'sunlit' AND NOT coalesce(n1.depth > 50, false)\n"
                            "RETURN DISTINCT n1.name AS name")
    assert chain.count(deep.new_set).cypher.split("\n")[-2:] == [
        "WHERE n1.zone = 'sunlit' AND n1.depth > 50", "RETURN count(n1) AS count"]
    # after a traversal a node may come once per path: one WITH DISTINCT, then the filters joined
    creatures = chain.expand(_reefs().new_set, "SHELTERS", True, "Creature", "name", "n2").new_set
    assert not creatures.distinct_rows
    old = chain.narrow(creatures, "name", [chain.compare("n2", "Creature", "age_years", True, 100)]).new_set
    tame = chain.narrow(old, "name", [chain.equals("n2", "Creature", "tamed", True)])
    assert tame.cypher.count("WITH DISTINCT n2") == 1
    assert "WITH DISTINCT n2\nWHERE n2.age_years > 100 AND n2.tamed = true\n" in tame.cypher
    # a ranked cut binds each node once; a filter after it needs a WITH but no DISTINCT
    top = chain.top_k(opening, "name", "depth", True, 3).new_set
    assert top.clauses[-2:] == ("WHERE n1.zone = 'sunlit' AND n1.depth IS NOT NULL",
                                "WITH n1 ORDER BY n1.depth DESC LIMIT 3")
    after = chain.narrow(top, "name", [chain.equals("n1", "Reef", "protected", True)])
    assert "LIMIT 3\nWITH n1\nWHERE n1.protected = true\n" in after.cypher
    pivot = chain.pivot(creatures, "age_years", True, "RIDES", False, "Fleet", "name", "n3")
    assert "WITH DISTINCT n2\nWHERE n2.age_years IS NOT NULL\nWITH n2 ORDER BY n2.age_years DESC LIMIT 1\n" in pivot.cypher
    for step in (deep, other, tame, pivot, chain.count(top)):
        lines = step.cypher.split("\n")
        assert not any(a.startswith("WHERE") and b.startswith("WITH DISTINCT") for a, b in zip(lines, lines[1:]))


def test_a_ranking_drops_nulls_only_where_its_filter_does_not_already():
    """``ORDER BY x.p DESC`` would put a null first, so a ranking keeps ``x.p IS NOT NULL`` unless the
    set's own filter compares ``p`` (``x.p > 0.5`` holds for no null); a negated comparison does not
    count (``NOT coalesce(x.p > 0.5, false)`` holds for a null)."""
    opening = chain.open_filtered("Reef", "name", "zone", "sunlit", "n1").new_set
    deep = chain.narrow(opening, "name", [chain.compare("n1", "Reef", "depth", True, 50)]).new_set
    top = chain.top_k(deep, "name", "depth", True, 2)
    assert "WHERE n1.zone = 'sunlit' AND n1.depth > 50\nWITH n1 ORDER BY n1.depth DESC LIMIT 2\n" in top.cypher
    assert "IS NOT NULL" not in top.cypher
    other = chain.contrast(deep, "name").new_set
    pivot = chain.pivot(other, "depth", False, "CLAIMS", False, "Kingdom", "name", "n2")
    assert "AND NOT coalesce(n1.depth > 50, false) AND n1.depth IS NOT NULL\nWITH n1 ORDER BY" in pivot.cypher
    by_size = chain.top_k(deep, "name", "size", False, 3)
    assert "AND n1.depth > 50 AND n1.size IS NOT NULL\nWITH n1 ORDER BY n1.size ASC LIMIT 3" in by_size.cypher


def test_count_like_properties_read_as_a_number_of_in_aggregates():
    """"the highest years of training" is not English: a whole-number property whose head noun is a
    plural ("years" of "years of training", "vessels") is said "number of ..."; a singular head is not
    ("year of death"), nor a phrase that already says it ("number of seals")."""
    from benchmark.world_builder import WorldBuilder
    from graphs.spec import get_spec

    archive = WorldBuilder(get_spec("arcane_archive"), executor=None)
    assert archive.agg_prop("TRAINED_AT", "years") == "number of years of training"
    assert archive.agg_prop("Author", "died_year") == "year of death"
    court = WorldBuilder(get_spec("celestial_court"), executor=None)
    assert court.agg_prop("PROCLAIMED", "seal_count") == "number of seals"
