"""Utterance templates: the words a simulated user says for one turn.

``render(family, persona, slots, rng)`` picks one core wording of the turn's family (a few per family,
in three registers: plain, terse and technical, plus a deliberately non-native one), wraps it in one of
the persona's styles and fills the slots. Personas change register, never meaning; chain turns use
anaphora ("those", "them", "that one"). Slot values are already-humanized strings (see
:mod:`benchmark.lexicon`) and are inserted verbatim; only the text around them varies, so later checks
find every entity name and value unchanged. All choices come from ``rng``: the same rng state gives
the same text. The wordings themselves are data, ``benchmark/wordings.yaml`` (loaded by
:mod:`benchmark.wordings`); this module holds the families, their slots and the rules of choosing.

Families and their slots (:data:`SLOTS`)::

    OPENING_ANCHORED, TOPIC_SHIFT_ANCHORED   target_noun, link, anchor_noun, anchor_name
        "Which provinces are governed by the emperor Quabro Tasherk?"
    OPENING_FILTERED, TOPIC_SHIFT_FILTERED   target_noun, prop, value
        "List the provinces whose climate is arid."
    EXPAND                                   set_noun, target_noun, link
        "Which legions are stationed in those provinces?"
    RECURSE                                  set_noun, target_noun, link
        "Show me every one of the officials supervising those officials, directly or indirectly."
    PIVOT                                    set_noun, set_noun_singular, prop, extreme, target_noun, link
        "Of those emperors, take the emperor with the highest treasury: which provinces are governed by
        that emperor?"
    AGG_COUNT                                set_noun
    AGG_MAX, AGG_AVG, AGG_SUM                set_noun, prop
    FILTER, REFINE                           set_noun, prop, value
    THRESHOLD                                set_noun, prop, op, value
    COMPOUND                                 set_noun, prop, op, value, prop2, value2
    CONTRAST                                 set_noun
    PIVOT_AMBIGUOUS                          as PIVOT; the wording omits prop
    AGG_MAX_AMBIGUOUS, AGG_AVG_AMBIGUOUS,
    AGG_SUM_AMBIGUOUS                        as AGG_MAX ...; the wording omits prop
    THRESHOLD_AMBIGUOUS                      as THRESHOLD; the wording omits prop and value ("the high end")
    THRESHOLD_AMBIGUOUS_SIZE                 as THRESHOLD_AMBIGUOUS, of a size ("the big ones")

``extreme`` is "highest" or "lowest"; ``op`` is "more than" or "less than". Every family also takes an
optional ``back`` slot ("Going back to the provinces from before"): when non-empty it leads the
utterance ("Going back to the provinces from before: which legions are ..."). Extra slots are ignored.

``render(..., split="test" | "train")`` draws every wording from that split's pool (:func:`pool`): the
two splits never share a wording, so the benchmark's wording is held out from training.

An utterance is composed of up to four independent parts: [opener] core [tail], inside the persona's
wrapper. The opener ("Okay,", "Follow-up:") and the tail ("Thanks.", "Names only.") come from the
register's lists in the wordings' ``parts`` section (:func:`_edges`): an opener only on a later turn
where nothing else leads the utterance (so still one lead-in at most), a tail only where the wrapper
adds nothing after the core and only one that fits the question. Each part list is split between the
pools like every other list, and a session says each part once. The parts multiply the wordings of a
question with no name or value in it (a count, a contrast), which otherwise repeat word for word across
a build (issue 20).

``clarification(family, slots)`` is the scripted user answer to a clarifying question on an ambiguous
turn ("I mean the one with the highest population.").

:func:`leaks` lists schema identifiers and Cypher keywords in a text (what a non-technical utterance
must not contain).
"""

from __future__ import annotations

import functools
import hashlib
import random
import re
from typing import Iterable, Mapping

from benchmark.session import PERSONAS, TECHNICAL_PERSONAS
from benchmark.wordings import load_wordings
from cypherturn.errors import CypherTurnError
from graphs.cypher_syntax import VOCABULARY


class TemplateError(CypherTurnError, ValueError):
    """Unknown family or persona, a missing slot, or a placeholder left unfilled."""


_ANCHORED = ("target_noun", "link", "anchor_noun", "anchor_name")
_FILTERED = ("target_noun", "prop", "value")
_TWO_HOP = ("target_noun", "link", "mid_noun", "link2", "anchor_noun", "anchor_name")
_PIVOT = ("set_noun", "set_noun_singular", "prop", "extreme", "target_noun", "link")

SLOTS: dict[str, tuple[str, ...]] = {
    "OPENING_ANCHORED": _ANCHORED,
    "TOPIC_SHIFT_ANCHORED": _ANCHORED,
    "OPENING_FILTERED": _FILTERED,
    "TOPIC_SHIFT_FILTERED": _FILTERED,
    "OPENING_TWO_HOP": _TWO_HOP,
    "TOPIC_SHIFT_TWO_HOP": _TWO_HOP,
    "EXPAND": ("set_noun", "target_noun", "link"),
    "RECURSE": ("set_noun", "target_noun", "link"),
    "PIVOT": _PIVOT,
    "AGG_COUNT": ("set_noun",),
    "AGG_MAX": ("set_noun", "prop"),
    "AGG_AVG": ("set_noun", "prop"),
    "AGG_SUM": ("set_noun", "prop"),
    "FILTER": ("set_noun", "prop", "value"),
    "REFINE": ("set_noun", "prop", "value"),
    "THRESHOLD": ("set_noun", "prop", "op", "value"),
    "COMPOUND": ("set_noun", "prop", "op", "value", "prop2", "value2"),
    "CONTRAST": ("set_noun",),
    "FILTER_FLAG": ("set_noun", "flag"),
    "REFINE_FLAG": ("set_noun", "flag"),
    "FILTER_EXISTS": ("set_noun", "has"),
    "REFINE_EXISTS": ("set_noun", "has"),
    "AGG_MIN": ("set_noun", "prop"),
    "AGG_COUNT_GROUPED": ("set_noun", "group"),
    "TOP_K": ("set_noun", "k", "extreme", "prop"),
    "THRESHOLD_DATE": ("set_noun", "prop", "when"),
    "AGG_EDGE": ("set_noun", "link", "prev_noun", "stat", "prop"),
    "AGG_COUNT_EACH": ("set_noun", "target_noun", "link"),
    "EXPAND_WITH": ("set_noun", "target_noun", "link", "attr"),
    "PIVOT_AMBIGUOUS": _PIVOT,
    "AGG_MAX_AMBIGUOUS": ("set_noun", "prop"),
    "AGG_AVG_AMBIGUOUS": ("set_noun", "prop"),
    "AGG_SUM_AMBIGUOUS": ("set_noun", "prop"),
    "THRESHOLD_AMBIGUOUS": ("set_noun", "prop", "op", "value"),
    "THRESHOLD_AMBIGUOUS_SIZE": ("set_noun", "prop", "op", "value"),
    # --- filter variants (issue 20) ---
    "FILTER_EITHER": ("set_noun", "prop", "value", "value2"),  # "arid or temperate"
    "FILTER_NAME_STARTS": ("set_noun", "key", "fragment"),  # "whose name starts with Qu"
    "FILTER_NAME_CONTAINS": ("set_noun", "key", "fragment"),  # "with 'Reef' in their name"
    "FILTER_LINKED": ("set_noun", "has"),  # "at least one legion stationed in them"
    "CORRECT_VALUE": ("prop", "value", "old"),  # "Actually, I meant arid, not temperate."
    "CORRECT_THRESHOLD": ("prop", "op", "value", "old"),  # "... more than 40, not 30."
    # --- aggregate variants (issue 20) ---
    "AGG_ANY": ("set_noun", "which"),
    "AGG_ALL": ("set_noun", "which"),
    "AGG_PERCENT": ("set_noun", "which"),
    "AGG_COUNT_COMPARE": ("set_noun", "op", "value"),
    "AGG_FIGURE_COMPARE": ("set_noun", "stat", "prop", "op", "value"),
    "AGG_BY_GROUP": ("set_noun", "stat", "prop", "group"),
    # --- date ranges, sorted lists, swaps (issue 20) ---
    "AGG_COUNT_RANGE": ("set_noun", "prop", "when"),  # when: "between 1200 and 1300", "in the 1400s"
    "AGG_RANGE": ("set_noun", "stat", "prop", "date_prop", "when"),  # stat: "total" / "average"
    "EXPAND_SORTED": ("set_noun", "target_noun", "link", "prop", "order"),  # order: "highest first" ...
    "TOPIC_SHIFT_SWAP": ("anchor_noun", "anchor_name"),  # "What about the kingdom Vor?"
}

FAMILIES: tuple[str, ...] = tuple(SLOTS)

# slots an ambiguous family deliberately leaves out of its wording (the clarification supplies them)
OMITTED: dict[str, tuple[str, ...]] = {
    "PIVOT_AMBIGUOUS": ("prop",),
    "AGG_MAX_AMBIGUOUS": ("prop",),
    "AGG_AVG_AMBIGUOUS": ("prop",),
    "AGG_SUM_AMBIGUOUS": ("prop",),
    "THRESHOLD_AMBIGUOUS": ("prop", "value"),
    "THRESHOLD_AMBIGUOUS_SIZE": ("prop", "value"),
}
AMBIGUOUS_FAMILIES: tuple[str, ...] = tuple(OMITTED)
# slots an ambiguous family may paraphrase instead of quoting ("top one" for highest, "big ones" for
# more than); every other slot appears verbatim in every family's wording
PARAPHRASED: dict[str, tuple[str, ...]] = {
    "PIVOT_AMBIGUOUS": ("extreme",),
    "THRESHOLD_AMBIGUOUS": ("op",),
    "THRESHOLD_AMBIGUOUS_SIZE": ("op",),
}

_TOPIC_SHIFT = frozenset({"TOPIC_SHIFT_ANCHORED", "TOPIC_SHIFT_FILTERED", "TOPIC_SHIFT_TWO_HOP"})

# ---------------------------------------------------------------------------------------------------
# The wordings are data (benchmark/wordings.yaml, whose comments say what each section means), loaded
# once at import, read-only: the core wordings of each family per register, the topic-shift leads, each
# persona's register and wrappers (with the turns and questions a wrapper fits) and the clarifications.

_WORDINGS = load_wordings(families=FAMILIES, personas=PERSONAS, ambiguous=AMBIGUOUS_FAMILIES)
_CORES = _WORDINGS.questions
_TOPIC_SHIFT_LEADS = _WORDINGS.topic_shift_leads
_PERSONA_REGISTER = _WORDINGS.registers
_WRAPPERS = _WORDINGS.wrappers
# a greeting or an introduction only opens a session; a phrase that presupposes an earlier turn never does
_FIRST_TURN_ONLY = _WORDINGS.first_turn_only
_LATER_TURNS_ONLY = _WORDINGS.later_turns_only
# a remark about a list never follows a single figure; one about rounding only follows a computed figure
_LISTING_ONLY = _WORDINGS.listing_only
_FIGURE_ONLY = _WORDINGS.figure_only
_CLARIFICATIONS = _WORDINGS.clarifications
_OPENERS = _WORDINGS.openers
_TAILS = _WORDINGS.tails
FIGURE_FAMILIES = frozenset({"AGG_MAX", "AGG_MIN", "AGG_EDGE", "AGG_AVG", "AGG_SUM", "AGG_MAX_AMBIGUOUS", "AGG_AVG_AMBIGUOUS",
                             "AGG_SUM_AMBIGUOUS"})


def is_listing_family(family: str) -> bool:
    """Whether ``family``'s answer is a list of entities (every family but the aggregates)."""
    return not family.startswith("AGG_")


def wrapper_fits(wrapper: str, family: str) -> bool:
    """Whether a persona wrapper's remark fits a question of ``family`` (see ``_LISTING_ONLY``)."""
    if wrapper in _LISTING_ONLY:
        return is_listing_family(family)
    if wrapper in _FIGURE_ONLY:
        return family in FIGURE_FAMILIES
    return True


def _remark(wrapper: str) -> str:
    return wrapper.replace("{core}", "").replace("{lc}", "").strip(" :,").lower()


# the remarks of those wrappers, as the audit finds them in an utterance
LISTING_ONLY_REMARKS = tuple(sorted(_remark(w) for w in _LISTING_ONLY))
FIGURE_ONLY_REMARKS = tuple(sorted(_remark(w) for w in _FIGURE_ONLY))
LATER_BARE_RATE = 0.4  # after the first turn people often just ask: the share of bare cores there
# how often a later turn's core gets a register's short opener ("Okay, ...") and any turn's core a short
# tail ("Thanks."), where nothing else stands there: real users vary the edges of a question, and
# without these the count and contrast questions (no name, no value in them) repeat word for word
OPENER_RATE = 0.5
TAIL_RATE = 0.4
# a core that already opens with a discourse word or a linking phrase takes no opener ("So and the rest
# ...", "Following on from that, going all the way down the chain, ...")
_CORE_DISCOURSE = re.compile(r"^(?:and|now|so|then|also|okay|ok|right|alright|next|plus|well|what about|going|"
                             r"following|tracing)\b", re.I)
# a core opening with its own lead-in ("Next: ...", "Those fleets: total?"): a colon before the question
_CORE_LEAD_IN = re.compile(r"^[^?.!]*?:\s")

_PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")
_HIGH_OPS = ("more than", "greater than", "higher than", "above", "over", "at least", "larger than")
_LOW_OPS = ("less than", "fewer than", "lower than", "below", "under", "at most", "smaller than")


def _lc(template: str) -> str:
    """Lower-case a template's first letter (not a slot, not the pronoun "I")."""
    if not template or not template[0].isalpha() or re.match(r"I\b", template):
        return template
    return template[0].lower() + template[1:]


def _uc(template: str) -> str:
    """Capitalize a template's first letter (not a slot)."""
    if not template or not template[0].isalpha():
        return template
    return template[0].upper() + template[1:]


def _derived(family: str, slots: Mapping[str, str]) -> dict[str, str]:
    extra: dict[str, str] = {}
    if family == "PIVOT_AMBIGUOUS":
        extreme = slots["extreme"].strip().lower()
        low = extreme in ("lowest", "smallest", "least", "minimum", "bottom")
        extra["pos"] = "bottom" if low else "top"
    if family in ("THRESHOLD_AMBIGUOUS", "THRESHOLD_AMBIGUOUS_SIZE"):
        op = slots["op"].strip().lower()
        if op in _HIGH_OPS:
            low = False
        elif op in _LOW_OPS:
            low = True
        else:
            raise TemplateError(f"{family}: unknown comparison {slots['op']!r}")
        extra.update(big="small" if low else "big", high="low" if low else "high",
                     above="below" if low else "above")
    return extra


def _check(family: str, persona: str | None, slots: Mapping[str, str]) -> None:
    if family not in SLOTS:
        raise TemplateError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")
    if persona is not None and persona not in _WRAPPERS:
        raise TemplateError(f"unknown persona {persona!r}; known: {', '.join(PERSONAS)}")
    missing = [s for s in SLOTS[family] if s not in slots or slots[s] is None]
    if missing:
        raise TemplateError(f"{family}: missing slot(s) {', '.join(missing)}")
    bad = [s for s in SLOTS[family] if not isinstance(slots[s], str) or not slots[s].strip()]
    if bad:
        raise TemplateError(f"{family}: slot(s) {', '.join(bad)} must be non-empty strings")


def _fill(template: str, values: Mapping[str, str], family: str) -> str:
    try:
        text = template.format_map(values)
    except (KeyError, IndexError, ValueError) as exc:
        raise TemplateError(f"{family}: cannot fill {template!r}: {exc}") from exc
    if _PLACEHOLDER.search(text):
        raise TemplateError(f"{family}: unfilled placeholder in {text!r}")
    return text


def _without_repeated_noun(template: str, values: Mapping[str, str]) -> str:
    """"the reef Khafel Reef" -> "Khafel Reef": drop the type noun when the name already says it."""
    noun, name = values.get("anchor_noun"), values.get("anchor_name")
    if not noun or not name:
        return template
    words = {w.lower() for w in re.findall(r"[A-Za-z]+", name)}
    if noun.lower() not in words and noun.lower().split()[-1] not in words:
        return template
    for pattern in ("the {anchor_noun} {anchor_name}", "{anchor_noun} {anchor_name}"):
        template = template.replace(pattern, "{anchor_name}")
    return template.replace("{anchor_name}, the {anchor_noun}", "{anchor_name}")


# The held-out-wording split: the test split (the benchmark) and the train split draw their wordings
# from disjoint pools, so a model fine-tuned on the train split cannot score by recognising a
# benchmark wording. Each list of alternatives (a family's core wordings in one register, a persona's
# phrases, the topic-shift leads, the back-reference leads) is split in two by a fixed hash: the
# larger half to test. A wording that opens with five literal words which another list's wording
# also opens with ("Narrow that down further to the ..." for a value, a flag and a null test) goes
# to the side that opening's hash picks, in every list, so no five-word opening crosses the split;
# the other wordings balance the halves. A list of one wording and the bare "{core}" are shared.
# None: every wording (direct use, tests).
POOLS = ("test", "train")


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def opening_key(wording: str) -> str:
    """The five literal words a wording opens with, lower-cased (what an utterance's five-word opening
    shows of it), or "" when a slot comes sooner (the slot's words then differ between the splits'
    worlds)."""
    words = re.findall(r"[a-z0-9']+", wording.split("{", 1)[0].lower())
    return " ".join(words[:5]) if len(words) >= 5 else ""


def _all_lists() -> list[tuple[str, ...]]:
    # families sharing their wordings (OPENING_ANCHORED, TOPIC_SHIFT_ANCHORED) hold one list, counted once
    cores = dict.fromkeys(c for registers in _CORES.values() for c in registers.values())
    return (list(cores) + list(_WRAPPERS.values()) + [_TOPIC_SHIFT_LEADS] + list(_OPENERS.values())
            + list(_TAILS.values()))


@functools.lru_cache(maxsize=None)
def _shared_openings() -> frozenset[str]:
    """Five-word openings that wordings of more than one list start with."""
    lists_with: dict[str, set[int]] = {}
    for i, items in enumerate(_all_lists()):
        for w in items:
            if opening_key(w):
                lists_with.setdefault(opening_key(w), set()).add(i)
    return frozenset(k for k, ids in lists_with.items() if len(ids) > 1)


@functools.lru_cache(maxsize=None)
def _sides(items: tuple[str, ...]) -> dict[str, int] | None:
    """The pool (an index into POOLS) of each wording of one list; None when it has too few to split.
    Computed once per list: every utterance a build renders asks again."""
    own = [w for w in items if w != "{core}"]
    if len(own) < 2:
        return None
    shared = _shared_openings()
    side = {w: _digest(opening_key(w)) % 2 for w in own if opening_key(w) in shared}
    sizes = [list(side.values()).count(0), list(side.values()).count(1)]
    for w in sorted((w for w in own if w not in side), key=_digest):
        side[w] = 0 if sizes[0] <= sizes[1] else 1  # the smaller half; test on a tie
        sizes[side[w]] += 1
    return side


def pool(items: Iterable[str], split: str | None) -> list[str]:
    """The wordings of ``items`` that ``split`` ("test" / "train") may use, in their given order."""
    items = list(items)
    if split is None:
        return items
    if split not in POOLS:
        raise TemplateError(f"unknown wording pool {split!r}; known: {', '.join(POOLS)}")
    side = _sides(tuple(items))
    if side is None:
        return items
    return [w for w in items if w == "{core}" or side[w] == POOLS.index(split)]


def render(family: str, persona: str, slots: Mapping[str, str], rng: random.Random, *,
           turn: int | None = None, used: set[str] | None = None, split: str | None = None) -> str:
    """One utterance of ``family`` in ``persona``'s register (see the module docstring).

    ``turn`` (the turn's index in its session) and ``used`` (the wrappers and core wordings the
    session has used; the chosen ones are added) condition the phrasing on the conversation: no
    greeting after the first turn, no reference back on it, no phrase or wording twice. Without them any wrapper may be chosen. Every
    utterance opens with at most one lead-in: a topic-shift lead, a back reference, a core's own
    lead-in ("Next: ...") or a persona's ("For my class project: ...").

    ``split`` ("test" / "train") restricts every choice to that split's wording pool (:func:`pool`)."""
    _check(family, persona, slots)
    values = {k: v for k, v in slots.items() if isinstance(v, str)}
    values.update(_derived(family, slots))
    back = slots.get("back")
    back = back.strip() if isinstance(back, str) else ""
    cores = pool(_CORES[family][_PERSONA_REGISTER[persona]], split)
    led = bool(back) or family in _TOPIC_SHIFT  # the utterance already has its one lead-in
    if led:
        cores = [c for c in cores if not _CORE_LEAD_IN.match(c)] or cores
    if back:  # "going back to the X from before" and then "the current set" would contradict each other
        cores = [c for c in cores if "current" not in c] or cores
    if used is not None:  # a user does not ask twice in the same words
        cores = [c for c in cores if c not in used] or cores
    core = rng.choice(cores)
    if used is not None:
        used.add(core)
    if back:
        values["back"] = back
        sep = " " if back[-1] in ".!?:;," else ": "
        core = "{back}" + sep + _lc(core)
    wrappers = pool(_WRAPPERS[persona], split)
    if turn is not None:
        wrappers = [w for w in wrappers if w not in (_LATER_TURNS_ONLY if turn == 0 else _FIRST_TURN_ONLY)]
    if used is not None:
        wrappers = [w for w in wrappers if w not in used]
    wrappers = [w for w in wrappers if wrapper_fits(w, family)]
    if led or _CORE_LEAD_IN.match(core):  # one lead-in: only wrappers that add text after the core
        wrappers = [w for w in wrappers if w.startswith("{core}")]
    if not core[0].isalpha():  # starts with a slot: keep its case, so no lower-casing wrapper
        wrappers = [w for w in wrappers if "{lc}" not in w]
    if not wrappers or turn and rng.random() < LATER_BARE_RATE:
        wrappers = ["{core}"]
    wrapper = rng.choice(wrappers)
    if used is not None and wrapper != "{core}":
        used.add(wrapper)
    core = _edges(core, wrapper, family, _PERSONA_REGISTER[persona], rng, turn=turn, used=used, split=split,
                  led=led)
    template = _without_repeated_noun(wrapper.replace("{lc}", _lc(core)).replace("{core}", core), values)
    if family in _TOPIC_SHIFT:
        template = rng.choice(pool(_TOPIC_SHIFT_LEADS, split)) + _uc(template)
    return _fill(template, values, family)


def _edges(core: str, wrapper: str, family: str, register: str, rng: random.Random, *, turn: int | None,
           used: set[str] | None, split: str | None, led: bool) -> str:
    """``core`` with, at times, one of its register's short openers before it and one of its tails
    after it (the "parts" of benchmark/wordings.yaml). An opener only on a later turn whose utterance has
    no lead-in yet (no back reference, no topic-shift lead, no core lead-in, no wrapper text before the
    core) and whose core does not open with a discourse word itself; a tail only where the wrapper adds
    nothing after the core, and only one that fits the question (as a wrapper's remark must). Neither
    twice in a session (``used``), both from the split's pool. The rng is drawn the same number of
    times whatever is chosen, so one choice never shifts the others."""
    opener_roll, tail_roll = rng.random(), rng.random()
    openers = [o for o in pool(_OPENERS[register], split) if used is None or o not in used]
    tails = [t for t in pool(_TAILS[register], split)
             if wrapper_fits(t, family) and (used is None or t not in used)]
    opener = rng.choice(openers) if openers else ""
    tail = rng.choice(tails) if tails else ""
    if (opener and turn and opener_roll < OPENER_RATE and not led and wrapper.startswith("{core}")
            and not _CORE_LEAD_IN.match(core) and not _CORE_DISCOURSE.match(core)):
        core = opener + " " + (core if opener[-1] in ".!?" else _lc(core))
        if used is not None:
            used.add(opener)
    if tail and tail_roll < TAIL_RATE and wrapper.endswith(("{core}", "{lc}")) and core[-1] in ".?!":
        core = core + " " + tail
        if used is not None:
            used.add(tail)
    return core


def clarification(family: str, slots: Mapping[str, str]) -> str:
    """The scripted user answer that resolves an ambiguous turn ("I meant their average tax rate.").

    ``family`` is an ambiguous family (``AGG_AVG_AMBIGUOUS``) or its base (``AGG_AVG``)."""
    if family not in _CLARIFICATIONS and f"{family}_AMBIGUOUS" in _CLARIFICATIONS:
        family = f"{family}_AMBIGUOUS"
    if family not in _CLARIFICATIONS:
        raise TemplateError(f"{family!r} is not an ambiguous family; known: {', '.join(AMBIGUOUS_FAMILIES)}")
    _check(family, None, slots)
    return _fill(_CLARIFICATIONS[family], {k: v for k, v in slots.items() if isinstance(v, str)}, family)


# ---------------------------------------------------------------------------------------------------
# Leak detection: what a non-technical utterance must not contain.

_UPPER_TOKEN = re.compile(r"\b[A-Z][A-Z0-9_]*\b")
_UPPER_SNAKE = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")
_CAMEL = re.compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b")
_SNAKE = re.compile(r"\b[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]+\b")
_SLOT = re.compile(r"\{[^{}]*\}")


def leaks(text: str, spec=None, *, allowed: Iterable[str] = ()) -> list[str]:
    """Schema identifiers, Cypher keywords and template slots found in ``text``: the one leak check, run
    by the builder's ``leak`` gate on every utterance of a non-technical persona (and on an LLM rewrite
    of one) and by the tests over every template. It supersedes the builder's own rule, which matched
    16 keywords as case-sensitive substrings and only the world's identifiers; this one matches whole
    tokens, the full keyword list and any identifier-shaped token (a default test build and a default
    train build are byte-identical under either).

    Flags: Cypher's words in capitals (``MATCH``, ``COUNT`` ...: :data:`graphs.cypher_syntax.VOCABULARY`,
    which replaced this module's own 56-word list; the 38 words it adds appear in capitals in no wording,
    spec value or generated name, so no build changed), UPPER_SNAKE tokens, CamelCase tokens,
    identifiers with an underscore, ``{slot}`` placeholders, and, given the world ``spec``, its
    relationship types and multi-word labels. ``allowed`` lists strings (entity names, values) whose own
    tokens are not to be flagged."""
    scrubbed = text
    for a in sorted((a for a in allowed if a), key=len, reverse=True):
        scrubbed = scrubbed.replace(a, " ")
    found: list[str] = []
    found += [m for m in _SLOT.findall(scrubbed)]
    found += [t for t in _UPPER_TOKEN.findall(scrubbed) if t in VOCABULARY]
    found += _UPPER_SNAKE.findall(scrubbed)
    found += _CAMEL.findall(scrubbed)
    found += [t for t in _SNAKE.findall(scrubbed) if t not in found]
    if spec is not None:
        types = set(spec.relationship_types)
        found += [t for t in _UPPER_TOKEN.findall(scrubbed) if t in types and t not in found]
    seen: list[str] = []
    for f in found:
        if f not in seen:
            seen.append(f)
    return seen


def is_technical(persona: str) -> bool:
    """Whether ``persona`` may name schema identifiers (and so is exempt from :func:`leaks`)."""
    return persona in TECHNICAL_PERSONAS
