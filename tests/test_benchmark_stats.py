"""Statistics over hand-made sessions: every count and share below is worked out by hand."""

from __future__ import annotations

import pytest

from benchmark.session import CHAIN_MODES, OPENING, PERSONAS, PHENOMENA, Session, Turn
from benchmark.stats import render_stats, stats_dict


def turn(index: int, phenomenon: str, depends_on: int | None, n_rows: int, ambiguous: bool = False) -> Turn:
    chain_mode = "none" if phenomenon == OPENING else PHENOMENA[phenomenon][1]
    return Turn(index=index, utterance=f"u{index}", gold_cypher="RETURN 1", gold_columns=["x"],
                gold_rows=[[i] for i in range(n_rows)], phenomenon=phenomenon, chain_mode=chain_mode,
                depends_on=depends_on,
                ambiguity_info={"utterance": "vague", "clarification": "c"} if ambiguous else None)


@pytest.fixture
def sessions() -> list[Session]:
    return [
        Session("w1-0001", "w1", "journalist", [
            turn(0, OPENING, None, 1),
            turn(1, "EXPAND", 0, 3),
            turn(2, "AGG_COUNT", 1, 1),
            turn(3, "TOPIC_SHIFT", None, 0),
            turn(4, "FILTER", 2, 150),  # back-reference: builds on turn 2, past the topic shift
        ]),
        Session("w2-0001", "w2", "student", [
            turn(0, OPENING, None, 10),
            turn(1, "THRESHOLD", 0, 21, ambiguous=True),
        ]),
        Session("w1-0002", "w1", "journalist", [turn(0, OPENING, None, 100)]),
    ]


def test_totals_and_turns_per_session(sessions):
    st = stats_dict(sessions)
    assert st["sessions"] == 3 and st["turns"] == 8
    tps = st["turns_per_session"]
    assert tps["mean"] == pytest.approx(8 / 3, abs=1e-4)
    assert (tps["min"], tps["max"]) == (1, 5)
    assert tps["histogram"] == {"1": 1, "2": 1, "5": 1}


def test_phenomena_and_chain_modes(sessions):
    st = stats_dict(sessions)
    ph = st["phenomena"]
    assert list(ph) == [OPENING, *PHENOMENA]  # all 14 rows, canonical order, zeros included
    assert ph[OPENING] == {"count": 3, "share": 0.375}
    for name in ("EXPAND", "AGG_COUNT", "TOPIC_SHIFT", "FILTER", "THRESHOLD"):
        assert ph[name] == {"count": 1, "share": 0.125}
    assert ph["PIVOT"] == {"count": 0, "share": 0.0}
    assert sum(v["count"] for v in ph.values()) == 8

    cm = st["chain_modes"]
    assert list(cm) == list(CHAIN_MODES)
    assert {k: v["count"] for k, v in cm.items()} == {
        "none": 3, "topic_shift": 1, "expand": 1, "pivot": 0, "agg_numeric": 0, "aggregate": 1,
        "contrast": 0, "value_narrow": 1, "narrow": 1}


def test_personas_deviation_from_uniform(sessions):
    st = stats_dict(sessions)["personas"]
    assert list(st) == list(PERSONAS)
    # uniform expectation: 3 sessions / 10 personas = 0.3 each
    assert st["journalist"]["count"] == 2
    assert st["journalist"]["share"] == pytest.approx(2 / 3, abs=1e-6)
    assert st["journalist"]["deviation_pct"] == pytest.approx((2 - 0.3) / 0.3 * 100, abs=0.01)  # +566.67
    assert st["student"]["deviation_pct"] == pytest.approx((1 - 0.3) / 0.3 * 100, abs=0.01)  # +233.33
    assert st["verbose_user"] == {"count": 0, "share": 0.0, "deviation_pct": -100.0}


def test_worlds_result_sizes_ambiguity_back_references(sessions):
    st = stats_dict(sessions)
    assert st["worlds"] == {"w1": {"sessions": 2, "turns": 6, "share_of_turns": 0.75},
                            "w2": {"sessions": 1, "turns": 2, "share_of_turns": 0.25}}
    # rows per turn: 1, 3, 1, 0, 150, 10, 21, 100
    assert {k: v["count"] for k, v in st["result_sizes"].items()} == {
        "0": 1, "1": 2, "2-5": 1, "6-20": 1, "21-100": 2, ">100": 1}
    assert st["result_sizes"]["21-100"]["share"] == 0.25
    assert st["ambiguous_turns"] == {"count": 1, "share": 0.125}
    assert st["back_references"] == {"count": 1, "share": 0.125}


def test_world_phenomenon_matrix(sessions):
    m = stats_dict(sessions)["world_phenomenon"]
    assert set(m) == {"w1", "w2"}
    assert {k: v for k, v in m["w1"].items() if v} == {OPENING: 2, "EXPAND": 1, "AGG_COUNT": 1,
                                                       "TOPIC_SHIFT": 1, "FILTER": 1}
    assert {k: v for k, v in m["w2"].items() if v} == {OPENING: 1, "THRESHOLD": 1}
    assert len(m["w1"]) == 14


def test_unknown_labels_are_counted_not_dropped(sessions):
    odd = turn(1, "EXPAND", 0, 2)
    odd.phenomenon, odd.chain_mode = "MYSTERY", "weird"
    sessions[2].turns.append(odd)
    st = stats_dict(sessions)
    assert st["phenomena"]["MYSTERY"]["count"] == 1
    assert st["chain_modes"]["weird"]["count"] == 1
    assert sum(v["count"] for v in st["phenomena"].values()) == st["turns"] == 9


def test_render_markdown(sessions):
    md = render_stats(sessions, gate_failures={"executes": 4, "deterministic": 2}, title="Test split")
    assert md.startswith("# Test split\n")
    assert "- sessions: 3" in md and "- turns: 8" in md
    assert "mean 2.67, min 1, max 5" in md
    assert "| EXPAND | 1 | 12.5% |" in md
    assert "| PIVOT | 0 | 0.0% |" in md  # every phenomenon is listed, seen or not
    for name in (*PHENOMENA, *CHAIN_MODES, *PERSONAS):
        assert f"| {name} |" in md
    assert "| journalist | 2 | 66.7% | +566.7% |" in md
    assert "| >100 | 1 | 12.5% |" in md
    assert "| w1 | 2 | 1 | 0 | 0 | 1 |" in md  # matrix row: OPENING 2, EXPAND 1, RECURSE 0, PIVOT 0, AGG_COUNT 1
    assert "| executes | 4 |" in md and "| **total** | 6 |" in md
    assert "ambiguous turns: 1 (12.5%)" in md and "back-references" in md
    # pure: the same input renders the same text
    assert md == render_stats(sessions, gate_failures={"executes": 4, "deterministic": 2}, title="Test split")


def test_gate_failures_only_when_given(sessions):
    assert "gate_failures" not in stats_dict(sessions)
    assert stats_dict(sessions, gate_failures={"executes": 3})["gate_failures"] == {"executes": 3}


def test_empty_input():
    st = stats_dict([])
    assert st["sessions"] == 0 and st["turns_per_session"]["mean"] == 0.0
    md = render_stats([], gate_failures={}, title="Empty")
    assert "- sessions: 0" in md and "None." in md


def test_wording_overlap_between_splits():
    """Shares worked out by hand: three utterances, two distinct openings, one of them in the other split."""
    from benchmark.stats import opening, render_overlap, wording_overlap

    def said(*texts):
        return [Session("w-0001", "w", "student", [
            Turn(index=i, utterance=t, gold_cypher="RETURN 1", gold_columns=["x"], gold_rows=[[1]],
                 phenomenon=OPENING if i == 0 else "EXPAND", chain_mode="none" if i == 0 else "expand",
                 depends_on=None if i == 0 else i - 1) for i, t in enumerate(texts)])]

    assert opening("Which legions are stationed in those provinces?") == "which legions are stationed in"
    test = said("Which legions are stationed in Vor?", "Which legions are stationed in those provinces?",
                "How many of those are there?")
    train = said("Which legions are stationed in the north?", "Count them.")
    overlap = wording_overlap(test, train)
    assert overlap == {"openings": 2, "shared_openings": 1, "share_of_openings": 0.5,
                       "share_of_utterances": round(2 / 3, 6)}
    assert wording_overlap(train, test)["share_of_utterances"] == 0.5
    assert wording_overlap(test, [])["shared_openings"] == 0
    text = "\n".join(render_overlap("test", "train", overlap))
    assert "1 (50.0%)" in text and "66.7%" in text
