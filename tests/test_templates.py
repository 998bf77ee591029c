"""Utterance templates and the world lexicons (pure Python, no database needed).

Every family is rendered for every persona and every world with realistic slots (real labels,
relationships, properties and generated values), checking: no schema identifier or Cypher keyword leaks
into a non-technical utterance, no unfilled slot, every slot value verbatim (ambiguous families leave
out exactly the slots they must), determinism, and variety (>= 3 distinct wordings over 30 seeds)."""

from __future__ import annotations

import datetime as dt
import random
import re

import pytest

from benchmark.lexicon import FALLBACK_LINK, Lexicon, pluralize, split_identifier
from benchmark.session import PERSONAS, TECHNICAL_PERSONAS
from benchmark.templates import (AMBIGUOUS_FAMILIES, FAMILIES, FIGURE_FAMILIES, FIGURE_ONLY_REMARKS,
                                 LISTING_ONLY_REMARKS, OMITTED, PARAPHRASED, SLOTS, TemplateError, _CORES,
                                 _FIRST_TURN_ONLY, _LATER_TURNS_ONLY, _TOPIC_SHIFT_LEADS, _WRAPPERS, clarification,
                                 is_listing_family, leaks, opening_key, pool, render)
from graphs.cypher_syntax import VOCABULARY
from graphs.generator import generate
from graphs.spec import all_specs

SPECS = all_specs()
SEEDS = range(30)
CAMEL = re.compile(r"[a-z][A-Z]")
_WORLDS: dict[str, tuple] = {}


def world(name: str):
    """(spec, lexicon, a small generated graph) for one world, built once."""
    if name not in _WORLDS:
        spec = next(s for s in SPECS if s.world == name)
        _WORLDS[name] = (spec, Lexicon(spec), generate(spec, scale=0.05))
    return _WORLDS[name]


def _categorical(spec, label=None):
    out = [(n.label, p) for n in spec.nodes for p in n.properties
           if p.values and n.key != p.name and (label is None or n.label == label)]
    return out


def _numeric(spec, label=None):
    return [(n.label, p) for n in spec.nodes for p in n.properties
            if p.type in ("int", "float") and not p.values and (label is None or n.label == label)]


def make_slots(world_name: str, family: str, rng: random.Random) -> dict[str, str]:
    """Realistic slots for ``family`` in one world, the way the session builder derives them."""
    spec, lex, graph = world(world_name)
    rels = list(spec.relationships)
    if family == "RECURSE":
        rels = [r for r in rels if r.source == r.target] or rels
    rel = rng.choice(rels)
    direction = rng.choice(["forward", "backward"])
    start, end = (rel.source, rel.target) if direction == "forward" else (rel.target, rel.source)
    link = lex.link(rel.type, rel.source, rel.target, direction)
    anchor_row = rng.choice(graph.nodes[start])
    anchor_name = lex.value(anchor_row[spec.node(start).key])

    # the "current set" for chain turns: the start label of the chosen relationship
    numeric = _numeric(spec, start) or _numeric(spec)
    num_label, num_prop = rng.choice(numeric)
    observed = [row[num_prop.name] for row in graph.nodes[num_label] if row.get(num_prop.name) is not None]
    observed = observed or [num_prop.min, num_prop.max]
    categorical = _categorical(spec, num_label) or _categorical(spec)
    cat_label, cat_prop = rng.choice(categorical)
    cat2_label, cat2_prop = rng.choice(_categorical(spec, num_label) or _categorical(spec))

    set_label = num_label if family in ("AGG_MAX", "AGG_AVG", "AGG_SUM", "THRESHOLD", "COMPOUND",
                                        "PIVOT", "PIVOT_AMBIGUOUS", "AGG_MAX_AMBIGUOUS",
                                        "AGG_AVG_AMBIGUOUS", "AGG_SUM_AMBIGUOUS",
                                        "THRESHOLD_AMBIGUOUS", "THRESHOLD_AMBIGUOUS_SIZE") else start
    if family in ("FILTER", "REFINE", "OPENING_FILTERED", "TOPIC_SHIFT_FILTERED"):
        prop, value, set_label = lex.prop(cat_label, cat_prop.name), lex.value(rng.choice(cat_prop.values)), cat_label
    else:
        prop, value = lex.prop(num_label, num_prop.name), lex.value(rng.choice(observed))
    slots = {
        "target_noun": lex.noun(end) if not family.endswith("FILTERED") else lex.noun(set_label),
        "link": link,
        "anchor_noun": lex.noun(start, plural=False),
        "anchor_name": anchor_name,
        "set_noun": lex.noun(set_label) if family not in ("EXPAND", "RECURSE") else lex.noun(start),
        "set_noun_singular": lex.noun(set_label, plural=False),
        "prop": prop,
        "value": value,
        "extreme": rng.choice(["highest", "lowest"]),
        "op": rng.choice(["more than", "less than"]),
        "prop2": lex.prop(cat2_label, cat2_prop.name),
        "value2": lex.value(rng.choice(cat2_prop.values)),
        "mid_noun": lex.noun(start),
        "link2": link,
        "flag": rng.choice(["", "not "]) + "marked as " + lex.prop(cat_label, cat_prop.name),
        "has": rng.choice(["a recorded ", "no recorded "]) + lex.prop(cat_label, cat_prop.name),
        "group": lex.prop(cat_label, cat_prop.name),
        "k": rng.choice(["two", "three", "five"]),
        "when": rng.choice(["before 1200", "in 1150 or later", "from 900 on"]),
        "attr": lex.prop(cat_label, cat_prop.name),
        "prev_noun": lex.noun(start),
        "stat": rng.choice(["highest", "lowest", "average", "total"]),
    }
    # issue 20 (aggregate variants): what a yes/no question or a percentage tests, after a noun
    which = rng.choice(["marked as ", "with a recorded ", "whose "])
    slots["which"] = which + lex.prop(cat_label, cat_prop.name) + (
        " is " + lex.value(rng.choice(cat_prop.values)) if which == "whose " else "")
    # --- date ranges, sorted lists, swaps (issue 20) --- (own rng: the draws above stay as they were)
    extra = random.Random(f"{world_name}/{family}/{anchor_name}")
    dated = [(n.label, p.name) for n in spec.nodes for p in n.properties if p.type == "date"]
    slots["date_prop"] = lex.prop(*extra.choice(dated))
    slots["order"] = extra.choice(["highest first", "lowest first", "earliest first", "most recent first"])
    slots["when"] = slots["when"] if family != "AGG_COUNT_RANGE" and family != "AGG_RANGE" else extra.choice(
        ["between 1200 and 1300", "in the 1400s", "in the 1850s"])
    if rng.random() < 0.3:
        slots["back"] = f"Going back to the {lex.noun(start)} from before"
    elif rng.random() < 0.5:
        slots["back"] = ""
    # --- filter variants (issue 20) ---
    slots.update(key=lex.prop(start, spec.node(start).key), fragment=rng.choice(["Qu", "Port", "Reef", "polis"]),
                 old=lex.value(rng.choice(observed)))
    return slots


def _word_in(needle: str, text: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(needle) + r"(?!\w)", text, re.IGNORECASE) is not None


# --------------------------------------------------------------------------------------------------
# lexicon


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.world)
def test_lexicon_words_are_plain_english(spec):
    lex = Lexicon(spec)
    words = []
    for node in spec.nodes:
        words += [lex.noun(node.label), lex.noun(node.label, plural=False)]
        words += [lex.prop(node.label, p.name) for p in node.properties]
    for rel in spec.relationships:
        for direction in ("forward", "backward"):
            phrase = lex.link(rel.type, rel.source, rel.target, direction)
            assert phrase != FALLBACK_LINK, (rel.type, direction)  # every shipped spec names its links
            words.append(phrase)
        words += [lex.prop(rel.type, p.name) for p in rel.properties]
    for w in words:
        assert w and w == w.strip() and "_" not in w and not CAMEL.search(w), w
        assert not leaks(w, spec), w
        assert "{" not in w and "}" not in w, w


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.world)
def test_lexicon_plurals_differ_from_singulars(spec):
    lex = Lexicon(spec)
    for node in spec.nodes:
        assert lex.noun(node.label) != lex.noun(node.label, plural=False), node.label


def test_lexicon_defaults_and_spec_words():
    lex = Lexicon(world("ancient_empire")[0])
    assert lex.noun("Province") == "provinces" and lex.noun("Province", plural=False) == "province"
    assert lex.noun("Deity") == "deities"
    assert lex.link("GOVERNS", "Emperor", "Province", "forward") == "governed by"
    assert lex.link("GOVERNS", "Emperor", "Province", "backward") == "governing"
    assert lex.link("COMMANDED_BY", "Legion", "General", "forward") == "commanding"
    assert lex.link("COMMANDED_BY", "Legion", "General", "backward") == "commanded by"
    assert lex.link("NO_SUCH_TYPE", "Emperor", "Province", "forward") == FALLBACK_LINK
    with pytest.raises(ValueError):
        lex.link("GOVERNS", "Emperor", "Province", "sideways")
    assert lex.prop("Province", "tax_rate") == "tax rate"
    assert lex.prop("Emperor", "reign_years") == "reign length in years"
    assert lex.prop("Nobody", "some_thing") == "some thing"
    stellar = Lexicon(world("stellar_colony")[0])
    assert stellar.noun("StarSystem") == "star systems" and stellar.noun("StarSystem", False) == "star system"
    assert Lexicon(world("arcane_archive")[0]).noun("Shelf") == "shelves"
    assert Lexicon(world("hospital")[0]).noun("Diagnosis") == "diagnoses"
    assert lex.noun("UnknownLabel") == "unknown labels"


@pytest.mark.parametrize("word,plural", [
    ("province", "provinces"), ("ministry", "ministries"), ("day", "days"), ("box", "boxes"),
    ("church", "churches"), ("wish", "wishes"), ("bus", "buses"),
    ("star system", "star systems"), ("analysis", "analyses"), ("person", "people"), ("key", "keys"),
])
def test_pluralize(word, plural):
    assert pluralize(word) == plural


def test_split_identifier():
    assert split_identifier("StarSystem") == "star system"
    assert split_identifier("HTTPServer") == "http server"
    assert split_identifier("tax_rate") == "tax rate"


def test_values_are_verbatim():
    v = Lexicon.value
    assert v("the Bold") == "the Bold" and v(42) == "42" and v(-3) == "-3"
    assert v(0.35) == "0.35" and v(1200.0) == "1200.0" and v(0.1 + 0.2) == str(0.1 + 0.2)
    assert v(True) == "yes" and v(False) == "no"
    assert v(dt.date(990, 1, 5)) == "0990-01-05"


# --------------------------------------------------------------------------------------------------
# templates: structure


def test_families_and_personas_are_covered():
    assert set(FAMILIES) == set(SLOTS) == set(_CORES)
    # issue 20: THRESHOLD_AMBIGUOUS_SIZE ("the big ones" only of a size); six families of filter variants
    # and corrections; six aggregate variants (AGG_ANY ... AGG_BY_GROUP); AGG_COUNT_RANGE, AGG_RANGE,
    # EXPAND_SORTED, TOPIC_SHIFT_SWAP
    assert len(FAMILIES) == 34 + 1 + 6 + 6 + 4
    assert set(AMBIGUOUS_FAMILIES) <= set(FAMILIES)
    assert set(_WRAPPERS) == set(PERSONAS)
    for family, registers in _CORES.items():
        assert set(registers) == {"plain", "terse", "tech", "nonnative"}, family
        for register, cores in registers.items():
            assert len(cores) >= 4, (family, register)  # two or more for each split's pool
            assert len(set(cores)) == len(cores), (family, register)
            for core in cores:
                assert core[0].isalpha(), core  # starts with template text, never a slot
                used = set(re.findall(r"\{(\w+)\}", core))
                assert used <= set(SLOTS[family]) | {"pos", "big", "high", "above"}, core
                for slot in set(SLOTS[family]) - set(OMITTED.get(family, ())) - set(PARAPHRASED.get(family, ())):
                    assert "{" + slot + "}" in core, (family, register, core, slot)
                for slot in OMITTED.get(family, ()):
                    assert "{" + slot + "}" not in core, (family, core, slot)
    for persona, wrappers in _WRAPPERS.items():
        assert len(wrappers) >= 3, persona
        assert any("{lc}" not in w for w in wrappers), persona  # usable when a back reference leads


# --------------------------------------------------------------------------------------------------
# templates: every family x persona x world


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.world)
def test_render_every_family_and_persona(spec):
    for family in FAMILIES:
        for persona in PERSONAS:
            for seed in SEEDS:
                slots = make_slots(spec.world, family, random.Random(f"{spec.world}/{family}/{seed}"))
                text = render(family, persona, slots, random.Random(seed))
                assert text == render(family, persona, slots, random.Random(seed))  # deterministic
                assert not re.search(r"\{\w*\}", text), text
                assert "  " not in text and text == text.strip(), text
                if persona not in TECHNICAL_PERSONAS:
                    assert leaks(text, spec) == [], (family, persona, text)
                required = set(SLOTS[family]) - set(OMITTED.get(family, ())) - set(PARAPHRASED.get(family, ()))
                if "anchor_noun" in required and _word_in(slots["anchor_noun"], slots["anchor_name"]):
                    required.discard("anchor_noun")  # "the reef Khafel Reef" is said "Khafel Reef"
                    assert f"{slots['anchor_noun']} {slots['anchor_name']}" not in text, text
                for slot in required:
                    assert slots[slot] in text, (family, persona, slot, slots[slot], text)
                if slots.get("back"):
                    assert slots["back"] in text, text
                present = [slots[s] for s in required]
                for slot in OMITTED.get(family, ()):
                    if any(_word_in(slots[slot], p) for p in present):
                        continue  # the omitted word is part of a noun that must appear
                    assert not _word_in(slots[slot], text), (family, persona, slot, slots[slot], text)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.world)
def test_every_family_and_persona_has_variety(spec):
    for family in FAMILIES:
        slots = make_slots(spec.world, family, random.Random(f"{spec.world}/{family}/fixed"))
        slots.pop("back", None)
        for persona in PERSONAS:
            texts = {render(family, persona, slots, random.Random(seed)) for seed in SEEDS}
            assert len(texts) >= 3, (family, persona, texts)


def test_a_name_that_says_its_type_is_not_preceded_by_the_type_noun():
    slots = {"target_noun": "creatures", "link": "sheltered by", "anchor_noun": "reef", "anchor_name": "Khafel Reef"}
    for persona in PERSONAS:
        for seed in SEEDS:
            text = render("OPENING_ANCHORED", persona, slots, random.Random(seed))
            assert "Khafel Reef" in text and "reef Khafel" not in text.lower(), text
    slots["anchor_name"] = "Khafel Shoals"
    texts = [render("OPENING_ANCHORED", "student", slots, random.Random(seed)) for seed in SEEDS]
    assert any("reef Khafel Shoals" in t or "Khafel Shoals, the reef" in t for t in texts), texts


def _lead_ins(text: str) -> int:
    """Lead-ins at the start of an utterance: a topic-shift lead, a back reference, a segment ending
    in a colon before the question, a persona's opening sentence."""
    n = 0
    for lead in ("New question. ", "Switching topics. ", "Something different now. ", "Let's leave that aside. ",
                 "Moving on to another subject. "):
        if text.startswith(lead):
            n, text = n + 1, text[len(lead):]
    openers = [w.split("{")[0] for ws in _WRAPPERS.values() for w in ws if not w.startswith("{")]
    for opener in openers:
        if opener and text.lower().startswith(opener.lower()):
            n, text = n + 1, text[len(opener):]
            break
    head = re.split(r"[?.!]", text)[0]
    return n + (":" in head)


def test_phrasing_follows_the_conversation():
    """Turn 1 never refers back, greetings and introductions only open a session, no persona phrase
    is said twice in a session, and each utterance has at most one lead-in."""
    spec = SPECS[0]
    for persona in PERSONAS:
        for seed in SEEDS:
            rng, used, said = random.Random(seed), set(), []
            for turn in range(12):
                family = "OPENING_ANCHORED" if turn == 0 else rng.choice(
                    ["EXPAND", "AGG_COUNT", "AGG_SUM", "THRESHOLD", "CONTRAST", "PIVOT", "TOPIC_SHIFT_FILTERED"])
                slots = make_slots(spec.world, family, random.Random(f"{seed}/{turn}"))
                if family.startswith("TOPIC_SHIFT"):
                    slots.pop("back", None)  # a topic shift starts afresh, it never goes back
                before = set(used)
                text = render(family, persona, slots, rng, turn=turn, used=used)
                new = (used - before) & set(_WRAPPERS[persona])
                assert len(new) <= 1 and not (new & set(said)), (persona, text)
                said += list(new)
                for w in new:
                    assert w not in (_LATER_TURNS_ONLY if turn == 0 else _FIRST_TURN_ONLY), (turn, w)
                assert _lead_ins(text) <= 1, text
            assert len(said) == len(set(said))
    for persona in PERSONAS:  # the "later" phrases exist, and never open a session
        first = {render("OPENING_FILTERED", persona, make_slots(spec.world, "OPENING_FILTERED", random.Random(s)),
                        random.Random(s), turn=0) for s in range(40)}
        assert not any(w.replace("{core}", "").replace("{lc}", "").strip() in t
                       for t in first for w in _LATER_TURNS_ONLY if w in _WRAPPERS[persona]), persona


def test_persona_remarks_fit_the_question():
    """"Deduplicate the result." only after a question that lists things, "no rounding" only after a
    computed figure (never on a sum's neighbour, a count or a list)."""
    assert LISTING_ONLY_REMARKS and FIGURE_ONLY_REMARKS
    seen_list = seen_figure = 0
    for family in FAMILIES:
        for persona in ("data_analyst", "verbose_user"):
            for seed in range(60):
                slots = make_slots("ocean_kingdom", family, random.Random(f"{family}/{seed}"))
                slots.pop("back", None)
                text = render(family, persona, slots, random.Random(seed), turn=1 + seed % 3, used=set()).lower()
                listing_remark = any(r in text for r in LISTING_ONLY_REMARKS)
                figure_remark = any(r in text for r in FIGURE_ONLY_REMARKS)
                assert not listing_remark or is_listing_family(family), (family, text)
                assert not figure_remark or family in FIGURE_FAMILIES, (family, text)
                seen_list += listing_remark
                seen_figure += figure_remark
    assert seen_list and seen_figure  # the remarks are still said where they fit


def test_rng_state_decides_the_text():
    slots = make_slots("ancient_empire", "EXPAND", random.Random(1))
    a, b = random.Random(7), random.Random(7)
    assert [render("EXPAND", "journalist", slots, a) for _ in range(5)] == \
           [render("EXPAND", "journalist", slots, b) for _ in range(5)]


def test_back_reference_leads_and_keeps_its_case():
    slots = {"set_noun": "provinces", "target_noun": "legions", "link": "stationed in",
             "back": "Going back to the provinces from before"}
    for persona in PERSONAS:
        for seed in SEEDS:
            text = render("EXPAND", persona, slots, random.Random(seed))
            assert "Going back to the provinces from before: " in text, text
    plain = dict(slots, back="")
    for seed in SEEDS:
        assert not render("EXPAND", "journalist", plain, random.Random(seed)).startswith(":")
    del plain["back"]
    render("EXPAND", "journalist", plain, random.Random(0))


def test_plural_slots_read_as_plurals():
    """A plural noun slot never follows "every", "each", "a" or "an", nor modifies a noun ("every
    provinces record"); the singular slot is there for that."""
    plural = r"\{(?:target_noun|set_noun|mid_noun|prev_noun)\}"
    for family, registers in _CORES.items():
        for cores in registers.values():
            for core in cores:
                assert not re.search(r"\b(?:[Ee]very|[Ee]ach|a|an|A|An) " + plural, core), core
                assert not re.search(plural + r" (?:record|records|entry|entries|row)\b", core), core


def test_train_and_test_wording_pools_are_disjoint_and_both_varied():
    """The held-out-wording split: for every list of alternatives the two pools share no wording,
    together they are the whole list, each has at least two wordings wherever the list has four or
    more, and the partition is a fixed function of the wordings (not of the run)."""
    lists = [c for regs in _CORES.values() for c in regs.values()] + list(_WRAPPERS.values()) + [_TOPIC_SHIFT_LEADS]
    for items in lists:
        test, train = pool(items, "test"), pool(items, "train")
        own = [w for w in items if w != "{core}"]
        assert set(test) | set(train) == set(items)
        assert not (set(test) & set(train)) - {"{core}"}, items
        if len(own) >= 4:
            assert len([w for w in test if w != "{core}"]) >= 2 and len([w for w in train if w != "{core}"]) >= 2
        assert pool(list(reversed(items)), "test") == list(reversed(test))  # by content, not by position
    # no five-word opening is used by both splits, even across families ("Narrow that down further to
    # the ..." is a value's, a flag's and a null test's wording)
    sides = {split: {opening_key(w) for items in lists for w in pool(items, split)} - {""} for split in ("test", "train")}
    assert not sides["test"] & sides["train"]
    assert opening_key("Narrow that down further to the {set_noun}.") == "narrow that down further to"
    assert opening_key("Which of those {set_noun} have {prop}?") == ""
    assert pool(["only one"], "train") == pool(["only one"], "test") == ["only one"]
    with pytest.raises(TemplateError):
        pool(["a", "b"], "dev")
    # a render in one split never produces a wording of the other split's pool
    slots = {"set_noun": "provinces", "target_noun": "legions", "link": "stationed in"}
    for persona in PERSONAS:
        register = {w for w in _CORES["EXPAND"].values() for w in w}
        for split, other in (("test", "train"), ("train", "test")):
            theirs = {w for regs in _CORES["EXPAND"].values() for w in pool(regs, other)}
            for seed in SEEDS:
                text = render("EXPAND", persona, slots, random.Random(seed), turn=2, split=split)
                cores = {c for c in register if c.format(**slots)[1:] in text}
                assert cores and not cores & theirs, (split, text)


def test_topic_shift_says_so():
    slots = {"target_noun": "provinces", "link": "governed by", "anchor_noun": "emperor",
             "anchor_name": "Quabro Tasherk"}
    leads = ("New question.", "Switching topics.", "Something different now.", "Let's leave that aside.",
             "Moving on to another subject.", "Changing the subject.", "Here's a different one.")
    for persona in PERSONAS:
        text = render("TOPIC_SHIFT_ANCHORED", persona, slots, random.Random(3))
        assert text.startswith(leads), text
        assert not render("OPENING_ANCHORED", persona, slots, random.Random(3)).startswith(leads)


def test_errors():
    slots = {"set_noun": "provinces"}
    rng = random.Random(0)
    with pytest.raises(TemplateError):
        render("NO_SUCH_FAMILY", "journalist", slots, rng)
    with pytest.raises(TemplateError):
        render("AGG_COUNT", "pirate", slots, rng)
    with pytest.raises(TemplateError):
        render("AGG_MAX", "journalist", slots, rng)  # prop missing
    with pytest.raises(TemplateError):
        render("AGG_COUNT", "journalist", {"set_noun": ""}, rng)
    with pytest.raises(TemplateError):
        render("THRESHOLD_AMBIGUOUS", "journalist",
               {"set_noun": "cities", "prop": "population", "op": "roughly", "value": "5"}, rng)
    with pytest.raises(TemplateError):
        clarification("EXPAND", {"set_noun": "x", "target_noun": "y", "link": "in"})
    with pytest.raises(TemplateError):
        clarification("AGG_AVG_AMBIGUOUS", {"set_noun": "provinces"})
    assert issubclass(TemplateError, ValueError)


def test_clarifications_name_the_missing_parts():
    pivot = {"set_noun": "provinces", "set_noun_singular": "province", "prop": "population",
             "extreme": "highest", "target_noun": "legions", "link": "stationed in"}
    assert clarification("PIVOT_AMBIGUOUS", pivot) == "I mean the one with the highest population."
    agg = {"set_noun": "provinces", "prop": "tax rate"}
    assert clarification("AGG_AVG_AMBIGUOUS", agg) == "I meant their average tax rate."
    assert clarification("AGG_AVG", agg) == "I meant their average tax rate."
    assert "highest tax rate" in clarification("AGG_MAX_AMBIGUOUS", agg)
    assert "total tax rate" in clarification("AGG_SUM_AMBIGUOUS", agg)
    thr = {"set_noun": "provinces", "prop": "population", "op": "more than", "value": "50000"}
    assert clarification("THRESHOLD_AMBIGUOUS", thr) == "I mean the ones with population more than 50000."


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.world)
def test_clarifications_in_every_world(spec):
    for family in AMBIGUOUS_FAMILIES:
        for seed in range(10):
            slots = make_slots(spec.world, family, random.Random(f"{spec.world}/{family}/{seed}"))
            text = clarification(family, slots)
            for slot in OMITTED[family]:
                assert slots[slot] in text, (family, slot, text)
            assert leaks(text, spec) == [], text


def test_leak_detector():
    assert leaks("MATCH (p:Province) RETURN p") == ["MATCH", "RETURN"]
    assert "GOVERNS" in leaks("provinces via GOVERNS", world("ancient_empire")[0])
    assert "COMMANDED_BY" in leaks("legions COMMANDED_BY generals")
    assert "StarSystem" in leaks("all StarSystem nodes")
    assert "tax_rate" in leaks("whose tax_rate is 0.1")
    assert "{prop}" in leaks("whose {prop} is 0.1")
    assert leaks("Which provinces are governed by the emperor Quabro Tasherk?") == []
    assert leaks("Which patients have AB as their blood type?") == []


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.world)
def test_the_one_leak_check_flags_every_identifier_the_builders_old_rule_did(spec):
    """The builder's gate now calls this ``leaks`` (it had its own rule): every relationship type, every
    multi-word label and every snake_case property of the world, and the Cypher keywords it listed, are
    still flagged in a sentence."""
    props = {p.name for n in spec.nodes for p in n.properties} | {p.name for r in spec.relationships
                                                                   for p in r.properties}
    names = (list(spec.relationship_types) + [l for l in spec.labels if any(c.isupper() for c in l[1:])]
             + sorted(p for p in props if "_" in p))
    for name in names:
        assert name in leaks(f"Show me the {name} of those, please.", spec), name
    for keyword in ("MATCH", "RETURN", "WHERE", "WITH", "ORDER", "LIMIT", "DISTINCT", "OPTIONAL", "UNWIND",
                    "CALL", "CREATE", "MERGE", "DETACH", "DELETE", "COUNT", "COLLECT"):
        assert keyword in leaks(f"then {keyword}(x) them", spec), keyword


# the leak check's own keyword list before it read graphs.cypher_syntax.VOCABULARY (issue 21)
_FORMER_LEAK_KEYWORDS = """
    MATCH OPTIONAL RETURN WHERE WITH ORDER BY LIMIT SKIP COUNT DISTINCT UNWIND CALL YIELD CREATE MERGE
    SET DELETE DETACH REMOVE FOREACH UNION ALL AS AND OR XOR NOT IN IS NULL CASE WHEN THEN ELSE END
    ASC DESC ASCENDING DESCENDING COLLECT SUM AVG MIN MAX EXISTS STARTS ENDS CONTAINS ON LOAD CSV
    INDEX CONSTRAINT
""".split()


def test_the_leak_check_flags_every_cypher_word_in_capitals_and_no_word_in_lower_case():
    """Every word of Cypher's vocabulary (graphs.cypher_syntax owns it), and every word the leak check's
    former own list held, is flagged in capitals; the same word in lower case is plain English."""
    assert set(_FORMER_LEAK_KEYWORDS) <= VOCABULARY
    for word in sorted(VOCABULARY):
        assert leaks(f"then {word} them") == [word], word
        assert leaks(f"then {word.lower()} them") == [], word
