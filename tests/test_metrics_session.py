"""Session-level metrics on hand-made turn records with hand-computed expectations."""

from __future__ import annotations

import pytest

from scoring.metrics.actions import action_usage, budget_exhaustion_rate, ex_excluding_cliff
from scoring.metrics.bleu import corpus_gleu, cypher_tokens, gleu_records, sentence_gleu
from scoring.metrics.breakdown import breakdown, breakdowns
from scoring.metrics.cer import cer, conditional_error_rate
from scoring.metrics.sem import sem, session_exact_match
from scoring.metrics.significance import bootstrap_ci, paired_bootstrap, rank_correlation
from scoring.metrics.tokens import clean_output, count_tokens, tokens_per_session

PHEN = {"none": "OPENING", "expand": "EXPAND", "narrow": "FILTER", "topic_shift": "TOPIC_SHIFT",
        "aggregate": "AGG_COUNT", "contrast": "CONTRAST", "pivot": "PIVOT"}


def rec(sid, world, persona, i, mode, ex, *, text=None, infra=None, actions=(), budget=None, cliff=False,
        protocol="guided", pred="MATCH (n) RETURN n", gold="MATCH (n) RETURN n"):
    return {"session_id": sid, "world": world, "persona": persona, "turn_index": i, "phenomenon": PHEN[mode],
            "chain_mode": mode, "depends_on": None if mode in ("none", "topic_shift") else i - 1,
            "protocol": protocol, "prediction": pred, "gold_cypher": gold, "ex": ex, "ex_relaxed": ex,
            "psjs": None if ex is None else float(ex), "actions": [{"type": t, "payload": ""} for t in actions],
            "budget_left": budget, "cliff": cliff, "infra_error": infra, "output_text": text}


# A guided run: four sessions; S3's last turn hit an infrastructure error.
RUN = [
    rec("S1", "ancient_empire", "journalist", 0, "none", 1, text="<think>a b c</think>SUBMIT_ANSWER MATCH (n) RETURN n"),
    rec("S1", "ancient_empire", "journalist", 1, "expand", 0, text="reasoning here </think> answer one"),
    rec("S1", "ancient_empire", "journalist", 2, "narrow", 0, text="x y <think> unclosed reasoning"),
    rec("S1", "ancient_empire", "journalist", 3, "topic_shift", 0, text=None),
    rec("S2", "magic_academy", "student", 0, "none", 0, text="a b c"),
    rec("S2", "magic_academy", "student", 1, "aggregate", 1, text=""),
    rec("S2", "magic_academy", "student", 2, "contrast", 1, text="<THINK>q</THINK>d e"),
    rec("S3", "ancient_empire", "student", 0, "none", 1, text="one"),
    rec("S3", "ancient_empire", "student", 1, "expand", 1, text="two words"),
    rec("S3", "ancient_empire", "student", 2, "expand", None, text="ignored words here", infra="Neo4j down"),
    rec("S4", "stellar_colony", "journalist", 0, "none", 1, text="a"),
    rec("S4", "stellar_colony", "journalist", 1, "pivot", 1, text="b c d"),
]


def test_sem():
    res = session_exact_match(RUN)
    assert res["per_session"] == {"S1": 0, "S2": 0, "S4": 1}
    assert res["sem"] == pytest.approx(1 / 3)
    assert (res["sessions"], res["excluded_sessions"], res["excluded_turns"]) == (3, 1, 1)
    assert sem(RUN[::-1]) == pytest.approx(1 / 3)  # record order does not matter
    assert sem([]) is None


def test_cer():
    res = conditional_error_rate(RUN)
    # conditioned: S1 T3 (after S1 T2 failed; fails too) and S2 T2 (after S2 T1 failed; succeeds)
    assert (res["conditioned"], res["errors"], res["cer"]) == (2, 1, 0.5)
    assert res["by_position"] == {2: {"cer": 0.0, "conditioned": 1, "errors": 0},
                                  3: {"cer": 1.0, "conditioned": 1, "errors": 1}}
    assert res["excluded_turns"] == 1
    assert cer([r for r in RUN if r["session_id"] != "S2"]) == 1.0
    assert cer([r for r in RUN if r["session_id"] == "S4"]) is None


def test_cer_topic_shift_is_not_chain_dependent_and_depends_on_mode():
    recs = [rec("A", "w", "p", 0, "none", 0), rec("A", "w", "p", 1, "topic_shift", 0),
            rec("A", "w", "p", 2, "expand", 0)]
    recs[2]["depends_on"] = 0
    assert conditional_error_rate(recs)["conditioned"] == 1  # only T3 counts (T2 is a topic shift)
    recs[0]["ex"] = 1
    assert cer(recs) == 1.0 and cer(recs, condition_on="depends_on") is None


def test_clean_output_and_tokens():
    assert clean_output("<think>a b</think>x") == "x"
    assert clean_output("before</think>after") == "after"
    assert clean_output("keep <think>drop") == "keep "
    assert clean_output("<think>1</think>a<think>2</think>b") == "ab"
    assert clean_output(None) == ""
    assert count_tokens("a b  c") == 3
    assert count_tokens("abcd", tokenizer=lambda t: list(t)) == 4
    assert count_tokens("abcd", tokenizer=lambda t: 7) == 7

    class Tok:
        def encode(self, text, add_special_tokens=True):
            return text.split("b")

    assert count_tokens("abab", tokenizer=Tok()) == 3


def test_tokens_per_session():
    res = tokens_per_session(RUN)
    assert res["per_session"] == {"S1": 5 + 2 + 2 + 0, "S2": 3 + 0 + 2, "S3": 1 + 2, "S4": 1 + 3}
    assert res["tok_s"] == pytest.approx(21 / 4)
    assert res["excluded_turns"] == 1
    assert tokens_per_session(RUN, tokenizer=len)["per_session"]["S4"] == 1 + 5


# An agentic run: shared budgets; X ran out (T3 is a cliff turn written with ex None); Z's T2 failed.
AGENTIC = [
    rec("X", "w", "p", 0, "none", 1, actions=["INSPECT_SCHEMA", "EXECUTE_CYPHER", "SUBMIT_ANSWER"], budget=3,
        protocol="agentic"),
    rec("X", "w", "p", 1, "expand", 0, actions=["EXECUTE_CYPHER", "EXECUTE_CYPHER", "INVALID"], budget=0,
        protocol="agentic"),
    rec("X", "w", "p", 2, "expand", None, budget=0, cliff=True, pred=None, protocol="agentic"),
    rec("Y", "w", "p", 0, "none", 1, actions=["SEARCH_VALUES", "ASK_USER", "SUBMIT_ANSWER"], budget=3,
        protocol="agentic"),
    rec("Y", "w", "p", 1, "expand", 1, actions=["EXECUTE_CYPHER", "SUBMIT_ANSWER"], budget=1, protocol="agentic"),
    rec("Z", "w", "p", 0, "none", 0, actions=["EXECUTE_CYPHER", "SUBMIT_ANSWER"], budget=2, protocol="agentic"),
    rec("Z", "w", "p", 1, "expand", None, actions=["EXECUTE_CYPHER"], budget=1, infra="API 503",
        protocol="agentic"),
]


def test_action_usage():
    res = action_usage(AGENTIC)
    assert res["counts"] == {"EXECUTE_CYPHER": 5, "INSPECT_SCHEMA": 1, "SEARCH_VALUES": 1, "ASK_USER": 1,
                             "INVALID": 1}
    assert res["total"] == 9 and res["submits"] == 4 and res["excluded_turns"] == 1
    assert res["fractions"]["EXECUTE_CYPHER"] == pytest.approx(5 / 9)
    assert res["fractions"]["INSPECT_SCHEMA"] == pytest.approx(1 / 9)
    assert sum(res["fractions"].values()) == pytest.approx(1.0)
    assert action_usage([])["fractions"]["ASK_USER"] is None


def test_budget_exhaustion_and_cliff():
    res = budget_exhaustion_rate(AGENTIC)
    assert (res["sessions"], res["exhausted"]) == (3, 1)
    assert res["rate"] == pytest.approx(1 / 3)
    assert budget_exhaustion_rate(RUN)["rate"] is None  # guided: no budget
    res = ex_excluding_cliff(AGENTIC)
    assert res["ex_all"] == pytest.approx(3 / 6)  # the cliff turn counts as EX = 0
    assert res["ex"] == pytest.approx(3 / 5)
    assert (res["turns"], res["cliff_turns"], res["excluded_turns"]) == (5, 1, 1)
    assert sem(AGENTIC) == pytest.approx(1 / 2)  # X fails (cliff), Y passes, Z excluded


def test_bleu_by_hand():
    assert cypher_tokens("MATCH (n:Emperor) return n.`name`, Count(*)") == \
        ["MATCH", "(", "n", ":", "Emperor", ")", "RETURN", "n", ".", "name", ",", "COUNT", "(", "*", ")"]
    assert sentence_gleu("MATCH (n) RETURN n", "MATCH (n) RETURN n") == 1.0
    assert sentence_gleu("match (n) return n", "MATCH (n) RETURN n") == 1.0
    # 18 n-grams each; shared: 4 unigrams (MATCH ( ) RETURN) and 2 bigrams (MATCH ( and ) RETURN)
    assert sentence_gleu("MATCH (n) RETURN n", "MATCH (m) RETURN m") == pytest.approx(6 / 18)
    # precision 3/3, recall 3/10
    assert sentence_gleu("RETURN n", "RETURN n LIMIT 1") == pytest.approx(0.3)
    assert sentence_gleu(None, "RETURN n") == 0.0
    assert sentence_gleu("", "") == 1.0
    assert corpus_gleu(["MATCH (n) RETURN n", None], ["MATCH (n) RETURN n", "MATCH (n) RETURN n"]) == 0.5
    assert corpus_gleu([], []) is None
    recs = [rec("A", "w", "p", 0, "none", 1, pred="MATCH (n) RETURN n", gold="MATCH (m) RETURN m"),
            rec("A", "w", "p", 1, "expand", 1, pred="RETURN n", gold="RETURN n LIMIT 1"),
            rec("A", "w", "p", 2, "expand", None, infra="down")]
    res = gleu_records(recs)
    assert res["sentence_mean"] == pytest.approx((6 / 18 + 0.3) / 2)
    assert res["google_bleu"] == pytest.approx(min(9 / 21, 9 / 28))
    assert (res["turns"], res["excluded_turns"]) == (2, 1)


def test_bleu_agrees_with_nltk_by_sentence_and_differs_by_corpus_as_documented():
    gleu_score = pytest.importorskip("nltk.translate.gleu_score")
    golds = ["MATCH (e:Emperor)-[:GOVERNS]->(p:Province) WHERE e.name = 'A' RETURN p.name AS name",
             "MATCH (n) RETURN count(n) AS count", "RETURN n LIMIT 1", "MATCH (n) RETURN n"]
    preds = ["match (x:Emperor)-[:GOVERNS]->(p:Province) WHERE x.name = 'B' RETURN p.name AS name ORDER BY name",
             "MATCH (n) RETURN n", "RETURN n", "MATCH (n) RETURN n LIMIT 1"]
    for pred, gold in zip(preds, golds):
        ours = sentence_gleu(pred, gold)
        assert 0 < ours < 1 and ours == gleu_score.sentence_gleu([cypher_tokens(gold)], cypher_tokens(pred))
    # the corpus forms: ours takes min(precision, recall) of the summed counts, NLTK sums per-pair maxima
    p, g = preds[2:], golds[2:]
    assert corpus_gleu(p, g) == pytest.approx(0.724, abs=1e-3)
    assert gleu_score.corpus_gleu([[cypher_tokens(x)] for x in g], [cypher_tokens(x) for x in p]) == \
        pytest.approx(0.583, abs=1e-3)
    assert gleu_score.sentence_gleu([[]], []) == 0.0 and sentence_gleu("", "") == 1.0  # the documented edge


def test_breakdowns():
    world = breakdown(RUN, "world")["groups"]
    assert world == {"ancient_empire": {"mean": 0.5, "n": 6}, "magic_academy": {"mean": pytest.approx(2 / 3), "n": 3},
                     "stellar_colony": {"mean": 1.0, "n": 2}}
    persona = breakdown(RUN, "persona")["groups"]
    assert persona == {"journalist": {"mean": 0.5, "n": 6}, "student": {"mean": 0.8, "n": 5}}
    pos = breakdown(RUN, "turn_position")["groups"]
    assert list(pos) == [1, 2, 3, 4]
    assert [pos[k]["mean"] for k in pos] == [0.75, 0.75, 0.5, 0.0]
    mode = breakdown(RUN, "chain_mode")["groups"]
    assert mode["expand"] == {"mean": 0.5, "n": 2} and mode["none"] == {"mean": 0.75, "n": 4}
    assert breakdown(RUN, "phenomenon")["groups"]["FILTER"] == {"mean": 0.0, "n": 1}
    everything = breakdowns(RUN)
    assert everything["world"]["psjs"]["stellar_colony"] == {"mean": 1.0, "n": 2}
    assert everything["excluded_turns"] == 1


def _sessions(values_per_session, prefix="s"):
    return [rec(f"{prefix}{i}", "w", "p", t, "none" if t == 0 else "expand", v)
            for i, vals in enumerate(values_per_session) for t, v in enumerate(vals)]


def test_bootstrap_ci():
    two = _sessions([[1], [0]])
    res = bootstrap_ci(two, seed=1)
    assert res["mean"] == 0.5 and res["resamples"] == 10_000 and res["sessions"] == 2
    assert (res["low"], res["high"]) == (0.0, 1.0)  # P(both resampled sessions are s1) = 1/4 > 2.5%
    constant = _sessions([[1, 1], [1], [1, 1, 1]])
    res = bootstrap_ci(constant)
    assert (res["mean"], res["low"], res["high"]) == (1.0, 1.0, 1.0)
    mixed = _sessions([[1, 0, 1], [0, 0], [1], [1, 1, 0, 0], [0], [1, 1]] * 5)
    a, b = bootstrap_ci(mixed, seed=7), bootstrap_ci(mixed, seed=7)
    assert a == b  # seedable
    assert a["mean"] == pytest.approx(7 / 13)  # pooled over turns, not averaged over sessions
    assert a["low"] < a["mean"] < a["high"]
    sem_ci = bootstrap_ci(mixed, "sem", resamples=2000)
    assert sem_ci["mean"] == pytest.approx(2 / 6) and sem_ci["low"] <= sem_ci["mean"] <= sem_ci["high"]
    assert bootstrap_ci([])["mean"] is None
    lone = bootstrap_ci(_sessions([[1, 0, 1]]))
    assert lone["mean"] == pytest.approx(2 / 3) and (lone["low"], lone["high"]) == (None, None)


def test_paired_bootstrap():
    base = _sessions([[1, 0], [0, 0, 1], [1], [0, 1]] * 5)
    same = paired_bootstrap(base, [dict(r) for r in base])
    assert same["delta"] == 0.0 and same["p_value"] == 1.0 and not same["significant"]
    better = [dict(r, ex=1) for r in base]
    res = paired_bootstrap(better, base, seed=3)
    assert res["delta"] == pytest.approx(1 - 4 / 8)
    assert res["significant"] and res["p_value"] == pytest.approx(1 / 10_001)
    assert res["low"] > 0
    # pairing: a turn scored in only one run is left out of both
    b = [dict(r) for r in base]
    b[0]["ex"], b[0]["infra_error"] = None, "down"
    assert paired_bootstrap(base, b)["turns"] == len(base) - 1
    with pytest.raises(ValueError):
        paired_bootstrap(base, _sessions([[1]], prefix="other"))
    # one shared session: nothing to resample, so no interval and no p (not a zero-width interval, p = 1)
    one = _sessions([[1, 1, 0]])
    lone = paired_bootstrap(one, [dict(r, ex=0) for r in one])
    assert lone["delta"] == pytest.approx(2 / 3) and lone["sessions"] == 1
    assert (lone["low"], lone["high"], lone["p_value"], lone["significant"]) == (None, None, None, False)


def test_rank_correlation():
    res = rank_correlation({"a": 0.9, "b": 0.8, "c": 0.7, "d": 0.6}, {"a": 0.6, "b": 0.7, "c": 0.8, "d": 0.9})
    assert res["rho"] == pytest.approx(-1.0)
    # ranks 1,2,3,4 vs 1,3,2,4: rho = 1 - 6 * 2 / (4 * 15) = 0.8
    res = rank_correlation({"a": 4, "b": 3, "c": 2, "d": 1, "x": 9}, {"a": 40, "b": 20, "c": 30, "d": 10})
    assert res["rho"] == pytest.approx(0.8) and res["n"] == 4 and res["models"] == ["a", "b", "c", "d"]
    assert rank_correlation({"a": 1, "b": 2}, {"a": 1, "b": 2})["rho"] is None
