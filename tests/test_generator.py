"""The world specs and the deterministic generator (no database needed)."""

from __future__ import annotations

import pytest

from graphs.generator import generate
from graphs.spec import SpecError, all_specs, get_spec, parse_spec


def test_at_least_seven_benchmark_and_five_training_worlds():
    bench = {s.world for s in all_specs("benchmark")}
    assert bench == {"ancient_empire", "magic_academy", "ocean_kingdom", "stellar_colony", "arcane_archive",
                     "celestial_court", "merchant_harbor"}
    assert len(all_specs("training")) >= 5


@pytest.mark.parametrize("world", [s.world for s in all_specs()])
def test_same_seed_same_graph_different_seed_different_graph(world):
    spec = get_spec(world)
    a, b = generate(spec), generate(spec)
    assert a.nodes == b.nodes and a.relationships == b.relationships
    assert a.checksum() == b.checksum()
    assert generate(spec, seed=spec.seed + 1).checksum() != a.checksum()


@pytest.mark.parametrize("world", [s.world for s in all_specs()])
def test_world_sizes_keys_and_value_shapes(world):
    spec = get_spec(world)
    graph = generate(spec)
    assert 200 <= graph.node_count <= 5000, graph.node_count
    for node in spec.nodes:
        keys = [row[node.key] for row in graph.nodes[node.label]]
        assert len(keys) == len(set(keys)), f"{node.label}.{node.key} must be unique"
    optional = [p for n in spec.nodes for p in n.properties if p.null_rate > 0]
    assert optional, "every world has optional properties"
    for node in spec.nodes:
        for prop in node.properties:
            present = sum(prop.name in row for row in graph.nodes[node.label])
            if prop.null_rate == 0:
                assert present == len(graph.nodes[node.label])
            elif len(graph.nodes[node.label]) >= 20:
                assert 0 < present < len(graph.nodes[node.label]), f"{node.label}.{prop.name} partly null"


def test_similar_names_are_present():
    graph = generate(get_spec("ancient_empire"))
    names = [row["name"] for row in graph.nodes["General"]]
    # a similar name shares all but its last few characters with another name
    stems = [n[:-2] for n in names]
    assert len(set(stems)) < len(stems)


def test_scale_multiplies_sizes_and_changes_checksum():
    spec = get_spec("ancient_empire")
    small, big = generate(spec), generate(spec, scale=3)
    assert big.node_count == pytest.approx(3 * small.node_count, rel=0.02)
    assert big.relationship_count > 2.5 * small.relationship_count
    assert big.checksum() != small.checksum()
    with pytest.raises(ValueError):
        generate(spec, scale=0)


def test_training_worlds_are_schema_disjoint_from_benchmark_worlds_and_each_other():
    bench = set()
    for s in all_specs("benchmark"):
        bench |= set(s.labels) | set(s.relationship_types)
    seen: set[str] = set()
    for s in all_specs("training"):
        names = set(s.labels) | set(s.relationship_types)
        assert not names & bench, (s.world, names & bench)
        assert not names & seen, (s.world, names & seen)
        seen |= names


@pytest.mark.parametrize("raw, message", [
    ({"world": "Bad-Name"}, "lower-case identifier"),
    ({"world": "w", "title": "W", "split": "dev", "seed": 1, "topology": "t", "nodes": []}, "split"),
    ({"world": "w", "title": "W", "split": "training", "seed": 1, "topology": "t",
      "nodes": [{"label": "A", "count": 3, "key": "name",
                 "properties": [{"name": "name", "type": "string", "values": ["x"]}]}]}, "'key' must name"),
    ({"world": "w", "title": "W", "split": "training", "seed": 1, "topology": "t",
      "nodes": [{"label": "A", "count": 3, "key": "name",
                 "properties": [{"name": "name", "type": "string", "gen": "serial", "pattern": "a{n}"},
                                {"name": "x", "type": "int"}]}]}, "needs 'min' and 'max'"),
    ({"world": "w", "title": "W", "split": "training", "seed": 1, "topology": "t",
      "nodes": [{"label": "A", "count": 3, "key": "name",
                 "properties": [{"name": "name", "type": "string", "gen": "serial", "pattern": "a{n}"}]}],
      "relationships": [{"type": "R", "from": "A", "to": "B", "per_source": [1, 2]}]}, "must be labels"),
])
def test_malformed_specs_are_rejected_with_a_clear_message(raw, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(raw)


def test_unknown_world_is_a_clear_error():
    with pytest.raises(SpecError, match="unknown world 'atlantis'"):
        get_spec("atlantis")
