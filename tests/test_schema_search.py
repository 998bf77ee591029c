"""Schema introspection from the database and the SEARCH_VALUES cascade."""

from __future__ import annotations

import pytest

from graphs.generator import generate
from graphs.schema import introspect
from graphs.search import GraphMatch, SearchError, closeness, search_graph, search_values
from graphs.spec import all_specs, get_spec

pytestmark = pytest.mark.neo4j

_TYPE = {"string": "STRING", "int": "INTEGER", "float": "FLOAT", "bool": "BOOLEAN", "date": "DATE"}


@pytest.mark.parametrize("world", [s.world for s in all_specs()])
def test_introspected_schema_matches_the_spec(world):
    spec = get_spec(world)
    schema = introspect(world)
    assert set(schema.nodes) == set(spec.labels)
    for node in spec.nodes:
        got = {p.name: (p.type, p.optional) for p in schema.nodes[node.label]}
        want = {p.name: (_TYPE[p.type], p.null_rate > 0) for p in node.properties}
        assert got == want, node.label
    want_rels = {(r.type, r.source, r.target) for r in spec.relationships}
    assert {(r.type, r.source, r.target) for r in schema.relationships} == want_rels
    for r in schema.relationships:
        declared = next(x for x in spec.relationships if (x.type, x.source, x.target) == (r.type, r.source, r.target))
        assert {p.name for p in r.properties} >= {p.name for p in declared.properties}
    text = schema.to_text()
    assert all(f"(:{label} " in text for label in spec.labels)
    assert schema.terms() >= set(spec.labels) | set(spec.relationship_types)


def test_search_cascade_contains_then_prefix_then_words():
    graph = generate(get_spec("ancient_empire"))
    name = sorted(row["name"] for row in graph.nodes["Emperor"])[0]
    first, *rest = name.split(" ")
    hit = search_values("ancient_empire", "Emperor", "name", name.upper())
    assert hit.stage == "contains" and name in hit.values
    misspelled = name[:-1] + ("q" if name[-1] != "q" else "z")
    hit = search_values("ancient_empire", "Emperor", "name", misspelled)
    assert hit.stage in ("contains", "prefix") and name in hit.values
    if rest:
        hit = search_values("ancient_empire", "Emperor", "name", f"zzzq {rest[-1]}")
        assert hit.stage == "words" and name in hit.values
    hit = search_values("ancient_empire", "Emperor", "name", "qqqqxxxx")
    assert hit.values == [] and hit.stage is None
    many = search_values("ancient_empire", "City", "name", "a")
    assert len(many.values) == 10 and many.values == sorted(many.values)


def test_search_rejects_unknown_labels_properties_and_empty_queries():
    with pytest.raises(SearchError, match="unknown label 'Emperorr'"):
        search_values("ancient_empire", "Emperorr", "name", "x")
    with pytest.raises(SearchError, match="unknown property 'nam'"):
        search_values("ancient_empire", "Emperor", "nam", "x")
    with pytest.raises(SearchError, match="non-empty"):
        search_values("ancient_empire", "Emperor", "name", "  ")


def test_search_treats_the_query_as_data_not_cypher():
    hit = search_values("ancient_empire", "Emperor", "name", "') DETACH DELETE n //")
    assert hit.values == []
    assert introspect("ancient_empire", refresh=True).nodes  # still there


def test_graph_search_finds_a_misspelt_name_with_its_label_and_property_closest_first():
    graph = generate(get_spec("ancient_empire"))
    name = sorted(row["name"] for row in graph.nodes["Emperor"])[0]
    misspelt = name[:2] + name[3] + name[2] + name[4:]  # two letters swapped: neither contains the other
    hits = search_graph("ancient_empire", misspelt)
    assert hits[0] == GraphMatch("Emperor", "name", name) or \
        closeness(misspelt.lower(), hits[0].value) >= closeness(misspelt.lower(), name)
    assert GraphMatch("Emperor", "name", name) in hits and len(hits) <= 10
    exact = search_graph("ancient_empire", name.upper(), limit=3)
    assert exact[0] == GraphMatch("Emperor", "name", name) and len(exact) <= 3
    scores = [closeness(name.lower(), m.value) for m in search_graph("ancient_empire", name)]
    assert scores == sorted(scores, reverse=True) and scores[0] == 3.0


def test_graph_search_shows_a_pattern_an_answer_can_copy_and_keeps_the_query_as_data():
    assert GraphMatch("Emperor", "name", "O'Brien").pattern() == "(:Emperor {name: 'O\\'Brien'})"
    assert search_graph("ancient_empire", "qqqqxxxxzzzz") == []
    # a one-letter stored value is not "contained" in a query that merely has that letter in it
    assert closeness("vashemo", "a") < 0.6
    before = introspect("ancient_empire", refresh=True).nodes
    search_graph("ancient_empire", "') DETACH DELETE n //")  # read as text to rank, never as Cypher
    assert introspect("ancient_empire", refresh=True).nodes == before
    with pytest.raises(SearchError, match="non-empty"):
        search_graph("ancient_empire", " ")
    with pytest.raises(SearchError, match="over 200"):
        search_graph("ancient_empire", "x" * 201)
