"""Wording variety (issue 20): the questions without a name or a value in them (counts, contrasts,
aggregates) no longer repeat word for word, the data analyst talks like a person, the persona remarks
and the optional openers and tails vary without breaking the conversation rules, and the audit
measures it. Pure Python, no database needed."""

from __future__ import annotations

import importlib.util
import random
import re
from collections import Counter
from pathlib import Path

from benchmark import templates
from benchmark.session import PERSONAS, Session, Turn
from benchmark.templates import (_CORES, _OPENERS, _PERSONA_REGISTER, _TAILS, _WRAPPERS, FIGURE_FAMILIES,
                                 is_listing_family, pool, render)

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("audit_sessions", ROOT / "scripts" / "audit_sessions.py")
audit_sessions = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(audit_sessions)

SLOTS = {"set_noun": "provinces", "target_noun": "legions", "link": "stationed in", "prop": "population"}
# pseudo-code a person does not say: calls, comparison signs, "Apply a numeric threshold", "Aggregate: ..."
CODE_LIKE = re.compile(r"[()=<>]|\bapply an? \w+ (?:threshold|predicate|check|condition)\b|"
                       r"\bset difference\b|\baggregate:", re.I)


def _session_of(family: str, persona: str, seed: int, split: str = "test") -> str:
    """``family`` asked as the fourth turn of a session whose first three used nothing."""
    return render(family, persona, SLOTS, random.Random(seed), turn=3, used=set(), split=split)


def test_count_and_contrast_questions_have_many_wordings_in_every_persona():
    for family in ("AGG_COUNT", "CONTRAST", "AGG_AVG", "EXPAND"):
        for persona in PERSONAS:
            texts = Counter(_session_of(family, persona, seed) for seed in range(300))
            # main had 2 or 3 core wordings per register in the test pool and one wrapper sentence per
            # persona: 3 to 15 distinct texts in 300, the commonest said 44 to 153 times
            assert len(texts) >= 100, (family, persona, len(texts), texts.most_common(3))
            assert texts.most_common(1)[0][1] <= 25, (family, persona, texts.most_common(3))


def test_every_register_has_many_core_wordings_for_the_families_without_values():
    for family in ("AGG_COUNT", "CONTRAST"):
        for register, cores in _CORES[family].items():
            assert len(pool(cores, "test")) >= 7 and len(pool(cores, "train")) >= 7, (family, register)
    for family in ("AGG_MAX", "AGG_AVG", "AGG_SUM", "AGG_MIN", "EXPAND", "RECURSE", "PIVOT", "FILTER", "REFINE",
                   "THRESHOLD", "COMPOUND"):
        for register, cores in _CORES[family].items():
            assert len(cores) >= 8, (family, register, len(cores))


def test_the_data_analyst_says_no_pseudo_code():
    assert _PERSONA_REGISTER["data_analyst"] == "tech"
    said = [c for regs in _CORES.values() for c in regs["tech"]] + list(_WRAPPERS["data_analyst"])
    said += list(_OPENERS["tech"]) + list(_TAILS["tech"])
    bad = [w for w in said if CODE_LIKE.search(w.replace("{core}", "").replace("{lc}", "").strip())]
    assert not bad, bad
    # and the check itself catches what main said
    for old in ("Compute sum({prop}) over those {set_noun}.", "Filter the current {set_noun} on {prop} = {value}.",
                "Apply a numeric threshold to those {set_noun}: {prop} {op} {value}."):
        assert CODE_LIKE.search(old), old


def test_parts_are_split_between_the_pools_and_said_nowhere_else():
    lists = [*_OPENERS.values(), *_TAILS.values()]
    texts = [t for items in lists for t in items]
    assert len(texts) == len(set(texts))  # one list each, so one pool each
    for items in lists:
        test, train = set(pool(items, "test")), set(pool(items, "train"))
        assert test and train and not test & train and test | train == set(items)
    # no part says a persona's phrase (the audit would count it as that persona's remark said twice)
    for t in texts:
        assert not {p for p in audit_sessions.PERSONA_PHRASES if p in t.lower()}, t
        assert "{" not in t
    # tails fit as the wrappers do: a listing remark never after a figure, a figure remark only after one
    for register, tails in _TAILS.items():
        for family in ("AGG_COUNT", "AGG_SUM", "EXPAND"):
            for t in tails:
                if t in templates._LISTING_ONLY:
                    assert templates.wrapper_fits(t, family) == is_listing_family(family)
                if t in templates._FIGURE_ONLY:
                    assert templates.wrapper_fits(t, family) == (family in FIGURE_FAMILIES)


def test_openers_and_tails_keep_the_conversation_rules():
    openers = {o for items in _OPENERS.values() for o in items}
    tails = {t for items in _TAILS.values() for t in items}
    seen_opener = seen_tail = 0
    for persona in PERSONAS:
        for seed in range(40):
            rng, used = random.Random(seed), set()
            for turn in range(8):
                family = "OPENING_FILTERED" if turn == 0 else rng.choice(
                    ["EXPAND", "AGG_COUNT", "AGG_SUM", "CONTRAST", "THRESHOLD", "TOPIC_SHIFT_FILTERED"])
                slots = dict(SLOTS, value="arid", op="more than", prop2="climate", value2="arid")
                if turn == 5 and not family.startswith("TOPIC_SHIFT"):
                    slots["back"] = "Going back to the provinces from before"
                before = set(used)
                text = render(family, persona, slots, rng, turn=turn, used=used, split="test")
                new = used - before
                opener = new & openers
                seen_opener += bool(opener)
                seen_tail += bool(new & tails)
                assert len(opener) <= 1 and len(new & tails) <= 1
                if opener:
                    assert turn and "back" not in slots and not family.startswith("TOPIC_SHIFT"), text
                    assert text.startswith(next(iter(opener))), text  # nothing stands before it
                assert audit_sessions.lead_ins(text) <= 1, text
                assert not (turn and audit_sessions._GREETING.search(text)), text
                if turn == 0:
                    assert not audit_sessions._REFERS_BACK.search(text), text
            assert len(used) == len(set(used))
    assert seen_opener > 200 and seen_tail > 200  # both are said, often enough to matter


def test_the_verbose_user_says_different_things_in_different_turns():
    rng, used = random.Random(3), set()
    remarks = []
    for turn in range(8):
        family = "OPENING_FILTERED" if turn == 0 else ("EXPAND", "AGG_COUNT", "CONTRAST")[turn % 3]
        slots = dict(SLOTS, value="arid")
        before = set(used)
        render(family, "verbose_user", slots, rng, turn=turn, used=used, split="test")
        remarks += sorted((used - before) & set(_WRAPPERS["verbose_user"]))
    assert len(remarks) == len(set(remarks)) >= 3
    assert len(pool(_WRAPPERS["verbose_user"], "test")) >= 8


def test_rendering_with_parts_is_deterministic():
    a = [_session_of("CONTRAST", p, s) for p in PERSONAS for s in range(20)]
    b = [_session_of("CONTRAST", p, s) for p in PERSONAS for s in range(20)]
    assert a == b


def _turn(i, text, phen):
    return Turn(index=i, utterance=text, gold_cypher="MATCH (n) RETURN n", gold_columns=["n"], gold_rows=[[1]],
                phenomenon=phen, chain_mode="none" if i == 0 else "aggregate", depends_on=None if i == 0 else i - 1)


def test_the_audit_measures_repeats_cores_and_the_classifier():
    turns = [_turn(0, "Which provinces have arid as their climate?", "OPENING"),
             _turn(1, "How many provinces is that?", "AGG_COUNT"),
             _turn(2, "How many provinces is that?", "AGG_COUNT"),
             _turn(3, "Okay, how many of those provinces are there? Thanks.", "AGG_COUNT")]
    rep = audit_sessions.repeated_utterance_share(turns)
    assert rep["turns"] == 2 and rep["share"] == 0.5 and rep["top"] == [("How many provinces is that?", 2)]
    used = audit_sessions.core_wordings_used(turns)
    assert used == {"AGG_COUNT": 2, "OPENING": 1}
    sessions = []
    for w, noun in enumerate(("provinces", "reefs", "galaxies", "colonies")):
        for k in range(6):
            sessions.append(Session(id=f"{w}-{k}", world=f"world{w}", persona="student", turns=[
                _turn(0, f"Which {noun} have arid as their climate?", "OPENING"),
                _turn(1, f"How many of those {noun} are there?", "AGG_COUNT"),
                _turn(2, f"What about the other {noun}, the ones that didn't match?", "CONTRAST")]))
    clf = audit_sessions.phenomenon_classifier_accuracy(sessions)
    assert clf["tested"] == 24 and clf["accuracy"] == 1.0  # fixed wordings give the phenomenon away
    assert audit_sessions._masked_words("Keep the Quabro Tasherk ones with 40 wins.") == \
        ["keep", "the", "<name>", "<name>", "ones", "with", "<num>", "wins"]


def test_no_five_word_opening_of_an_opener_and_a_core_crosses_the_split():
    """An opener joins a core's words into a new five-word opening ("Good, and how many are ..."): every
    opener with every core of its register, in one pool, opens differently from every wording and
    every such composite of the other pool (over-approximated: the rules that keep an opener off some
    cores are not applied), so a train build and a test build still share no opening."""
    def openings(split: str) -> set[str]:
        keys = {templates.opening_key(w) for regs in _CORES.values() for cs in regs.values() for w in pool(cs, split)}
        keys |= {templates.opening_key(w) for ws in _WRAPPERS.values() for w in pool(ws, split)}
        for register, openers in _OPENERS.items():
            cores = {c for regs in _CORES.values() for c in pool(regs[register], split)}
            keys |= {templates.opening_key(o + " " + (c if o[-1] in ".!?" else templates._lc(c)))
                     for o in pool(openers, split) for c in cores}
        return keys - {""}
    test, train = openings("test"), openings("train")
    assert len(test) > 1000 and len(train) > 1000
    assert not test & train, sorted(test & train)[:5]


def test_no_sentence_opens_with_a_slot():
    """A slot's value is inserted verbatim (lower case for most nouns), so no sentence of a core starts
    with one ("Cut again. shelves not marked as chained only.")."""
    bad = [c for regs in _CORES.values() for cs in regs.values() for c in cs if re.search(r"[.?!] \{", c)]
    assert not bad, bad
