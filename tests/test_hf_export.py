"""Hugging Face export: save + load gives back the very same sessions; the card exists and has the counts."""

from __future__ import annotations

import hashlib

import pytest

datasets = pytest.importorskip("datasets")  # noqa: F841 - the export's one dependency

from benchmark.hf import load_hf_sessions, save_hf_dataset  # noqa: E402
from benchmark.session import Session, Turn  # noqa: E402

# the shape benchmark.build writes (the card renders whatever entries it holds)
MANIFEST = {"format_version": 1, "split": "test", "seed": 1234, "sessions": 2, "turns": 3,
            "world_checksums": {"ancient_empire": "c0ffee", "space_fleet": "beef42"},
            "dataset_sha256": "abc123", "gate_failures": {"deterministic": 2, "executes": 5},
            "stats": {"sessions": 2, "turns": 3}}


@pytest.fixture
def sessions() -> list[Session]:
    opening = Turn(
        index=0, utterance="Which emperors ruled Ærûn?", gold_cypher="MATCH (e:Emperor) RETURN e",
        gold_columns=["e", "n"],
        # every kind of value the executor emits: mixed types, null, nested maps and lists, big ints
        gold_rows=[[{"~node": {"labels": ["Emperor"], "properties": {"name": "Quabro", "age": 61}}}, 1.5],
                   ["NaN", None], [[1, "two", [3.0]], 2 ** 62], [True, {"z": 1, "a": 2}]],
        phenomenon="OPENING", chain_mode="none", depends_on=None,
        gold_key_values=[{"label": "Emperor", "property": "name", "value": "Quabro"},
                         {"label": "Emperor", "property": "age", "value": 61},
                         {"label": "Emperor", "property": "titles", "value": ["Rex", "Pius"]}],
        gold_triples=["(:Emperor)-[:GOVERNS]->(:Province)"])
    ambiguous = Turn(
        index=1, utterance="Which provinces do those emperors govern?", gold_cypher="MATCH ...",
        gold_columns=[], gold_rows=[], phenomenon="EXPAND", chain_mode="expand", depends_on=0,
        ambiguity_info={"utterance": "And the places?", "clarification": "The provinces they govern."})
    other = Turn(index=0, utterance="List the fleets.", gold_cypher="MATCH (f:Fleet) RETURN f.name",
                 gold_columns=["f.name"], gold_rows=[["Alpha"]], phenomenon="OPENING", chain_mode="none",
                 depends_on=None)
    return [Session("ancient_empire-0001", "ancient_empire", "journalist", [opening, ambiguous]),
            Session("space_fleet-0001", "space_fleet", "non_native_speaker", [other])]


def _digest(folder) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()


def test_round_trip(sessions, tmp_path):
    out = save_hf_dataset(sessions, tmp_path, manifest=MANIFEST)
    assert out == tmp_path / "hf"
    loaded = load_hf_sessions(tmp_path)
    assert loaded == sessions
    assert [s.to_json() for s in loaded] == [s.to_json() for s in sessions]  # key order too
    assert load_hf_sessions(out) == sessions  # the hf folder itself works as well


def test_typed_columns(sessions, tmp_path):
    ds = datasets.load_from_disk(str(save_hf_dataset(sessions, tmp_path, manifest=MANIFEST)))
    assert len(ds) == 2 and ds.split == "test"
    assert ds.column_names == ["id", "world", "persona", "num_turns", "turns"]
    first = ds[0]["turns"][0]
    assert first["depends_on"] is None and first["gold_columns"] == ["e", "n"]
    assert first["gold_key_values"][1] == {"label": "Emperor", "property": "age", "value_json": "61"}
    assert ds[0]["turns"][1]["ambiguity_info_json"] == (
        '{"utterance":"And the places?","clarification":"The provinces they govern."}')
    assert ds[1]["num_turns"] == 1


def test_card(sessions, tmp_path):
    card = (save_hf_dataset(sessions, tmp_path, manifest=MANIFEST) / "README.md").read_text()
    front, body = card.split("---\n")[1], card.split("---\n", 2)[2]
    for key in ("license: apache-2.0", "task_categories:", "pretty_name: CypherTurn Gym",
                "size_categories:\n- n<1K"):
        assert key in front
    assert "- sessions: 2" in body and "- turns: 3" in body
    assert "| ancient_empire | 1 | 2 |" in body  # world, sessions, turns
    # the manifest's entries, its stats left out (they are the tables above)
    assert "- seed: `1234`" in body and "- dataset_sha256: `abc123`" in body and "- sessions: `2`" in body
    assert "- world_checksums:\n  - ancient_empire: `c0ffee`" in body
    assert "- executes: `5`" in body and "- stats:" not in body
    for section in ("## Fields", "## Splits", "## How it was generated", "## Verification gates"):
        assert section in body


def test_same_input_same_bytes(sessions, tmp_path):
    first = _digest(save_hf_dataset(sessions, tmp_path / "a", manifest=MANIFEST))
    second = _digest(save_hf_dataset(sessions, tmp_path / "b", manifest=MANIFEST))
    again = _digest(save_hf_dataset(sessions, tmp_path / "a", manifest=MANIFEST))  # overwrites cleanly
    assert first == second == again


def test_empty_and_bad_key_values(sessions, tmp_path):
    save_hf_dataset([], tmp_path / "empty", manifest={})
    assert load_hf_sessions(tmp_path / "empty") == []
    sessions[1].turns[0].gold_key_values = [{"label": "Fleet", "value": "Alpha"}]
    with pytest.raises(ValueError, match="space_fleet-0001 turn 0: gold_key_values entry has keys"):
        save_hf_dataset(sessions, tmp_path / "bad", manifest=MANIFEST)


def test_the_row_codec_round_trips_every_turn(sessions):
    """``Turn.to_row`` / ``from_row`` (the one codec of the export, the training rows and the rewards)
    give back the very turn, mixed-type values and key order included; the rows hold only Arrow-safe,
    single-typed values."""
    from benchmark.session import decode_json, key_value_from_row

    for s in sessions:
        assert Session.from_row(s.to_row()) == s and s.to_row()["num_turns"] == len(s.turns)
        for t in s.turns:
            row = t.to_row()
            assert Turn.from_row(row) == t
            assert decode_json(row["gold_rows_json"]) == t.gold_rows
            assert [key_value_from_row(kv) for kv in row["gold_key_values"]] == t.gold_key_values
            assert all(isinstance(kv["value_json"], str) for kv in row["gold_key_values"])
    row = sessions[0].turns[0].to_row()
    assert row["gold_rows_json"].endswith('[true,{"z":1,"a":2}]]')  # compact, key order kept


@pytest.mark.neo4j
def test_the_row_codec_round_trips_a_real_build(tmp_path):
    from benchmark.build import build
    from benchmark.session import read_sessions

    build("test", tmp_path, seed=5, sessions=14, hf=False)
    turns = [t for s in read_sessions(tmp_path) for t in s.turns]
    assert turns and all(Turn.from_row(t.to_row()) == t for t in turns)


def test_one_chain_dependence_rule(sessions):
    from benchmark.session import CHAIN_MODES, is_chain_dependent

    assert [m for m in CHAIN_MODES if not is_chain_dependent(m)] == ["none", "topic_shift"]
    for t in (t for s in sessions for t in s.turns):
        assert t.chain_dependent == is_chain_dependent(t.chain_mode) == (t.chain_mode != "none")
