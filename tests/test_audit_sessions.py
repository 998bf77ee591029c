"""scripts/audit_sessions.py: each check flags the defect it names (hand-made sessions), and the
script runs end to end on a small real build, where the generator's gates keep the defects out."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark.build import build
from benchmark.session import Session, Turn

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "audit_sessions.py"
_spec = importlib.util.spec_from_file_location("audit_sessions", SCRIPT)
audit_sessions = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(audit_sessions)


def _turn(index, utterance, cypher, columns, rows, phenomenon, depends_on, mode=None, kvs=()):
    modes = {"OPENING": "none", "TOPIC_SHIFT": "topic_shift", "EXPAND": "expand", "AGG_SUM": "agg_numeric",
             "CONTRAST": "contrast", "FILTER": "narrow", "THRESHOLD": "value_narrow", "AGG_COUNT": "aggregate"}
    return Turn(index=index, utterance=utterance, gold_cypher=cypher, gold_columns=list(columns), gold_rows=rows,
                phenomenon=phenomenon, chain_mode=mode or modes[phenomenon], depends_on=depends_on,
                gold_key_values=list(kvs))


def _bad_session() -> Session:
    fleets = "MATCH (k:Kingdom {name: 'Vor'})-[:COMMANDS]->(n1:Fleet)"
    turns = [
        _turn(0, "Your last answer looked wrong to me. Which creatures are sheltered by the reef Khafel Reef?",
              "MATCH (a:Reef {name: 'Khafel Reef'})-[:SHELTERS]->(n1:Creature)\nRETURN DISTINCT n1.name AS name",
              ["name"], [["A"], ["B"]], "OPENING", None, kvs=[{"label": "Reef", "property": "name",
                                                               "value": "Khafel Reef"}]),
        _turn(1, "Hello, bottom line: narrower: which fleets are riding those creatures?",
              "MATCH (a:Reef)-[:SHELTERS]->(n1:Creature)\nWITH DISTINCT n1\nMATCH (n1)<-[:RIDES]-(n2:Fleet)\n"
              "RETURN DISTINCT n2.name AS name", ["name"], [["F1"], ["F2"]], "EXPAND", 0),
        _turn(2, "What's the total age in years of those fleets?",
              fleets + "\nWITH DISTINCT n1\nRETURN sum(n1.age_years) AS total_age_years", ["total_age_years"], [[5]],
              "AGG_SUM", 1),
        _turn(3, "Only the fleets with crew more than 1576998.",
              fleets + "\nWITH DISTINCT n1\nWHERE n1.crew > 1576998\nRETURN DISTINCT n1.name AS name", ["name"],
              [["F1"]], "THRESHOLD", 1),
        _turn(4, "And the fleets that are not?", fleets + "\nRETURN DISTINCT n1.name AS name", ["name"], [["F2"]],
              "CONTRAST", 3),
        _turn(5, "And the others?", fleets + "\nRETURN DISTINCT n1.name AS name", ["name"], [["F1"]], "CONTRAST", 4),
    ]
    return Session(id="ocean_kingdom-9999", world="ocean_kingdom", persona="adversarial_user", turns=turns)


def test_each_check_flags_its_defect():
    report = audit_sessions.audit([_bad_session()])
    checks = report["checks"]
    assert checks["opening_refers_back"]["count"] == 1
    assert checks["greeting_or_apology_after_turn_1"]["count"] == 1
    assert checks["stacked_lead_ins"]["count"] == 1
    assert checks["duplicated_type_noun"]["count"] == 1
    assert checks["sum_over_non_additive"] == {"count": 1, "of": 1, "rate": 1.0}
    assert checks["machine_threshold"]["count"] == 1
    assert checks["contrast_of_contrast"]["count"] == 1
    assert checks["repeated_result_set"]["count"] >= 1  # turn 5 lists turn 3's set again
    assert checks["gold_renames_to_name"]["count"] == 0  # Creature and Fleet keys are called name
    assert audit_sessions.is_round("1600000") and audit_sessions.is_round("12.5")
    assert not audit_sessions.is_round("1576998")
    assert audit_sessions.lead_ins("Bottom line: narrower: which?") == 2


def test_reviewer_defects_of_the_second_pass_are_counted():
    """A duration is not a year ("more than 569" years of age is a machine threshold), an expansion
    straight back to the anchor's label, a bound but unused relationship variable, a list remark on a
    sum, and a relationship aggregate whose wording never names the relationship."""
    reefs = "MATCH (a_n1:Kingdom {name: 'Vor'})-[:CLAIMS]->(n1:Reef)"
    creatures = "MATCH (a_n1:Reef {name: 'Khafel Reef'})-[:SHELTERS]->(n1:Creature)"
    turns = [
        _turn(0, "Which creatures are sheltered by Khafel Reef?", creatures + "\nRETURN DISTINCT n1.name AS name",
              ["name"], [["A"], ["B"], ["C"]], "OPENING", None),
        _turn(1, "Keep only the creatures whose age in years is more than 569.",
              creatures + "\nWITH DISTINCT n1\nWHERE n1.age_years > 569\nRETURN DISTINCT n1.name AS name",
              ["name"], [["A"], ["B"]], "THRESHOLD", 0),
        _turn(2, "Which reefs are sheltering those creatures?",
              creatures + "\nWITH DISTINCT n1\nWHERE n1.age_years > 569\nWITH DISTINCT n1\n"
              "MATCH (n1)<-[e_n2:SHELTERS]-(n2:Reef)\nRETURN DISTINCT n2.name AS name", ["name"], [["R1"], ["R2"]],
              "EXPAND", 1),
        _turn(3, "Compute sum(population) over those reefs. Deduplicate the result.",
              creatures + "\nWITH DISTINCT n1\nMATCH (n1)<-[e_n2:SHELTERS]-(n2:Reef)\n"
              "RETURN sum(e_n2.population) AS sum_population", ["sum_population"], [[12]], "AGG_SUM", 2),
        _turn(4, "For those reefs sheltering the creatures, what's the total population?",
              creatures + "\nWITH DISTINCT n1\nMATCH (n1)<-[e_n2:SHELTERS]-(n2:Reef)\n"
              "RETURN sum(e_n2.population) AS sum_population", ["sum_population"], [[12]], "AGG_SUM", 2),
        _turn(5, "Which creatures are sheltered by those reefs? Deduplicate the result.",
              reefs + "\nWITH DISTINCT n1\nMATCH (n1)-[:SHELTERS]->(n2:Creature)\nRETURN DISTINCT n2.name AS name",
              ["name"], [["A"]], "EXPAND", 2),
    ]
    report = audit_sessions.audit([Session(id="ocean_kingdom-9998", world="ocean_kingdom", persona="data_analyst",
                                           turns=turns)])
    checks = report["checks"]
    assert checks["machine_threshold"]["count"] == 1
    assert checks["expand_back_to_origin"] == {"count": 2, "of": 2, "rate": 1.0}  # reef -> creature -> reef -> ...
    assert checks["unused_relationship_variable"]["count"] == 1  # turn 2 only; turns 3-4 use e_n2
    assert checks["persona_remark_misfit"]["count"] == 1  # turn 3; turn 5 is a list
    assert checks["relationship_aggregate_without_link"] == {"count": 1, "of": 2, "rate": 0.5}
    assert audit_sessions.hop_origin(turns[0].gold_cypher) == "Reef"
    assert audit_sessions.hop_origin(turns[2].gold_cypher) == "Creature"
    assert audit_sessions.hop_origin("MATCH (n1:Reef)\nWHERE n1.zone = 'x'\nRETURN DISTINCT n1.name AS name") is None


def test_reviewer_defects_of_the_third_pass_are_counted():
    """A plural noun before "record", an average labelled AGG_SUM (a minimum under AGG_MAX is the
    paper's label for either extreme, not a mismatch), a WITH DISTINCT on a variable that
    already binds each node once, a pivot back to the anchor's kind, and a back-reference to "the
    colonies from earlier" when a later turn listed colonies too."""
    guild = "MATCH (a_n1:Guild {name: 'Kaezhirk Guild'})-[:TRADES]->(n1:Pearl)"
    turns = [
        _turn(0, "Retrieve every pearls record traded by Kaezhirk Guild.", guild + "\nRETURN DISTINCT n1.name AS name",
              ["name"], [["P1"], ["P2"], ["P3"]], "OPENING", None),
        _turn(1, "Average weight in carats of those pearls?", guild + "\nWITH DISTINCT n1\nRETURN avg(n1.carats) AS "
              "avg_carats", ["avg_carats"], [[2.5]], "AGG_SUM", 0, mode="agg_numeric"),
        _turn(2, "Only the pearls with color white.", guild + "\nWITH DISTINCT n1\nWHERE n1.color = 'white'\n"
              "RETURN DISTINCT n1.name AS name", ["name"], [["P1"], ["P2"]], "FILTER", 0),
        _turn(3, "And of those, only the ones worth more than 500 shells.",
              guild + "\nWITH DISTINCT n1\nWHERE n1.color = 'white'\nWITH DISTINCT n1\nWHERE n1.value_shells > 500\n"
              "RETURN DISTINCT n1.name AS name", ["name"], [["P1"]], "REFINE", 2, mode="narrow"),
        _turn(4, "New question. Which fleets are there?", "MATCH (n9:Fleet)\nWITH DISTINCT n9\n"
              "RETURN DISTINCT n9.name AS name", ["name"], [["F1"], ["F2"]], "TOPIC_SHIFT", None),
        _turn(5, "Going back to the pearls from before: the guilds trading the heaviest one?",
              guild + "\nWITH DISTINCT n1 WHERE n1.carats IS NOT NULL\nWITH n1 ORDER BY n1.carats DESC LIMIT 1\n"
              "MATCH (n1)<-[:TRADES]-(n6:Guild)\nRETURN DISTINCT n6.name AS name", ["name"], [["G1"], ["G2"]], "PIVOT",
              2, mode="pivot"),
    ]
    report = audit_sessions.audit([Session(id="ocean_kingdom-9997", world="ocean_kingdom", persona="data_analyst",
                                           turns=turns)])
    checks = report["checks"]
    assert checks["plural_noun_grammar"]["count"] == 1  # turn 0 only
    assert checks["aggregate_label_mismatch"] == {"count": 1, "of": 1, "rate": 1.0}
    assert checks["redundant_with_distinct"]["count"] == 2  # turn 3 (after a filter), turn 4 (one-node MATCH)
    assert checks["pivot_back_to_origin"] == {"count": 1, "of": 1, "rate": 1.0}
    assert checks["ambiguous_back_reference"] == {"count": 1, "of": 1, "rate": 1.0}  # turn 3 listed pearls too
    assert audit_sessions.redundant_distinct("MATCH (n1:Pearl)\nWHERE n1.x = 1 AND n1.y > 2\nWITH n1 ORDER BY n1.y "
                                             "DESC LIMIT 3\nMATCH (n1)-[:R]->(n2:Guild)\nWITH DISTINCT n2\n"
                                             "RETURN count(n2) AS count") == []
    assert audit_sessions.redundant_distinct("MATCH (n1:Pearl)\nWITH n1 ORDER BY n1.y LIMIT 3\n"
                                             "WITH DISTINCT n1\nRETURN count(n1) AS count") == ["WITH DISTINCT n1"]
    assert audit_sessions.plural_grammar("Retrieve the records of all pearls traded by X.", {"pearls"}) == []


def test_yes_no_defects_are_counted():
    """A yes/no question about the property the set was just complemented on (its answer is decided by
    the set's own filter), and a set description glued to a verb ("is whose language is ...")."""
    wings = "MATCH (n1:Wing)\nWHERE NOT coalesce(n1.restricted = true, false)"
    turns = [
        _turn(0, "Which wings are restricted?", "MATCH (n1:Wing)\nWHERE n1.restricted = true\nRETURN DISTINCT "
              "n1.name AS name", ["name"], [["W1"], ["W2"]], "OPENING", None),
        _turn(1, "And the wings that are not?", wings + "\nRETURN DISTINCT n1.name AS name", ["name"],
              [["W3"], ["W4"]], "CONTRAST", 0),
        _turn(2, "Yes or no: any of those wings marked as restricted?",
              wings + "\nRETURN any(x IN collect(n1) WHERE x.restricted = true) AS any_restricted",
              ["any_restricted"], [[False]], "AGG_COUNT", 1, mode="aggregate"),
        _turn(3, "I want know if any of those wings is whose style is gothic.",
              wings + "\nRETURN any(x IN collect(n1) WHERE x.style = 'gothic') AS any_style",
              ["any_style"], [[True]], "AGG_COUNT", 1, mode="aggregate"),
    ]
    report = audit_sessions.audit([Session(id="arcane_archive-9996", world="arcane_archive", persona="non_native_speaker",
                                           turns=turns)])
    checks = report["checks"]
    assert checks["yes_no_on_filtered_property"] == {"count": 1, "of": 2, "rate": 0.5}  # turn 2; turn 3 tests style
    assert checks["verb_before_which"] == {"count": 1, "of": 2, "rate": 0.5}  # turn 3; "wings marked as" reads well


@pytest.mark.neo4j
def test_audit_script_on_a_small_build(tmp_path):
    build("test", tmp_path / "b", seed=3, sessions=8, worlds=["stellar_colony", "arcane_archive"], hf=False)
    out = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "b"), "--json", str(tmp_path / "a.json")],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    for name in audit_sessions.ORDER:
        assert name in out.stdout, name
    report = json.loads((tmp_path / "a.json").read_text())
    assert report["sessions"] == 8 and report["symmetric"]["checked"]
    checks = report["checks"]
    for name in ("contrast_of_contrast", "repeated_result_set", "sum_over_non_additive", "gold_renames_to_name",
                 "symmetric_traversed_one_way", "opening_refers_back", "stacked_lead_ins", "machine_threshold",
                 "expand_back_to_origin", "unused_relationship_variable", "persona_remark_misfit",
                 "relationship_aggregate_without_link", "plural_noun_grammar", "redundant_with_distinct",
                 "pivot_back_to_origin", "ambiguous_back_reference", "yes_no_on_filtered_property",
                 "verb_before_which"):
        assert checks.get(name, {"count": 0})["count"] == 0, (name, report["examples"].get(name))
