"""Review round trip: Cohen's kappa on hand-computed examples, export -> two edited sheets -> import.

Re-execution of revised gold uses ``fake_execute`` below, a pure-Python stand-in returning the real
``QueryResult`` / ``QueryError`` types, so these tests need no database; the real safe executor is
covered by the Neo4j tests (tests/test_executor.py and the lead's builder tests).
"""

from __future__ import annotations

import copy
import csv
import json

import pytest

from benchmark.annotation import (SHEET_COLUMNS, ReviewError, cohens_kappa, export_review, import_reviews,
                                  write_review_report)
from benchmark.session import Session, Turn
from graphs.executor import QueryError, QueryResult


# -- kappa ----------------------------------------------------------------------------------------

def test_kappa_textbook_example():
    # 50 items: both yes 20, A yes/B no 5, A no/B yes 10, both no 15.
    # p_o = 35/50 = 0.7; A says yes 25/50, B 30/50: p_e = 0.5*0.6 + 0.5*0.4 = 0.5;
    # kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    a = ["yes"] * 20 + ["yes"] * 5 + ["no"] * 10 + ["no"] * 15
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert cohens_kappa(a, b) == pytest.approx(0.4)


def test_kappa_small_examples():
    # p_o = 3/4; A keeps 3/4, B keeps 2/4: p_e = 3/4*2/4 + 1/4*2/4 = 1/2; kappa = (3/4-1/2)/(1/2) = 0.5
    assert cohens_kappa(["keep", "keep", "keep", "reject"],
                        ["keep", "keep", "reject", "reject"]) == pytest.approx(0.5)
    # perfect agreement over two labels: p_o = 1, p_e = 1/2 -> kappa = 1
    assert cohens_kappa(["keep", "reject"], ["keep", "reject"]) == pytest.approx(1.0)
    # systematic disagreement: p_o = 0, p_e = 1/2 -> kappa = -1
    assert cohens_kappa(["keep", "reject"], ["reject", "keep"]) == pytest.approx(-1.0)
    # prevalence: A keeps all 4, B rejects one: p_o = 3/4 = p_e -> kappa = 0 despite 75% agreement
    assert cohens_kappa(["keep"] * 4, ["keep"] * 3 + ["reject"]) == pytest.approx(0.0)


def test_kappa_degenerate_and_invalid():
    # both raters give every item the same label: p_e = 1, formula 0/0; defined as 1.0
    assert cohens_kappa(["keep"] * 5, ["keep"] * 5) == 1.0
    with pytest.raises(ValueError):
        cohens_kappa(["keep"], ["keep", "reject"])
    with pytest.raises(ValueError):
        cohens_kappa([], [])


# -- round trip -----------------------------------------------------------------------------------

def make_turn(index: int, utterance: str, cypher: str, rows: list, ambiguous: bool = False) -> Turn:
    return Turn(index=index, utterance=utterance, gold_cypher=cypher, gold_columns=["name"], gold_rows=rows,
                phenomenon="OPENING" if index == 0 else "EXPAND", chain_mode="none" if index == 0 else "expand",
                depends_on=None if index == 0 else index - 1,
                ambiguity_info={"utterance": "Which of them?", "clarification": "The legions."} if ambiguous else None,
                gold_key_values=[{"label": "Emperor", "property": "name", "value": "Quabro"}],
                gold_triples=["(:Emperor)-[:GOVERNS]->(:Province)"])


@pytest.fixture
def sessions() -> list[Session]:
    return [
        Session("w1-0001", "w1", "journalist", [
            make_turn(0, "Which emperors are there?", "MATCH (e:Emperor) RETURN e.name AS name",
                      [[f"E{i}"] for i in range(7)]),
            make_turn(1, "Which provinces do they govern?", "Q_S1T1", [["P1"]], ambiguous=True),
            make_turn(2, "And their legions?", "Q_S1T2", [["L1"]]),
        ]),
        Session("w1-0002", "w1", "student", [
            make_turn(0, "List the provinces.", "Q_S2T0", [["P1"], ["P2"]]),
            make_turn(1, "Who governs them?", "Q_S2T1", [["E1"]]),
        ]),
        Session("w2-0001", "w2", "casual_user", [
            make_turn(0, "Show the cities.", "Q_S3T0", [["C1"]]),
            make_turn(1, "Which are big?", "Q_S3T1", [["C1"]]),
        ]),
    ]


RESULTS = {
    "Q_A": QueryResult(columns=["name"], rows=[["Province A"], ["Province B"]]),
    "Q_B2": QueryResult(columns=["city", "size"], rows=[["C1", 5], ["C2", None]]),
    "Q_TRUNC": QueryResult(columns=["x"], rows=[[1]], truncated=True),
}


class FakeExecutor:
    """Pure-Python stand-in for graphs.executor.execute: known queries succeed, others are syntax errors."""

    def __init__(self):
        self.calls: list[tuple[str, str]] = []

    def __call__(self, world, query, **_):
        self.calls.append((world, query))
        if query in RESULTS:
            return copy.deepcopy(RESULTS[query])
        return QueryResult(error=QueryError("syntax", f"Invalid input {query!r}"))


def read_csv(path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def write_csv(path, rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


def write_jsonl(path, rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def fill(rows: list[dict], decisions: dict[tuple[str, int], tuple[str, str]]) -> list[dict]:
    for r in rows:
        decision, revised = decisions[(r["session_id"], int(r["turn_index"]))]
        r["decision"], r["revised_cypher"] = decision, revised
    return rows


# (session, turn) -> (decision, revised cypher)
DECISIONS_A = {
    ("w1-0001", 0): ("revise", "Q_A"),      # both revise: A's revision wins
    ("w1-0001", 1): ("accept", ""),
    ("w1-0001", 2): ("reject", ""),         # only A rejects: the turn stays
    ("w1-0002", 0): ("reject", ""),         # both reject: the session is dropped
    ("w1-0002", 1): ("revise", "Q_DROPPED"),  # never executed: its session is dropped
    ("w2-0001", 0): ("accept", ""),
    ("w2-0001", 1): ("accept", ""),
}
DECISIONS_B = {
    ("w1-0001", 0): ("revise", "Q_B"),
    ("w1-0001", 1): ("accept", ""),
    ("w1-0001", 2): ("accept", ""),
    ("w1-0002", 0): ("reject", ""),
    ("w1-0002", 1): ("accept", ""),
    ("w2-0001", 0): ("revise", "BROKEN"),   # fails to execute: reported, original gold kept
    ("w2-0001", 1): ("revise", "Q_B2"),     # only B revised: B's revision applies
}


def test_export_sheet_contents(sessions, tmp_path):
    export_review(sessions, tmp_path / "sheet.csv")
    rows = read_csv(tmp_path / "sheet.csv")
    assert len(rows) == 7 and tuple(rows[0]) == SHEET_COLUMNS
    first, ambiguous = rows[0], rows[1]
    assert first["previous_utterance"] == "" and first["decision"] == first["revised_cypher"] == ""
    preview = json.loads(first["gold_result_preview"])
    assert preview == {"columns": ["name"], "rows": [["E0"], ["E1"], ["E2"], ["E3"], ["E4"]], "total_rows": 7}
    # the shown (ambiguous) wording, with its clarification; the previous turn's wording for context
    assert ambiguous["utterance"] == "Which of them?" and ambiguous["clarification"] == "The legions."
    assert ambiguous["previous_utterance"] == "Which emperors are there?"

    export_review(sessions, tmp_path / "sheet.jsonl")
    jrows = read_jsonl(tmp_path / "sheet.jsonl")
    assert [r["turn_index"] for r in jrows] == [0, 1, 2, 0, 1, 0, 1]
    assert {k: str(v) for k, v in jrows[2].items()} == rows[2]  # same content in both formats


def test_round_trip(sessions, tmp_path):
    original = copy.deepcopy(sessions)
    export_review(sessions, tmp_path / "a.csv")
    export_review(sessions, tmp_path / "b.jsonl")
    write_csv(tmp_path / "a.csv", fill(read_csv(tmp_path / "a.csv"), DECISIONS_A))
    write_jsonl(tmp_path / "b.jsonl", fill(read_jsonl(tmp_path / "b.jsonl"), DECISIONS_B))

    fake = FakeExecutor()
    out = import_reviews(sessions, tmp_path / "a.csv", tmp_path / "b.jsonl", execute=fake)

    # keep/reject per turn: A = k k r r k k k (5 keep, 2 reject), B = k k k r k k k (6 keep, 1 reject)
    # p_o = 6/7; p_e = (5*6 + 2*1)/49 = 32/49; kappa = (42/49 - 32/49) / (17/49) = 10/17
    assert out.kappa == pytest.approx(10 / 17)
    assert out.observed_agreement == pytest.approx(6 / 7)
    assert out.expected_agreement == pytest.approx(32 / 49)
    assert not out.kappa_degenerate
    # three-way decisions agree on 3 of 7 turns (revise/revise, accept/accept, reject/reject)
    assert out.decision_agreement == pytest.approx(3 / 7)
    assert [(d.session_id, d.turn_index) for d in out.disagreements] == [
        ("w1-0001", 2), ("w1-0002", 1), ("w2-0001", 0), ("w2-0001", 1)]
    assert out.confusion["revise"]["revise"] == 1 and out.confusion["reject"]["accept"] == 1

    assert (out.n_turns, out.n_rejected_turns, out.n_dropped_sessions, out.n_revised) == (7, 1, 1, 2)
    assert [s.id for s in out.sessions] == ["w1-0001", "w2-0001"]
    assert fake.calls == [("w1", "Q_A"), ("w2", "BROKEN"), ("w2", "Q_B2")]  # not Q_B, not Q_DROPPED

    s1, s3 = out.sessions
    assert s1.turns[0].gold_cypher == "Q_A"
    assert (s1.turns[0].gold_columns, s1.turns[0].gold_rows) == (["name"], [["Province A"], ["Province B"]])
    assert s1.turns[0].gold_key_values == original[0].turns[0].gold_key_values
    assert s1.turns[1:] == original[0].turns[1:]
    assert s3.turns[0] == original[2].turns[0]  # failed revision: original gold kept
    assert out.revision_errors == [("w2-0001", 0, "syntax: Invalid input 'BROKEN'")]
    assert (s3.turns[1].gold_cypher, s3.turns[1].gold_columns, s3.turns[1].gold_rows) == (
        "Q_B2", ["city", "size"], [["C1", 5], ["C2", None]])
    assert sessions == original  # the input is not modified

    write_review_report(out, tmp_path / "report.md")
    report = (tmp_path / "report.md").read_text()
    assert "**0.588**" in report and "moderate" in report
    assert "| w2-0001 | 0 | syntax: Invalid input 'BROKEN' |" in report
    assert "| w1-0001 | 2 | reject | accept |" in report
    assert "revisions applied: 2" in report and "sessions dropped: 1" in report


def test_all_accept_is_degenerate(sessions, tmp_path):
    export_review(sessions, tmp_path / "a.jsonl")
    rows = read_jsonl(tmp_path / "a.jsonl")
    for r in rows:
        r["decision"] = "Accept "  # case and spacing as a person types them
    write_jsonl(tmp_path / "a.jsonl", rows)
    out = import_reviews(sessions, tmp_path / "a.jsonl", tmp_path / "a.jsonl", execute=FakeExecutor())
    assert out.kappa == 1.0 and out.kappa_degenerate
    assert out.sessions == sessions and out.disagreements == [] and out.n_revised == 0
    write_review_report(out, tmp_path / "r.md")
    assert "degenerate" in (tmp_path / "r.md").read_text()


def test_truncated_revision_is_an_error(sessions, tmp_path):
    decisions = {k: ("accept", "") for k in DECISIONS_A}
    decisions[("w1-0002", 1)] = ("revise", "Q_TRUNC")
    export_review(sessions, tmp_path / "a.csv")
    write_csv(tmp_path / "a.csv", fill(read_csv(tmp_path / "a.csv"), decisions))
    out = import_reviews(sessions, tmp_path / "a.csv", tmp_path / "a.csv", execute=FakeExecutor())
    assert out.n_revised == 0 and len(out.revision_errors) == 1
    assert "truncated" in out.revision_errors[0][2]
    assert out.sessions == sessions


# -- validation -----------------------------------------------------------------------------------

@pytest.fixture
def good_sheet(sessions, tmp_path):
    export_review(sessions, tmp_path / "good.csv")
    write_csv(tmp_path / "good.csv", fill(read_csv(tmp_path / "good.csv"), DECISIONS_A))
    return tmp_path / "good.csv"


def broken_sheet(tmp_path, good_sheet, row: int, **changes) -> str:
    rows = read_csv(good_sheet)
    rows[row].update(changes)
    path = tmp_path / "bad.csv"
    write_csv(path, rows)
    return str(path)


@pytest.mark.parametrize("changes, message", [
    ({"decision": "maybe"}, "decision is 'maybe'"),
    ({"decision": ""}, "decision is empty"),
    ({"session_id": "nope-0001"}, "unknown turn (session 'nope-0001', turn 1)"),
    ({"turn_index": "9"}, "unknown turn (session 'w1-0001', turn 9)"),
    ({"turn_index": "one"}, "is not a whole number"),
    ({"decision": "revise", "revised_cypher": "  "}, "revise but revised_cypher is empty"),
])
def test_invalid_rows_name_file_and_row(sessions, tmp_path, good_sheet, changes, message):
    bad = broken_sheet(tmp_path, good_sheet, 1, **changes)  # the second data row: spreadsheet row 3
    with pytest.raises(ReviewError) as err:
        import_reviews(sessions, good_sheet, bad, execute=FakeExecutor())
    assert f"{bad}, row 3" in str(err.value) and message in str(err.value)


def test_missing_and_duplicate_turns(sessions, tmp_path, good_sheet):
    rows = read_csv(good_sheet)
    write_csv(tmp_path / "short.csv", rows[:-1])
    with pytest.raises(ReviewError, match=r"no decision for 1 turn\(s\): w2-0001 turn 1"):
        import_reviews(sessions, good_sheet, tmp_path / "short.csv", execute=FakeExecutor())
    write_csv(tmp_path / "dup.csv", rows + rows[:1])
    with pytest.raises(ReviewError, match="row 9: session 'w1-0001' turn 0 is reviewed twice"):
        import_reviews(sessions, good_sheet, tmp_path / "dup.csv", execute=FakeExecutor())


def test_jsonl_errors_name_the_line(sessions, tmp_path):
    export_review(sessions, tmp_path / "s.jsonl")
    rows = fill(read_jsonl(tmp_path / "s.jsonl"), DECISIONS_A)
    rows[4]["revised_cypher"] = ""  # ("w1-0002", 1) is a revise
    write_jsonl(tmp_path / "s.jsonl", rows)
    with pytest.raises(ReviewError, match=r"s\.jsonl, line 5: decision is revise but revised_cypher is empty"):
        import_reviews(sessions, tmp_path / "s.jsonl", tmp_path / "s.jsonl", execute=FakeExecutor())
