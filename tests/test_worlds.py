"""Every world is loaded in the real Neo4j with the generator's checksum; loading is idempotent and
follows the seed; the CLI status reports it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from graphs import connections
from graphs.generator import generate
from graphs.loader import load_world, read_summary
from graphs.spec import all_specs, get_spec

pytestmark = pytest.mark.neo4j


def _cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "graphs", *args], capture_output=True, text=True, timeout=timeout)


def test_status_json_shows_every_world_loaded_with_generator_counts_and_checksums():
    out = _cli("status", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    status = json.loads(out.stdout)
    by_world = {w["world"]: w for w in status["worlds"]}
    assert set(by_world) == {s.world for s in all_specs()}
    for spec in all_specs():
        graph = generate(spec)
        entry = by_world[spec.world]
        assert entry["loaded"] is True, entry
        assert entry["uri"].startswith("bolt://127.0.0.1:")
        assert entry["nodes"] == graph.node_count
        assert entry["relationships"] == graph.relationship_count
        assert entry["checksum"] == graph.checksum()


def test_load_is_skipped_when_the_checksum_matches():
    out = _cli("load", "--worlds", "ancient_empire", "--quiet")
    assert out.returncode == 0, out.stderr
    assert "unchanged (checksum matches)" in out.stdout


def test_loading_another_seed_changes_the_database_checksum_and_the_default_seed_restores_it():
    spec = get_spec(all_specs("training")[0].world)
    target = connections.resolve(spec.world)
    default = read_summary(target).checksum
    try:
        report = load_world(spec, seed=spec.seed + 7)
        assert not report.skipped
        other = read_summary(target).checksum
        assert other == generate(spec, seed=spec.seed + 7).checksum() != default
        status = json.loads(_cli("status", "--json", "--worlds", spec.world).stdout)["worlds"][0]
        assert status["loaded"] is False and status["checksum"] == other
    finally:
        load_world(spec)
    assert read_summary(target).checksum == default == generate(spec).checksum()


def test_a_scaled_world_loads_with_proportional_size():
    spec = get_spec(all_specs("training")[0].world)
    target = connections.resolve(spec.world)
    try:
        report = load_world(spec, scale=2.0)
        summary = read_summary(target)
        assert summary.nodes == report.nodes == generate(spec, scale=2.0).node_count
        assert summary.nodes > 1.9 * generate(spec).node_count
    finally:
        load_world(spec)


def test_a_spec_is_parsed_once_and_again_when_its_file_changes(tmp_path):
    from graphs.spec import load_spec_file, spec_dir

    src = spec_dir() / "ancient_empire.yaml"
    copy = tmp_path / "ancient_empire.yaml"
    copy.write_text(src.read_text(encoding="utf-8"), encoding="utf-8")
    first = load_spec_file(copy)
    assert load_spec_file(copy) is first  # cached: executors and environments ask for it often
    copy.write_text(src.read_text(encoding="utf-8").replace(first.title, first.title + " II", 1), encoding="utf-8")
    changed = load_spec_file(copy)
    assert changed is not first and changed.title == first.title + " II"


def test_search_cli_searches_one_property_or_the_whole_graph():
    one = _cli("search", "hospital", "Ward", "ward_type", "gen", "--json")
    assert one.returncode == 0, one.stderr
    assert json.loads(one.stdout) == {"values": ["general"], "stage": "contains"}
    everywhere = _cli("search", "hospital", "Geneeral")
    assert everywhere.returncode == 0 and everywhere.stdout.splitlines()[0] == "(:Ward {ward_type: 'general'})"
    wrong = _cli("search", "hospital", "Ward", "Geneeral")
    assert wrong.returncode == 2 and "TEXT alone" in wrong.stderr
