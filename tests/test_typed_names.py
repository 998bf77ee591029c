"""Names as users type them (issue 20): the typo / partial / case forms, the resolution rule, the Turn
field's round trips, and a small real build in which every typed name is verified again on the server and
found by an agent's SEARCH_VALUES through the environment."""

from __future__ import annotations

import json
import random

import pytest

from benchmark import typed_names as tn
from benchmark.build import build
from benchmark.chain import literal
from benchmark.session import Session, Turn, read_sessions, validate_session, write_sessions
from cypherturn.errors import InputError
from envs.env import CypherTurnEnv, EnvConfig
from graphs.executor import SafeExecutor
from graphs.search import search_values

WORLDS = ["ocean_kingdom", "stellar_colony"]


# -- the forms ---------------------------------------------------------------------------------------
def test_typos_are_one_slip_in_a_long_word_and_keep_the_first_letter():
    forms = tn.typos("Tasherk")
    assert {"Tashrk", "Tasherrk", "Tasehrk"} <= set(forms)  # dropped, doubled, swapped
    assert "Tasherk" not in forms and all(f[0] == "T" for f in forms)
    assert all(tn.edit_distance(f, "Tasherk") == 1 for f in forms)
    assert tn.typos("Bumae") == [] and tn.typos("Port-X") == []  # a short word, not a plain word
    assert "Khoottiria" not in tn.typos("Khotiria") and "Khotiriaa" in tn.typos("Khotiria")


def test_typo_forms_leave_the_pattern_words_alone():
    patterns = tn.pattern_words(["Trequerk Reef", "Trequeren Reef", "Trastiark Reef", "Fibrox Atoll"])
    assert "reef" in patterns and "trequerk" not in patterns
    forms = tn.typo_forms("Trequerk Reef", patterns, random.Random(3))
    assert forms and all(f.endswith(" Reef") and f != "Trequerk Reef" for f in forms)
    assert forms == tn.typo_forms("Trequerk Reef", patterns, random.Random(3))  # the rng decides the order


def test_partial_names_are_the_distinctive_words():
    patterns = tn.pattern_words(["Temple of Cakumo", "Temple of Zhenol", "Temple of Yatan", "Shrine of Salox"])
    assert tn.partial_forms("Quabro Tasherk", frozenset()) == ["Tasherk", "Quabro"]  # the surname first
    assert tn.partial_forms("Temple of Cakumo", patterns) == ["Cakumo"]
    assert tn.partial_forms("Khotiria", frozenset()) == []  # one word: nothing to leave out
    ships = tn.pattern_words(["Heze's Fortune", "Gitan's Fortune", "Bogezhath's Fortune"])
    assert tn.partial_forms("Heze's Fortune", ships) == ["Heze"]


def test_case_codes_and_candidates():
    assert tn.case_form("Quabro Tasherk") == "quabro tasherk" and tn.case_form("arid") is None
    assert tn.is_code("Legion 01") and tn.is_code("ED-0042") and not tn.is_code("Quabro Tasherk")
    assert tn.candidates("Pearl #012", frozenset(), random.Random(1), entity=True) == []
    values = tn.candidates("temperate", frozenset(), random.Random(1), entity=False)
    assert values and {k for k, _ in values} == {"typo"}  # a categorical value: typos only
    kinds = {tn.candidates("Quabro Tasherk", frozenset(), random.Random(s), entity=True)[0][0] for s in range(40)}
    assert kinds == set(tn.KINDS)


def test_resolution_rule():
    assert tn.resolves("typo", "Quabro Tashrek", "Quabro Tasherk", ["Quabro Tasherk"])
    assert not tn.resolves("typo", "Quabro Tashrek", "Quabro Tasherk", ["Lalupin Staphoth"])
    # a slip away from one value and clearly farther from the other
    assert tn.resolves("typo", "Port Vophnd", "Port Vophend", ["Port Vophend", "Port Vophenen"])
    # "Port Vophen" is one edit from "Port Vophend" and two from "Port Vophenen": no clear pick
    assert not tn.resolves("typo", "Port Vophen", "Port Vophend", ["Port Vophend", "Port Vophenen"])
    # a part two names share is a question back to the user
    assert not tn.resolves("partial", "Poquitror", "Quaepox Poquitror", ["Quaepoar Poquitror", "Quaepox Poquitror"])
    assert tn.resolves("partial", "Tasherk", "Quabro Tasherk", ["Quabro Tasherk"])


# -- the field -----------------------------------------------------------------------------------------
def _turn(typed: list[dict]) -> Turn:
    return Turn(index=0, utterance="Which reefs shelter the kraken Tedrael?", gold_cypher="MATCH (n) RETURN n",
                gold_columns=["name"], gold_rows=[["x"]], phenomenon="OPENING", chain_mode="none", depends_on=None,
                typed_names=typed)


def test_typed_names_round_trip_through_jsonl_rows_and_validation(tmp_path):
    rec = tn.record("Creature", "name", "Giant Tedrael", "Tedrael", "partial")
    s = Session(id="ocean_kingdom-0000", world="ocean_kingdom", persona="student", turns=[_turn([rec])])
    write_sessions(tmp_path / "sessions.jsonl", [s])
    assert list(read_sessions(tmp_path)) == [s]
    assert Turn.from_row(s.turns[0].to_row()) == s.turns[0]
    old_row = s.turns[0].to_row()
    del old_row["typed_names"]  # a dataset saved before the field existed
    assert Turn.from_row(old_row).typed_names == []
    raw = json.loads(s.to_json())
    del raw["turns"][0]["typed_names"]
    validate_session(raw)  # old builds stay readable
    for bad in ({**rec, "kind": "guess"}, {**rec, "typed": rec["stored"]}, {k: rec[k] for k in list(rec)[:4]}):
        raw["turns"][0]["typed_names"] = [bad]
        with pytest.raises(InputError, match="typed_names"):
            validate_session(raw)


def test_typed_names_survive_the_hugging_face_export(tmp_path):
    pytest.importorskip("datasets")
    from benchmark.hf import load_hf_sessions, save_hf_dataset

    rec = tn.record("Emperor", "name", "Quabro Tasherk", "Quabro Tashrek", "typo")
    sessions = [Session(id="ancient_empire-0000", world="ancient_empire", persona="student",
                        turns=[_turn([rec]), Turn(**{**_turn([]).__dict__, "index": 1})])]
    save_hf_dataset(sessions, tmp_path, manifest={"split": "test"})
    assert load_hf_sessions(tmp_path) == sessions


# -- a real build ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small(tmp_path_factory):
    out = tmp_path_factory.mktemp("typed")
    result = build("test", out, sessions=8, worlds=WORLDS, hf=False)
    return out, list(read_sessions(out)), result.manifest


@pytest.mark.neo4j
def test_every_typed_name_resolves_and_the_gold_keeps_the_stored_value(small):
    _, sessions, manifest = small
    typed = [(s, t, r) for s in sessions for t in s.turns for r in t.typed_names]
    assert any(r["kind"] in tn.LOOKUP_KINDS for _, _, r in typed), "no typed name in the build"
    executors = {w: SafeExecutor(w, timeout=60) for w in WORLDS}
    for s, t, r in typed:
        assert r["typed"] in t.shown_utterance and r["stored"] not in t.utterance
        assert literal(r["stored"]) in t.gold_cypher and literal(r["typed"]) not in t.gold_cypher
        exact, folded = tn.equal_counts(lambda c, p: executors[s.world].run(c, params=p), r["label"], r["property"],
                                        r["typed"])
        assert exact == 0 and (folded == 0 or r["kind"] == "case"), r
        found = search_values(s.world, r["label"], r["property"], r["typed"]).values
        assert tn.resolves(r["kind"], r["typed"], r["stored"], list(found)), (r, found)
    assert "typed_name" in manifest["gate_failures"] or typed  # the gate is counted like the others


@pytest.mark.neo4j
def test_an_agent_finds_the_stored_value_with_search_values_through_the_env(small):
    path, sessions, _ = small
    s, t, r = next((s, t, r) for s in sessions for t in s.turns for r in t.typed_names if r["kind"] in tn.LOOKUP_KINDS)
    env = CypherTurnEnv(config=EnvConfig(protocol="guided"), dataset=path)
    obs, _ = env.reset(options={"session_id": s.id, "start_turn": t.index})
    assert r["typed"] in obs and f"(:{r['label']} {{" in obs and f"{r['property']}: STRING" in obs  # the schema shown
    query = json.dumps({"label": r["label"], "property": r["property"], "query": r["typed"]})
    obs, *_ = env.step(f"SEARCH_VALUES {query}")
    assert obs.startswith("[Search] ") and r["stored"] in json.loads(obs[len("[Search] "):])
    pasted = f"MATCH (n:`{r['label']}`) WHERE n.`{r['property']}` = {literal(r['typed'])} RETURN n.`{r['property']}` AS v"
    obs, *_ = env.step(f"EXECUTE_CYPHER {pasted}")
    assert "[Query Result]" in obs and r["stored"] not in obs  # pasting the typed form finds nothing
    _, reward, *_ = env.step("SUBMIT_ANSWER " + t.gold_cypher)
    assert reward == 1.0
