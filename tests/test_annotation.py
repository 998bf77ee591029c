"""Review round trip: Cohen's kappa on hand-computed examples, export -> two edited sheets -> import.

The round-trip tests run on the real project Neo4j: the sessions are built on two shipped worlds
(ancient_empire, merchant_harbor) with gold Cypher whose gold rows are what the safe executor returns
(computed once per module, so they follow the worlds). Revised gold is re-executed through the real
``graphs.executor.execute``, wrapped by ``RecordingExecutor`` only to record which queries ran; failed
revisions are queries Neo4j or the safe executor really rejects (a syntax error, a write, a result past
the row cap).
"""

from __future__ import annotations

import copy
import csv
import json

import pytest

from benchmark.annotation import (SHEET_COLUMNS, ReviewError, cohens_kappa, export_review, import_reviews,
                                  write_review_report)
from benchmark.session import OPENING, PHENOMENA, Session, Turn
from graphs.executor import DEFAULT_MAX_ROWS, QueryResult, execute


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

W1, W2 = "ancient_empire", "merchant_harbor"
S1, S2, S3 = f"{W1}-0001", f"{W1}-0002", f"{W2}-0001"

EMPERORS = "MATCH (e:Emperor) RETURN e.name AS name ORDER BY name"
GOVERNED = "MATCH (:Emperor)-[:GOVERNS]->(p:Province) RETURN DISTINCT p.name AS name ORDER BY name"
LEGIONS = ("MATCH (:Emperor)-[:GOVERNS]->(:Province)-[:GARRISONS]->(l:Legion) "
           "RETURN DISTINCT l.name AS name ORDER BY name")
PROVINCES = "MATCH (p:Province) RETURN p.name AS name ORDER BY name"
GOVERNORS = "MATCH (e:Emperor)-[:GOVERNS]->(:Province) RETURN DISTINCT e.name AS name ORDER BY name"
TRADERS = "MATCH (t:Trader) RETURN t.name AS name ORDER BY name"
SMUGGLERS = "MATCH (t:Trader) WHERE t.smuggler RETURN t.name AS name ORDER BY name"

# revisions: all valid reads except BROKEN, so "not executed" is about the merge, not the query
REV_A = "MATCH (e:Emperor {deified: true}) RETURN e.name AS name, e.dynasty AS dynasty ORDER BY name"
REV_B = "MATCH (e:Emperor) RETURN e.name AS name, e.dynasty AS dynasty ORDER BY name"
DROPPED = "MATCH (e:Emperor)-[:GOVERNS]->(p:Province) RETURN e.name AS name, count(p) AS provinces ORDER BY name"
BROKEN = "MATCH (t:Trader RETURN t.name AS name"  # a reviewer's typo: a real Neo4j syntax error
# home_port is often null: the nulls must survive re-execution
REV_B2 = "MATCH (t:Trader) RETURN t.name AS trader, t.home_port AS home_port ORDER BY trader"
# 30 emperors x 60 provinces: past the executor's default row cap
PAST_CAP = "MATCH (e:Emperor), (p:Province) RETURN e.name AS emperor, p.name AS province"
WRITE = "MATCH (e:Emperor) SET e.deified = true RETURN e.name AS name"  # refused by the safe executor

GOLDS = {W1: [EMPERORS, GOVERNED, LEGIONS, PROVINCES, GOVERNORS, REV_A], W2: [TRADERS, SMUGGLERS, REV_B2]}


@pytest.fixture(scope="module")
def results(neo4j_server) -> dict[str, QueryResult]:
    """query -> what the real Neo4j returns for it; gold rows are never written by hand."""
    out = {}
    for world, queries in GOLDS.items():
        for q in queries:
            r = execute(world, q)
            assert r.error is None and not r.truncated and r.rows, (q, r.error)
            out[q] = r
    return out


class RecordingExecutor:
    """The real ``graphs.executor.execute``, recording the (world, query) of each call."""

    def __init__(self):
        self.calls: list[tuple[str, str]] = []

    def __call__(self, world, query, **kwargs) -> QueryResult:
        self.calls.append((world, query))
        return execute(world, query, **kwargs)


def make_turn(index: int, utterance: str, cypher: str, results: dict, label: str, phenomenon: str = "EXPAND",
              ambiguous: bool = False) -> Turn:
    r = results[cypher]
    phenomenon = OPENING if index == 0 else phenomenon
    return Turn(index=index, utterance=utterance, gold_cypher=cypher, gold_columns=list(r.columns),
                gold_rows=[list(row) for row in r.rows], phenomenon=phenomenon,
                chain_mode="none" if index == 0 else PHENOMENA[phenomenon][1],
                depends_on=None if index == 0 else index - 1,
                ambiguity_info={"utterance": "What do they govern?", "clarification": "The provinces."}
                if ambiguous else None,
                gold_key_values=[{"label": label, "property": "name", "value": r.rows[0][0]}],
                gold_triples=[f"(:{label})"])


@pytest.fixture
def sessions(results) -> list[Session]:
    return [
        Session(S1, W1, "journalist", [
            make_turn(0, "Which emperors are there?", EMPERORS, results, "Emperor"),
            make_turn(1, "Which provinces do they govern?", GOVERNED, results, "Province", ambiguous=True),
            make_turn(2, "And the legions garrisoned there?", LEGIONS, results, "Legion"),
        ]),
        Session(S2, W1, "student", [
            make_turn(0, "List the provinces.", PROVINCES, results, "Province"),
            make_turn(1, "Who governs them?", GOVERNORS, results, "Emperor"),
        ]),
        Session(S3, W2, "casual_user", [
            make_turn(0, "Show the traders.", TRADERS, results, "Trader"),
            make_turn(1, "Which of them smuggle?", SMUGGLERS, results, "Trader", phenomenon="FILTER"),
        ]),
    ]


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
    (S1, 0): ("revise", REV_A),     # both revise: A's revision wins
    (S1, 1): ("accept", ""),
    (S1, 2): ("reject", ""),        # only A rejects: the turn stays
    (S2, 0): ("reject", ""),        # both reject: the session is dropped
    (S2, 1): ("revise", DROPPED),   # never executed: its session is dropped
    (S3, 0): ("accept", ""),
    (S3, 1): ("accept", ""),
}
DECISIONS_B = {
    (S1, 0): ("revise", REV_B),
    (S1, 1): ("accept", ""),
    (S1, 2): ("accept", ""),
    (S2, 0): ("reject", ""),
    (S2, 1): ("accept", ""),
    (S3, 0): ("revise", BROKEN),    # fails to execute: reported, original gold kept
    (S3, 1): ("revise", REV_B2),    # only B revised: B's revision applies
}


@pytest.mark.neo4j
def test_export_sheet_contents(sessions, tmp_path):
    export_review(sessions, tmp_path / "sheet.csv")
    rows = read_csv(tmp_path / "sheet.csv")
    assert len(rows) == 7 and tuple(rows[0]) == SHEET_COLUMNS
    first, ambiguous = rows[0], rows[1]
    assert first["previous_utterance"] == "" and first["decision"] == first["revised_cypher"] == ""
    preview = json.loads(first["gold_result_preview"])
    gold = sessions[0].turns[0].gold_rows
    assert len(gold) > 5  # so the preview must cut
    assert preview == {"columns": ["name"], "rows": gold[:5], "total_rows": len(gold)}
    # the shown (ambiguous) wording, with its clarification; the previous turn's wording for context
    assert ambiguous["utterance"] == "What do they govern?" and ambiguous["clarification"] == "The provinces."
    assert ambiguous["previous_utterance"] == "Which emperors are there?"

    export_review(sessions, tmp_path / "sheet.jsonl")
    jrows = read_jsonl(tmp_path / "sheet.jsonl")
    assert [r["turn_index"] for r in jrows] == [0, 1, 2, 0, 1, 0, 1]
    assert {k: str(v) for k, v in jrows[2].items()} == rows[2]  # same content in both formats


@pytest.mark.neo4j
def test_round_trip(sessions, results, tmp_path):
    original = copy.deepcopy(sessions)
    export_review(sessions, tmp_path / "a.csv")
    export_review(sessions, tmp_path / "b.jsonl")
    write_csv(tmp_path / "a.csv", fill(read_csv(tmp_path / "a.csv"), DECISIONS_A))
    write_jsonl(tmp_path / "b.jsonl", fill(read_jsonl(tmp_path / "b.jsonl"), DECISIONS_B))

    recorder = RecordingExecutor()
    out = import_reviews(sessions, tmp_path / "a.csv", tmp_path / "b.jsonl", execute=recorder)

    # keep/reject per turn: A = k k r r k k k (5 keep, 2 reject), B = k k k r k k k (6 keep, 1 reject)
    # p_o = 6/7; p_e = (5*6 + 2*1)/49 = 32/49; kappa = (42/49 - 32/49) / (17/49) = 10/17
    assert out.kappa == pytest.approx(10 / 17)
    assert out.observed_agreement == pytest.approx(6 / 7)
    assert out.expected_agreement == pytest.approx(32 / 49)
    assert not out.kappa_degenerate
    # three-way decisions agree on 3 of 7 turns (revise/revise, accept/accept, reject/reject)
    assert out.decision_agreement == pytest.approx(3 / 7)
    assert [(d.session_id, d.turn_index) for d in out.disagreements] == [(S1, 2), (S2, 1), (S3, 0), (S3, 1)]
    assert out.confusion["revise"]["revise"] == 1 and out.confusion["reject"]["accept"] == 1

    assert (out.n_turns, out.n_rejected_turns, out.n_dropped_sessions, out.n_revised) == (7, 1, 1, 2)
    assert [s.id for s in out.sessions] == [S1, S3]
    assert recorder.calls == [(W1, REV_A), (W2, BROKEN), (W2, REV_B2)]  # not REV_B, not DROPPED

    s1, s3 = out.sessions
    rev_a, rev_b2 = results[REV_A], results[REV_B2]
    assert s1.turns[0].gold_cypher == REV_A
    assert (s1.turns[0].gold_columns, s1.turns[0].gold_rows) == (["name", "dynasty"], rev_a.rows)
    assert s1.turns[0].gold_rows != original[0].turns[0].gold_rows  # the gold really changed
    assert s1.turns[0].gold_key_values == original[0].turns[0].gold_key_values
    assert s1.turns[1:] == original[0].turns[1:]
    assert s3.turns[0] == original[2].turns[0]  # failed revision: original gold kept
    error = execute(W2, BROKEN).error
    assert error is not None and error.kind == "syntax"
    assert out.revision_errors == [(S3, 0, f"syntax: {error.message}")]
    assert (s3.turns[1].gold_cypher, s3.turns[1].gold_columns, s3.turns[1].gold_rows) == (
        REV_B2, ["trader", "home_port"], rev_b2.rows)
    assert any(row[1] is None for row in s3.turns[1].gold_rows)  # nulls came through
    assert sessions == original  # the input is not modified

    write_review_report(out, tmp_path / "report.md")
    report = (tmp_path / "report.md").read_text()
    assert "**0.588**" in report and "moderate" in report
    # Neo4j's message spans lines and quotes '|': the table cell must keep it on one escaped line
    assert "\n" in error.message and "|" in error.message
    cell = error.message.replace("|", "\\|").replace("\n", " ")
    assert f"| {S3} | 0 | syntax: {cell} |" in report
    assert f"| {S1} | 2 | reject | accept |" in report
    assert "revisions applied: 2" in report and "sessions dropped: 1" in report


@pytest.mark.neo4j
def test_all_accept_is_degenerate(sessions, tmp_path):
    export_review(sessions, tmp_path / "a.jsonl")
    rows = read_jsonl(tmp_path / "a.jsonl")
    for r in rows:
        r["decision"] = "Accept "  # case and spacing as a person types them
    write_jsonl(tmp_path / "a.jsonl", rows)
    recorder = RecordingExecutor()
    out = import_reviews(sessions, tmp_path / "a.jsonl", tmp_path / "a.jsonl", execute=recorder)
    assert out.kappa == 1.0 and out.kappa_degenerate
    assert out.sessions == sessions and out.disagreements == [] and out.n_revised == 0
    assert recorder.calls == []  # nothing revised, nothing re-executed
    write_review_report(out, tmp_path / "r.md")
    assert "degenerate" in (tmp_path / "r.md").read_text()


@pytest.mark.neo4j
@pytest.mark.parametrize("revised, message", [
    (PAST_CAP, f"the result was truncated at {DEFAULT_MAX_ROWS} rows"),
    (WRITE, "refused: write clause SET is not allowed"),
], ids=["past_row_cap", "write"])
def test_failed_revision_is_an_error(sessions, tmp_path, revised, message):
    if revised == PAST_CAP:  # the cap is really exceeded, not just reached
        assert execute(W1, "MATCH (e:Emperor), (p:Province) RETURN count(*)").rows[0][0] > DEFAULT_MAX_ROWS
    decisions = {k: ("accept", "") for k in DECISIONS_A}
    decisions[(S2, 1)] = ("revise", revised)
    export_review(sessions, tmp_path / "a.csv")
    write_csv(tmp_path / "a.csv", fill(read_csv(tmp_path / "a.csv"), decisions))
    recorder = RecordingExecutor()
    out = import_reviews(sessions, tmp_path / "a.csv", tmp_path / "a.csv", execute=recorder)
    assert recorder.calls == [(W1, revised)]  # it did reach the database
    assert out.n_revised == 0 and len(out.revision_errors) == 1
    assert out.revision_errors[0][:2] == (S2, 1) and message in out.revision_errors[0][2]
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


@pytest.mark.neo4j
@pytest.mark.parametrize("changes, message", [
    ({"decision": "maybe"}, "decision is 'maybe'"),
    ({"decision": ""}, "decision is empty"),
    ({"session_id": "nope-0001"}, "unknown turn (session 'nope-0001', turn 1)"),
    ({"turn_index": "9"}, f"unknown turn (session '{S1}', turn 9)"),
    ({"turn_index": "one"}, "is not a whole number"),
    ({"decision": "revise", "revised_cypher": "  "}, "revise but revised_cypher is empty"),
])
def test_invalid_rows_name_file_and_row(sessions, tmp_path, good_sheet, changes, message):
    bad = broken_sheet(tmp_path, good_sheet, 1, **changes)  # the second data row: spreadsheet row 3
    recorder = RecordingExecutor()
    with pytest.raises(ReviewError) as err:
        import_reviews(sessions, good_sheet, bad, execute=recorder)
    assert f"{bad}, row 3" in str(err.value) and message in str(err.value)
    assert recorder.calls == []  # sheets are validated before anything runs


@pytest.mark.neo4j
def test_missing_and_duplicate_turns(sessions, tmp_path, good_sheet):
    rows = read_csv(good_sheet)
    write_csv(tmp_path / "short.csv", rows[:-1])
    with pytest.raises(ReviewError, match=rf"no decision for 1 turn\(s\): {S3} turn 1"):
        import_reviews(sessions, good_sheet, tmp_path / "short.csv", execute=RecordingExecutor())
    write_csv(tmp_path / "dup.csv", rows + rows[:1])
    with pytest.raises(ReviewError, match=f"row 9: session '{S1}' turn 0 is reviewed twice"):
        import_reviews(sessions, good_sheet, tmp_path / "dup.csv", execute=RecordingExecutor())


@pytest.mark.neo4j
def test_jsonl_errors_name_the_line(sessions, tmp_path):
    export_review(sessions, tmp_path / "s.jsonl")
    rows = fill(read_jsonl(tmp_path / "s.jsonl"), DECISIONS_A)
    rows[4]["revised_cypher"] = ""  # (S2, 1) is a revise
    write_jsonl(tmp_path / "s.jsonl", rows)
    with pytest.raises(ReviewError, match=r"s\.jsonl, line 5: decision is revise but revised_cypher is empty"):
        import_reviews(sessions, tmp_path / "s.jsonl", tmp_path / "s.jsonl", execute=RecordingExecutor())
