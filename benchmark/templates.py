"""Utterance templates: the words a simulated user says for one turn.

``render(family, persona, slots, rng)`` picks one core wording of the turn's family (a few per family,
in three registers: plain, terse and technical, plus a deliberately non-native one), wraps it in one of
the persona's styles and fills the slots. Personas change register, never meaning; chain turns use
anaphora ("those", "them", "that one"). Slot values are already-humanized strings (see
:mod:`benchmark.lexicon`) and are inserted verbatim; only the text around them varies, so later checks
find every entity name and value unchanged. All choices come from ``rng``: the same rng state gives
the same text.

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
    THRESHOLD_AMBIGUOUS                      as THRESHOLD; the wording omits prop and value

``extreme`` is "highest" or "lowest"; ``op`` is "more than" or "less than". Every family also takes an
optional ``back`` slot ("Going back to the provinces from before"): when non-empty it leads the
utterance ("Going back to the provinces from before: which legions are ..."). Extra slots are ignored.

``render(..., split="test" | "train")`` draws every wording from that split's pool (:func:`pool`): the
two splits never share a wording, so the benchmark's wording is held out from training.

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
from graphs.errors import CypherTurnError


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
}

FAMILIES: tuple[str, ...] = tuple(SLOTS)

# slots an ambiguous family deliberately leaves out of its wording (the clarification supplies them)
OMITTED: dict[str, tuple[str, ...]] = {
    "PIVOT_AMBIGUOUS": ("prop",),
    "AGG_MAX_AMBIGUOUS": ("prop",),
    "AGG_AVG_AMBIGUOUS": ("prop",),
    "AGG_SUM_AMBIGUOUS": ("prop",),
    "THRESHOLD_AMBIGUOUS": ("prop", "value"),
}
AMBIGUOUS_FAMILIES: tuple[str, ...] = tuple(OMITTED)
# slots an ambiguous family may paraphrase instead of quoting ("top one" for highest, "big ones" for
# more than); every other slot appears verbatim in every family's wording
PARAPHRASED: dict[str, tuple[str, ...]] = {
    "PIVOT_AMBIGUOUS": ("extreme",),
    "THRESHOLD_AMBIGUOUS": ("op",),
}

_TOPIC_SHIFT = frozenset({"TOPIC_SHIFT_ANCHORED", "TOPIC_SHIFT_FILTERED", "TOPIC_SHIFT_TWO_HOP"})

# ---------------------------------------------------------------------------------------------------
# Core wordings: family -> register -> templates. Registers: "plain" (most personas), "terse"
# (impatient_exec), "tech" (data_analyst), "nonnative" (non_native_speaker). Every template starts with
# literal text (never a slot), so persona wrappers may lower-case its first letter without touching a
# slot value. Derived slots, filled from the given ones: {pos} (top/bottom), {big} (big/small),
# {high} (high/low), {above} (above/below).

_ANCHORED_CORES = {
    "plain": [
        "Which {target_noun} are {link} the {anchor_noun} {anchor_name}?",
        "Show me the {target_noun} {link} the {anchor_noun} {anchor_name}.",
        "What are the {target_noun} {link} the {anchor_noun} {anchor_name}?",
        "List all the {target_noun} {link} the {anchor_noun} {anchor_name}.",
        "Can you find the {target_noun} {link} the {anchor_noun} {anchor_name}?",
    ],
    "terse": [
        "All {target_noun} {link} the {anchor_noun} {anchor_name}.",
        "Need the {target_noun} {link} {anchor_name}, the {anchor_noun}.",
        "Just the {target_noun} {link} the {anchor_noun} {anchor_name}.",
        "List: {target_noun} {link} the {anchor_noun} {anchor_name}.",
    ],
    "tech": [
        "Retrieve the records of all {target_noun} {link} the {anchor_noun} {anchor_name}.",
        "Query the {target_noun} {link} the {anchor_noun} {anchor_name}, one row per entity.",
        "Pull the full set of {target_noun} {link} the {anchor_noun} {anchor_name}.",
        "Starting from the {anchor_noun} {anchor_name}, traverse to the {target_noun} {link} that {anchor_noun}.",
    ],
    "nonnative": [
        "Which are the {target_noun} {link} the {anchor_noun} {anchor_name}?",
        "Please you show me the {target_noun} {link} the {anchor_noun} {anchor_name}.",
        "I want know which {target_noun} are {link} the {anchor_noun} {anchor_name}.",
        "Give me please all {target_noun} that are {link} {anchor_name}, the {anchor_noun}.",
    ],
}

_FILTERED_CORES = {
    "plain": [
        "Which {target_noun} have {value} as their {prop}?",
        "List the {target_noun} whose {prop} is {value}.",
        "Show me all {target_noun} with {prop} {value}.",
        "What {target_noun} are there where the {prop} is {value}?",
        "Find every one of the {target_noun} whose {prop} is {value}.",
    ],
    "terse": [
        "All {target_noun} with {prop} {value}.",
        "Just the {target_noun} whose {prop} is {value}.",
        "Need the {target_noun} where {prop} is {value}.",
        "Give me the {target_noun} with {value} for {prop}.",
    ],
    "tech": [
        "Filter the {target_noun} on {prop} = {value} and list them.",
        "Select all {target_noun} where the {prop} equals {value}.",
        "Give me the subset of {target_noun} with {prop} set to {value}.",
        "Return the {target_noun} whose {prop} attribute is {value}.",
    ],
    "nonnative": [
        "Which {target_noun} they have the {prop} {value}?",
        "Show me please the {target_noun} with {prop} is {value}.",
        "I search all the {target_noun} where {prop} is {value}.",
        "Please which {target_noun} is having {prop} {value}?",
    ],
}

_TWO_HOP_CORES = {
    "plain": [
        "Which {target_noun} are {link} {mid_noun} {link2} the {anchor_noun} {anchor_name}?",
        "Show me the {target_noun} {link} any of the {mid_noun} {link2} the {anchor_noun} {anchor_name}.",
        "Looking at the {mid_noun} {link2} the {anchor_noun} {anchor_name}, which {target_noun} are {link} them?",
        "Can you find every one of the {target_noun} {link} {mid_noun} {link2} the {anchor_noun} {anchor_name}?",
    ],
    "terse": [
        "All {target_noun} {link} {mid_noun} {link2} the {anchor_noun} {anchor_name}.",
        "Need the {target_noun} {link} the {mid_noun} {link2} {anchor_name}, the {anchor_noun}.",
        "Just the {target_noun} {link} {mid_noun} {link2} the {anchor_noun} {anchor_name}.",
        "Find the {target_noun} {link} whatever {mid_noun} are {link2} the {anchor_noun} {anchor_name}.",
    ],
    "tech": [
        "Two-hop traversal: from the {anchor_noun} {anchor_name} through the {mid_noun} {link2} it to the {target_noun} {link} them.",
        "Retrieve the {target_noun} {link} the {mid_noun} {link2} the {anchor_noun} {anchor_name}, deduplicated.",
        "Pull the distinct {target_noun} reachable through the {mid_noun} {link2} the {anchor_noun} {anchor_name}: the ones {link} them.",
        "Resolve the {mid_noun} {link2} the {anchor_noun} {anchor_name}, then return the {target_noun} {link} those.",
    ],
    "nonnative": [
        "Which {target_noun} are {link} the {mid_noun} that are {link2} the {anchor_noun} {anchor_name}?",
        "Please show me the {target_noun} {link} {mid_noun} {link2} {anchor_name}, the {anchor_noun}.",
        "I want know the {target_noun} {link} the {mid_noun} what are {link2} the {anchor_noun} {anchor_name}.",
        "Tell me the {target_noun} {link} all {mid_noun} who are {link2} the {anchor_noun} {anchor_name}.",
    ],
}

_CORES: dict[str, dict[str, list[str]]] = {
    "OPENING_TWO_HOP": _TWO_HOP_CORES,
    "TOPIC_SHIFT_TWO_HOP": _TWO_HOP_CORES,
    "OPENING_ANCHORED": _ANCHORED_CORES,
    "TOPIC_SHIFT_ANCHORED": _ANCHORED_CORES,
    "OPENING_FILTERED": _FILTERED_CORES,
    "TOPIC_SHIFT_FILTERED": _FILTERED_CORES,
    "EXPAND": {
        "plain": [
            "Which {target_noun} are {link} those {set_noun}?",
            "And the {target_noun} {link} those {set_noun}?",
            "Now show me the {target_noun} {link} those {set_noun}.",
            "What about the {target_noun} {link} those {set_noun}?",
            "Can you get me the {target_noun} {link} those {set_noun}?",
        ],
        "terse": [
            "And the {target_noun} {link} those {set_noun}.",
            "Next: {target_noun} {link} those {set_noun}.",
            "Follow through to the {target_noun} {link} those {set_noun}.",
            "Then the {target_noun} {link} those {set_noun}.",
        ],
        "tech": [
            "Traverse from those {set_noun} to the {target_noun} {link} them.",
            "Expand the current result set of {set_noun}: the {target_noun} {link} them.",
            "Join the previous {set_noun} to the {target_noun} {link} them and list those.",
            "Map each of those {set_noun} to the {target_noun} {link} it and return the distinct ones.",
        ],
        "nonnative": [
            "And which {target_noun} are {link} these {set_noun}?",
            "Now please the {target_noun} {link} those {set_noun}.",
            "Show me also the {target_noun} what are {link} those {set_noun}.",
            "Tell me which {target_noun} is {link} those {set_noun}, please.",
        ],
    },
    "RECURSE": {
        "plain": [
            "Which {target_noun} are {link} those {set_noun} at any level, directly or indirectly?",
            "Show me every one of the {target_noun} {link} those {set_noun}, directly or indirectly.",
            "Follow the chain all the way: which {target_noun} are {link} those {set_noun}, at any depth?",
            "List all the {target_noun} {link} those {set_noun}, including the indirect ones, across the whole chain.",
            "Which {target_noun} are {link} those {set_noun}, counting indirect links too?",
            "Going all the way down the chain, what {target_noun} are {link} those {set_noun}?",
        ],
        "terse": [
            "All the {target_noun} {link} those {set_noun}, any depth.",
            "Full chain: all {target_noun} {link} those {set_noun}.",
            "All {target_noun} {link} those {set_noun}, direct or indirect.",
            "The whole chain of {target_noun} {link} those {set_noun}, all levels down.",
        ],
        "tech": [
            "Run a variable-length traversal: all {target_noun} {link} those {set_noun}, any number of hops.",
            "Compute the transitive closure: every one of the {target_noun} {link} those {set_noun}, directly or indirectly.",
            "Recursively expand those {set_noun} to the {target_noun} {link} them at any depth, deduplicated.",
            "Walk the hierarchy from those {set_noun}: every one of the {target_noun} {link} them, direct or transitive.",
        ],
        "nonnative": [
            "Which {target_noun} are {link} these {set_noun}, also the indirect ones, all levels?",
            "Please give all {target_noun} {link} those {set_noun}, not only direct, every level.",
            "I want the {target_noun} {link} those {set_noun} on any level, also not direct.",
            "Tell me all {target_noun} {link} those {set_noun}, also through other ones, every level.",
        ],
    },
    "PIVOT": {
        "plain": [
            "Of those {set_noun}, take the {set_noun_singular} with the {extreme} {prop}: which {target_noun} are {link} that {set_noun_singular}?",
            "Find the {set_noun_singular} among those {set_noun} with the {extreme} {prop} and show me the {target_noun} {link} that one.",
            "Which {target_noun} are {link} the {set_noun_singular} with the {extreme} {prop} among those {set_noun}?",
            "Among those {set_noun}, whichever {set_noun_singular} has the {extreme} {prop}: what are the {target_noun} {link} that {set_noun_singular}?",
        ],
        "terse": [
            "The {set_noun_singular} with the {extreme} {prop} among those {set_noun}: {target_noun} {link} that one.",
            "Whichever {set_noun_singular} of those {set_noun} has the {extreme} {prop}, give me the {target_noun} {link} that {set_noun_singular}.",
            "Pick the {set_noun_singular} with the {extreme} {prop} from those {set_noun}, then the {target_noun} {link} that one.",
            "The {set_noun_singular} of those {set_noun} with the {extreme} {prop}, then the {target_noun} {link} that one.",
        ],
        "tech": [
            "Rank those {set_noun} by {prop}, take the {set_noun_singular} with the {extreme} value, and traverse to the {target_noun} {link} that {set_noun_singular}.",
            "Sort the current {set_noun} by {prop}, keep the single {set_noun_singular} with the {extreme} value, then list the {target_noun} {link} that one.",
            "Select the {set_noun_singular} with the {extreme} {prop} from those {set_noun} and expand to the {target_noun} {link} that {set_noun_singular}.",
            "Take the single {set_noun_singular} of those {set_noun} with the {extreme} {prop} and return the {target_noun} {link} that {set_noun_singular}.",
        ],
        "nonnative": [
            "From these {set_noun}, the {set_noun_singular} with {extreme} {prop}, which {target_noun} are {link} that one?",
            "Take please the {set_noun_singular} who has the {extreme} {prop} in those {set_noun} and show the {target_noun} {link} that {set_noun_singular}.",
            "Which {target_noun} are {link} that {set_noun_singular} with the {extreme} {prop} from those {set_noun}?",
            "Look at the {set_noun_singular} with the {extreme} {prop} in those {set_noun}; the {target_noun} {link} it, which are they?",
        ],
    },
    "AGG_COUNT": {
        "plain": [
            "How many of those {set_noun} are there?",
            "How many {set_noun} is that?",
            "Can you count those {set_noun} for me?",
            "What's the total number of those {set_noun}?",
            "Give me a count of those {set_noun}.",
        ],
        "terse": [
            "Count of those {set_noun}?",
            "How many {set_noun}? Just the number.",
            "Number of {set_noun} there?",
            "Those {set_noun}, how many?",
        ],
        "tech": [
            "What's the row count for those {set_noun}?",
            "What's the cardinality of that set of {set_noun}?",
            "Aggregate: count of the {set_noun} in the current result.",
            "Return the number of distinct {set_noun} in the current set.",
        ],
        "nonnative": [
            "How much {set_noun} there are?",
            "How many are these {set_noun}?",
            "Please count the {set_noun} for me, how many it is?",
            "Tell me the number of these {set_noun}, please.",
        ],
    },
    "AGG_MAX": {
        "plain": [
            "What's the highest {prop} among those {set_noun}?",
            "Among those {set_noun}, what is the maximum {prop}?",
            "What is the largest {prop} any of those {set_noun} has?",
            "How high does the {prop} go for those {set_noun}?",
        ],
        "terse": [
            "Max {prop} across those {set_noun}?",
            "Highest {prop} among the {set_noun}. Just the figure.",
            "Top {prop} of those {set_noun}?",
            "Peak {prop} for those {set_noun}?",
        ],
        "tech": [
            "Compute max({prop}) over those {set_noun}.",
            "Compute the maximum of {prop} over the current set of {set_noun}.",
            "Aggregate the {set_noun}: maximum {prop}, single value.",
            "Return the largest {prop} value found among those {set_noun}.",
        ],
        "nonnative": [
            "What is the most high {prop} of these {set_noun}?",
            "Which {prop} is the biggest in those {set_noun}?",
            "Tell me the maximum {prop} from the {set_noun}, please.",
            "Tell me please the biggest {prop} of those {set_noun}.",
        ],
    },
    "AGG_AVG": {
        "plain": [
            "What's the average {prop} of those {set_noun}?",
            "On average, what {prop} do those {set_noun} have?",
            "Can you work out the mean {prop} across those {set_noun}?",
            "What's the typical {prop} of those {set_noun}, on average?",
        ],
        "terse": [
            "Average {prop} of those {set_noun}?",
            "Mean {prop} across the {set_noun}. One number.",
            "Those {set_noun}: average {prop}?",
            "Mean {prop}, those {set_noun}?",
        ],
        "tech": [
            "Compute avg({prop}) over those {set_noun}.",
            "Compute the arithmetic mean of {prop} over the current set of {set_noun}.",
            "Aggregate the {set_noun}: mean {prop}, single value.",
            "Return the mean {prop} over the distinct {set_noun} in the current set.",
        ],
        "nonnative": [
            "What is the average of {prop} for these {set_noun}?",
            "Which is the mean {prop} in those {set_noun}?",
            "Tell me please the average {prop} from the {set_noun}.",
            "How much is the {prop} in average for those {set_noun}?",
        ],
    },
    "AGG_SUM": {
        "plain": [
            "What's the total {prop} of those {set_noun}?",
            "If you add up the {prop} of those {set_noun}, what do you get?",
            "Sum up the {prop} across those {set_noun} for me.",
            "What do those {set_noun} come to in total {prop}?",
        ],
        "terse": [
            "Total {prop} of those {set_noun}?",
            "Sum of {prop} across the {set_noun}. One number.",
            "Those {set_noun}: total {prop}?",
            "Combined {prop} of those {set_noun}?",
        ],
        "tech": [
            "Compute sum({prop}) over those {set_noun}.",
            "Compute the sum of {prop} over the current set of {set_noun}.",
            "Aggregate the {set_noun}: total {prop}, single value.",
            "Return the summed {prop} over the distinct {set_noun} in the current set.",
        ],
        "nonnative": [
            "What is the sum of {prop} for these {set_noun}?",
            "How much is the {prop} together for those {set_noun}?",
            "Tell me please the total {prop} from the {set_noun}.",
            "Please add together the {prop} of these {set_noun}, how much is it?",
        ],
    },
    "FILTER": {
        "plain": [
            "Which of those {set_noun} have {value} as their {prop}?",
            "Keep only the {set_noun} whose {prop} is {value}.",
            "Now just the {set_noun} whose {prop} is {value}.",
            "Of those {set_noun}, which ones have {prop} {value}?",
            "Filter those {set_noun} to the ones whose {prop} is {value}.",
        ],
        "terse": [
            "Only the {set_noun} with {prop} {value}.",
            "Just those {set_noun} whose {prop} is {value}.",
            "Cut it to the {set_noun} where {prop} is {value}.",
            "Drop all but the {set_noun} with {prop} {value}.",
        ],
        "tech": [
            "Filter the current {set_noun} on {prop} = {value}.",
            "Apply a predicate to those {set_noun}: {prop} equals {value}.",
            "Restrict the result set of {set_noun} to rows where the {prop} is {value}.",
            "Keep the rows of those {set_noun} where {prop} matches {value}.",
        ],
        "nonnative": [
            "Which of these {set_noun} they have {prop} {value}?",
            "Keep only the {set_noun} with the {prop} is {value}, please.",
            "From those {set_noun} I want only where {prop} is {value}.",
            "I need only these {set_noun} where the {prop} is {value}.",
        ],
    },
    "REFINE": {
        "plain": [
            "Narrow that down further to the {set_noun} whose {prop} is {value}.",
            "Tighten it further: only the {set_noun} whose {prop} is {value}.",
            "Of what's left, keep just the {set_noun} with {prop} {value}.",
            "And on top of that, only the {set_noun} whose {prop} is {value}.",
        ],
        "terse": [
            "Narrower: {set_noun} with {prop} {value} only.",
            "Further cut: just the {set_noun} whose {prop} is {value}.",
            "Tighter. Only the {set_noun} where {prop} is {value}.",
            "Narrow again: {set_noun} with {prop} {value}.",
        ],
        "tech": [
            "Add a second predicate to the filter on those {set_noun}: {prop} = {value}.",
            "Refine the current filter on the {set_noun} with an extra condition, {prop} equals {value}.",
            "Further restrict the remaining {set_noun} to rows where the {prop} is {value}.",
            "Stack one more condition on the remaining {set_noun}: {prop} must be {value}.",
        ],
        "nonnative": [
            "More narrow please: only the {set_noun} where {prop} is {value}.",
            "From these {set_noun} again, keep only who has {prop} {value}.",
            "Make it more small: the {set_noun} with the {prop} {value}.",
            "Again smaller please, the {set_noun} what have {prop} {value}.",
        ],
    },
    "THRESHOLD": {
        "plain": [
            "Which of those {set_noun} have {prop} {op} {value}?",
            "Keep only the {set_noun} whose {prop} is {op} {value}.",
            "Just the {set_noun} with {prop} {op} {value}, please.",
            "Filter those {set_noun} down to the ones whose {prop} is {op} {value}.",
        ],
        "terse": [
            "Only the {set_noun} with {prop} {op} {value}.",
            "Cut those {set_noun} to {prop} {op} {value}.",
            "Those {set_noun}, {prop} {op} {value} only.",
            "Drop all but the {set_noun} with {prop} {op} {value}.",
        ],
        "tech": [
            "Filter the current {set_noun} on {prop}: {op} {value}.",
            "Apply a numeric threshold to those {set_noun}: {prop} {op} {value}.",
            "Restrict the result set of {set_noun} to rows where the {prop} is {op} {value}.",
            "Keep the rows of those {set_noun} where the {prop} is {op} {value}.",
        ],
        "nonnative": [
            "Which of these {set_noun} they have {prop} {op} {value}?",
            "Keep only the {set_noun} with the {prop} is {op} {value}, please.",
            "From those {set_noun} I want only where {prop} is {op} {value}.",
            "I need only these {set_noun} where the {prop} is {op} {value}.",
        ],
    },
    "COMPOUND": {
        "plain": [
            "Which of those {set_noun} have {prop} {op} {value} and {value2} as their {prop2}?",
            "Keep the {set_noun} whose {prop} is {op} {value} and whose {prop2} is {value2}.",
            "Now only the {set_noun} with {prop} {op} {value} and {prop2} {value2}.",
            "Of those {set_noun}, which have {prop2} {value2} and {prop} {op} {value}?",
        ],
        "terse": [
            "Only the {set_noun} with {prop} {op} {value} and {prop2} {value2}.",
            "Those {set_noun}: {prop} {op} {value}, {prop2} {value2}. Both.",
            "Cut to the {set_noun} where {prop} is {op} {value} and {prop2} is {value2}.",
            "Need the {set_noun} with {prop2} {value2} and {prop} {op} {value}.",
        ],
        "tech": [
            "Filter the current {set_noun} on two predicates: {prop} {op} {value} and {prop2} = {value2}.",
            "Apply a conjunction to those {set_noun}: {prop} {op} {value}, plus {prop2} equals {value2}.",
            "Restrict the {set_noun} to rows with the {prop} {op} {value} and the {prop2} being {value2}.",
            "Keep the rows of those {set_noun} that satisfy both {prop2} = {value2} and {prop} {op} {value}.",
        ],
        "nonnative": [
            "Which of these {set_noun} have {prop} {op} {value} and also the {prop2} is {value2}?",
            "Keep only the {set_noun} with {prop} {op} {value} and with {prop2} {value2}, please.",
            "From those {set_noun} I want where {prop} is {op} {value} and {prop2} is {value2}.",
            "I need these {set_noun} where {prop2} is {value2} and also {prop} is {op} {value}.",
        ],
    },
    "CONTRAST": {
        "plain": [
            "What about the other {set_noun}, the ones that didn't match?",
            "And the rest of the {set_noun}, the ones that were left out?",
            "Now flip it: which {set_noun} did not make that cut?",
            "Show me the remaining {set_noun} instead, the ones that condition excluded.",
            "Which {set_noun} were left out by that condition?",
            "I'd also like to see the {set_noun} that didn't make it through that filter.",
        ],
        "terse": [
            "The other {set_noun}. The ones that didn't match.",
            "Flip it: the {set_noun} that got excluded.",
            "Rest of the {set_noun}?",
            "Now the {set_noun} that didn't pass.",
        ],
        "tech": [
            "Take the complement: the {set_noun} from the earlier set that failed that filter.",
            "Invert the last filter and list the {set_noun} it excluded.",
            "Set difference: the earlier {set_noun} minus the ones that matched.",
            "Return the {set_noun} of the earlier set that the last condition removed.",
        ],
        "nonnative": [
            "And the other {set_noun}, which are not matching?",
            "Show me please the {set_noun} what are not in this result.",
            "Now the opposite: the {set_noun} which did not match.",
            "Tell me the {set_noun} what was left out, please.",
        ],
    },
    "PIVOT_AMBIGUOUS": {
        "plain": [
            "Take the {pos} {set_noun_singular} of those {set_noun} and show me the {target_noun} {link} that {set_noun_singular}.",
            "Which {target_noun} are {link} the {pos} {set_noun_singular} among those {set_noun}?",
            "Grab the {set_noun_singular} at the {pos} of those {set_noun} and give me the {target_noun} {link} that one.",
            "Among those {set_noun}, the {set_noun_singular} that comes out {extreme}: what are the {target_noun} {link} that {set_noun_singular}?",
        ],
        "terse": [
            "The {pos} {set_noun_singular} of those {set_noun}: {target_noun} {link} that one.",
            "Take the {pos} {set_noun_singular} of those {set_noun}, then the {target_noun} {link} that {set_noun_singular}.",
            "Whichever {set_noun_singular} of those {set_noun} comes out {extreme}, the {target_noun} {link} that one.",
            "The {pos} {set_noun_singular} of those {set_noun}, and then the {target_noun} {link} that one.",
        ],
        "tech": [
            "Take the {pos} {set_noun_singular} in those {set_noun} and traverse to the {target_noun} {link} that {set_noun_singular}.",
            "Select the {pos} {set_noun_singular} from the current {set_noun} and expand to the {target_noun} {link} that one.",
            "Keep the single {set_noun_singular} that comes out {extreme} in those {set_noun}, then list the {target_noun} {link} that {set_noun_singular}.",
            "Pick the {pos} {set_noun_singular} in the current {set_noun} and return the {target_noun} {link} that one.",
        ],
        "nonnative": [
            "From these {set_noun}, the {pos} {set_noun_singular}, which {target_noun} are {link} that one?",
            "Take please the {pos} {set_noun_singular} in those {set_noun} and show the {target_noun} {link} that {set_noun_singular}.",
            "Which {target_noun} are {link} the {set_noun_singular} what is {pos} in those {set_noun}?",
            "Tell me the {target_noun} {link} the {pos} {set_noun_singular} of those {set_noun}.",
        ],
    },
    "AGG_MAX_AMBIGUOUS": {
        "plain": [
            "What's the maximum for those {set_noun}?",
            "What's the highest figure among those {set_noun}?",
            "How high does it go for those {set_noun}?",
            "Give me the max for those {set_noun}.",
        ],
        "terse": [
            "Max for those {set_noun}?",
            "Highest figure, those {set_noun}.",
            "Those {set_noun}: the peak?",
            "Top figure for those {set_noun}?",
        ],
        "tech": [
            "Compute the maximum over those {set_noun}.",
            "Aggregate the current {set_noun} with a max, single value.",
            "What's the max across the {set_noun} in the result set?",
            "Return the largest value found among those {set_noun}.",
        ],
        "nonnative": [
            "What is the most high for these {set_noun}?",
            "Which is the maximum in those {set_noun}?",
            "Tell me the biggest one from the {set_noun}, please.",
            "What is the biggest for those {set_noun}?",
        ],
    },
    "AGG_AVG_AMBIGUOUS": {
        "plain": [
            "What's the average for those {set_noun}?",
            "Can you average those {set_noun} out for me?",
            "What do those {set_noun} come to on average?",
            "Give me the mean for those {set_noun}.",
        ],
        "terse": [
            "Average for those {set_noun}?",
            "Mean across the {set_noun}. One number.",
            "Those {set_noun}: average?",
            "Mean for those {set_noun}?",
        ],
        "tech": [
            "Compute the mean over those {set_noun}.",
            "Aggregate the current {set_noun} with an average, single value.",
            "What's the arithmetic mean across the {set_noun} in the result set?",
            "Return the mean value over the distinct {set_noun} in the current set.",
        ],
        "nonnative": [
            "What is the average for these {set_noun}?",
            "Which is the mean in those {set_noun}?",
            "Tell me please the average from the {set_noun}.",
            "How much is it in average for those {set_noun}?",
        ],
    },
    "AGG_SUM_AMBIGUOUS": {
        "plain": [
            "What's the total for those {set_noun}?",
            "Add it all up across those {set_noun}.",
            "What do those {set_noun} come to in total?",
            "Give me the sum for those {set_noun}.",
        ],
        "terse": [
            "Total for those {set_noun}?",
            "Sum across the {set_noun}. One number.",
            "Those {set_noun}: total?",
            "Combined total, those {set_noun}?",
        ],
        "tech": [
            "Compute the sum over those {set_noun}.",
            "Aggregate the current {set_noun} with a sum, single value.",
            "What's the total across the {set_noun} in the result set?",
            "Return the summed value over the distinct {set_noun} in the current set.",
        ],
        "nonnative": [
            "What is the total for these {set_noun}?",
            "How much is it together for those {set_noun}?",
            "Tell me please the sum from the {set_noun}.",
            "Please add it together for these {set_noun}, how much is it?",
        ],
    },
    "FILTER_FLAG": {
        "plain": [
            "Which of those {set_noun} are {flag}?",
            "Keep only the {set_noun} that are {flag}.",
            "Of those {set_noun}, show me the ones {flag}.",
            "Just the {set_noun} that are {flag}, please.",
        ],
        "terse": [
            "Only the {set_noun} {flag}.",
            "Those {set_noun}, {flag} only.",
            "Cut to the {set_noun} that are {flag}.",
            "Drop all but the {set_noun} {flag}.",
        ],
        "tech": [
            "Filter the current {set_noun} to those {flag}.",
            "Restrict the result set of {set_noun} to the rows {flag}.",
            "Apply a boolean predicate to those {set_noun}: keep the ones {flag}.",
            "Keep the rows of those {set_noun} that are {flag}.",
        ],
        "nonnative": [
            "Which of these {set_noun} they are {flag}?",
            "Keep only the {set_noun} what are {flag}, please.",
            "From those {set_noun} I want only the ones {flag}.",
            "I need only these {set_noun} which are {flag}.",
        ],
    },
    "REFINE_FLAG": {
        "plain": [
            "Narrow that down further to the {set_noun} {flag}.",
            "Of what's left, keep just the {set_noun} that are {flag}.",
            "And on top of that, only the {set_noun} {flag}.",
            "Out of the remaining {set_noun}, just those {flag}.",
        ],
        "terse": [
            "Further cut: only the {set_noun} {flag}.",
            "Tighter. Just the {set_noun} {flag}.",
            "And only the {set_noun} that are {flag}.",
            "Narrow again: {set_noun} {flag} only.",
        ],
        "tech": [
            "Add a boolean predicate to the filter on those {set_noun}: keep the rows {flag}.",
            "Further restrict the remaining {set_noun} to the ones {flag}.",
            "Refine the current filter on the {set_noun}: only those {flag}.",
            "Stack one more condition on the remaining {set_noun}: they must be {flag}.",
        ],
        "nonnative": [
            "More narrow please, only the {set_noun} {flag}.",
            "From these {set_noun} again, keep only who are {flag}.",
            "Make it more small: the {set_noun} what are {flag}.",
            "Again smaller please, the {set_noun} which are {flag}.",
        ],
    },
    "FILTER_EXISTS": {
        "plain": [
            "Which of those {set_noun} have {has}?",
            "Keep only the {set_noun} with {has}.",
            "Of those {set_noun}, show me the ones with {has}.",
            "Just the {set_noun} that have {has}, please.",
        ],
        "terse": [
            "Only the {set_noun} with {has}.",
            "Those {set_noun} with {has}, nothing else.",
            "Cut to the {set_noun} with {has}.",
            "Drop all but the {set_noun} with {has}.",
        ],
        "tech": [
            "Filter the current {set_noun} to rows with {has}.",
            "Restrict the result set of {set_noun} to the ones with {has}.",
            "Apply a null check to those {set_noun}: keep the ones with {has}.",
            "Keep the rows of those {set_noun} with {has}.",
        ],
        "nonnative": [
            "Which of these {set_noun} they have {has}?",
            "Keep only the {set_noun} with {has}, please.",
            "From those {set_noun} I want only the ones with {has}.",
            "I need only these {set_noun} with {has}.",
        ],
    },
    "REFINE_EXISTS": {
        "plain": [
            "Narrow that down further to the {set_noun} with {has}.",
            "Of what's left, keep just the {set_noun} that have {has}.",
            "And on top of that, only the {set_noun} with {has}.",
            "Of the {set_noun} still left, keep those with {has}.",
        ],
        "terse": [
            "Further cut: only the {set_noun} with {has}.",
            "Tighter. Just the {set_noun} with {has}.",
            "And only the {set_noun} that have {has}.",
            "Narrow again: {set_noun} with {has} only.",
        ],
        "tech": [
            "Add a null check to the filter on those {set_noun}: keep the rows with {has}.",
            "Further restrict the remaining {set_noun} to the ones with {has}.",
            "Refine the current filter on the {set_noun}: only those with {has}.",
            "Stack one more condition on the remaining {set_noun}: keep the ones with {has}.",
        ],
        "nonnative": [
            "More narrow please, only the {set_noun} with {has}.",
            "From these {set_noun} again, keep only who have {has}.",
            "Make it more small: the {set_noun} with {has}.",
            "Again smaller please, the {set_noun} with {has}.",
        ],
    },
    "AGG_MIN": {
        "plain": [
            "What's the lowest {prop} among those {set_noun}?",
            "Among those {set_noun}, what is the minimum {prop}?",
            "What is the smallest {prop} any of those {set_noun} has?",
            "How low does the {prop} go for those {set_noun}?",
        ],
        "terse": [
            "Min {prop} across those {set_noun}?",
            "Lowest {prop} among the {set_noun}. Just the figure.",
            "Smallest {prop} of those {set_noun}?",
            "Bottom {prop} for those {set_noun}?",
        ],
        "tech": [
            "Compute min({prop}) over those {set_noun}.",
            "Compute the minimum of {prop} over the current set of {set_noun}.",
            "Aggregate the {set_noun}: minimum {prop}, single value.",
            "Return the smallest {prop} value found among those {set_noun}.",
        ],
        "nonnative": [
            "What is the most low {prop} of these {set_noun}?",
            "Which {prop} is the smallest in those {set_noun}?",
            "Tell me the minimum {prop} from the {set_noun}, please.",
            "What is the less {prop} that these {set_noun} have?",
        ],
    },
    "TOP_K": {
        "plain": [
            "Which {k} of those {set_noun} have the {extreme} {prop}?",
            "Just the {k} {set_noun} with the {extreme} {prop}, please.",
            "Keep the {k} of those {set_noun} with the {extreme} {prop}.",
            "Show me only the {k} {set_noun} that have the {extreme} {prop}.",
        ],
        "terse": [
            "The {k} {set_noun} with the {extreme} {prop}.",
            "Top {k} of those {set_noun}, by {extreme} {prop}.",
            "Only {k}: the {set_noun} with the {extreme} {prop}.",
            "Give me {k} of those {set_noun}, the {extreme} {prop} ones.",
        ],
        "tech": [
            "Order those {set_noun} by {prop} and keep the {k} with the {extreme} values.",
            "Rank the current {set_noun} by {prop} and return the {k} with the {extreme} values.",
            "Limit the {set_noun} to the {k} rows with the {extreme} {prop}.",
            "Sort the current {set_noun} by {prop} and keep only {k} rows, the {extreme} values first.",
        ],
        "nonnative": [
            "Which are the {k} {set_noun} with the {extreme} {prop}?",
            "Give me please only {k} of these {set_noun}, the ones with {extreme} {prop}.",
            "I want the {k} {set_noun} what have the {extreme} {prop}.",
            "Tell me only {k} {set_noun} of these, with the {extreme} {prop}.",
        ],
    },
    "AGG_EDGE": {
        "plain": [
            "For those {set_noun} {link} the {prev_noun}, what's the {stat} {prop}?",
            "Looking at how those {set_noun} are {link} the {prev_noun}, what's the {stat} {prop} there?",
            "What's the {stat} {prop} across those {set_noun} {link} the {prev_noun}?",
            "Taking those {set_noun} {link} the {prev_noun}, what is the {stat} {prop}?",
        ],
        "terse": [
            "The {stat} {prop} for those {set_noun} {link} the {prev_noun}?",
            "Those {set_noun} {link} the {prev_noun}: {stat} {prop}?",
            "Just the {stat} {prop} across those {set_noun} {link} the {prev_noun}.",
            "Over those {set_noun} {link} the {prev_noun}, the {stat} {prop}?",
        ],
        "tech": [
            "Aggregate over the relationships of those {set_noun} {link} the {prev_noun}: {stat} {prop}.",
            "Compute the {stat} {prop} over each relationship of those {set_noun} {link} the {prev_noun}.",
            "On the relationships of those {set_noun} {link} the {prev_noun}, compute the {stat} {prop}.",
            "Return the {stat} {prop} stored on the links of those {set_noun} {link} the {prev_noun}.",
        ],
        "nonnative": [
            "For these {set_noun} {link} the {prev_noun}, what is the {stat} {prop}?",
            "Please tell me the {stat} {prop} for those {set_noun} {link} the {prev_noun}.",
            "Which is the {stat} {prop} of those {set_noun} {link} the {prev_noun}?",
            "How much is the {stat} {prop} for those {set_noun} {link} the {prev_noun}?",
        ],
    },
    "THRESHOLD_DATE": {
        "plain": [
            "Which of those {set_noun} have their {prop} {when}?",
            "Keep only the {set_noun} whose {prop} is {when}.",
            "Just the {set_noun} with the {prop} {when}, please.",
            "Filter those {set_noun} down to the ones with their {prop} {when}.",
        ],
        "terse": [
            "Only the {set_noun} with {prop} {when}.",
            "Those {set_noun}, {prop} {when} only.",
            "Cut to the {set_noun} whose {prop} is {when}.",
            "Drop all but the {set_noun} with {prop} {when}.",
        ],
        "tech": [
            "Filter the current {set_noun} on {prop}: {when}.",
            "Apply a date condition to those {set_noun}: {prop} {when}.",
            "Restrict the result set of {set_noun} to rows where the {prop} is {when}.",
            "Keep the rows of those {set_noun} where the {prop} falls {when}.",
        ],
        "nonnative": [
            "Which of these {set_noun} they have the {prop} {when}?",
            "Keep only the {set_noun} with the {prop} {when}, please.",
            "From those {set_noun} I want only where {prop} is {when}.",
            "I need only these {set_noun} where the {prop} is {when}.",
        ],
    },
    "AGG_COUNT_EACH": {
        "plain": [
            "For each of those {set_noun}, how many {target_noun} are {link} it? Include the ones with none.",
            "How many {target_noun} are {link} each of those {set_noun}, counting zero where there are none?",
            "Give me a count of the {target_noun} {link} each of those {set_noun}, including any with none.",
            "List those {set_noun} with the number of {target_noun} {link} each one, zeros included.",
        ],
        "terse": [
            "Those {set_noun}, each with its number of {target_noun} {link} it, zeros included.",
            "Count of {target_noun} {link} each of those {set_noun}, including zeros.",
            "Each of those {set_noun} with how many {target_noun} are {link} it. Zero counts too.",
            "For each of those {set_noun}: number of {target_noun} {link} it, zeros kept.",
        ],
        "tech": [
            "For every one of those {set_noun}, count the {target_noun} {link} it, keeping the ones with none as 0.",
            "Left-join those {set_noun} to the {target_noun} {link} them and count per row, zeros kept.",
            "For each of the current {set_noun}: the number of {target_noun} {link} it, 0 where there is no match.",
            "Return each of those {set_noun} with a count of the {target_noun} {link} it, 0 for no match.",
        ],
        "nonnative": [
            "For every of these {set_noun}, how many {target_noun} are {link} it? Also the ones with zero.",
            "Please count the {target_noun} {link} each of those {set_noun}, also when it is none.",
            "I want for each of those {set_noun} how many {target_noun} are {link} it, also zero.",
            "Tell me for each of these {set_noun} the number of {target_noun} {link} it, zero also.",
        ],
    },
    "EXPAND_WITH": {
        "plain": [
            "Which {target_noun} are {link} those {set_noun}, and what is the {attr} of each?",
            "Show me the {target_noun} {link} those {set_noun}, along with their {attr}.",
            "List the {target_noun} {link} those {set_noun} with the {attr} of each one.",
            "What {target_noun} are {link} those {set_noun}? Give me their {attr} as well.",
        ],
        "terse": [
            "The {target_noun} {link} those {set_noun}, plus their {attr}.",
            "And the {target_noun} {link} those {set_noun}, {attr} included.",
            "Next: {target_noun} {link} those {set_noun} and the {attr} of each.",
            "Then the {target_noun} {link} those {set_noun}, with their {attr}.",
        ],
        "tech": [
            "Traverse from those {set_noun} to the {target_noun} {link} them and return each with its {attr}.",
            "Join the previous {set_noun} to the {target_noun} {link} them; two columns, the {target_noun} and their {attr}.",
            "Expand the current {set_noun} to the {target_noun} {link} them, with the {attr} of each.",
            "Return the {target_noun} {link} those {set_noun}, one row each with its {attr}.",
        ],
        "nonnative": [
            "Which {target_noun} are {link} these {set_noun}, and which {attr} they have?",
            "Show me please the {target_noun} {link} those {set_noun} and also their {attr}.",
            "I want the {target_noun} {link} those {set_noun}, with the {attr} for each.",
            "Tell me the {target_noun} {link} those {set_noun} and the {attr} of every one.",
        ],
    },
    "AGG_COUNT_GROUPED": {
        "plain": [
            "How many of those {set_noun} are there for each {group}?",
            "Break those {set_noun} down by {group}: how many in each?",
            "For each {group}, how many of those {set_noun} are there?",
            "Can you count those {set_noun} per {group}?",
        ],
        "terse": [
            "Count of those {set_noun} per {group}?",
            "Those {set_noun} by {group}, with counts.",
            "How many {set_noun} per {group}?",
            "Split those {set_noun} by {group}, counts only.",
        ],
        "tech": [
            "Group those {set_noun} by {group} and count each group.",
            "Aggregate the current {set_noun}: count per {group}.",
            "Give me a group-by on {group} over those {set_noun}, with a count for each.",
            "Return one row per {group} with the number of those {set_noun} in it.",
        ],
        "nonnative": [
            "How many are these {set_noun} for every {group}?",
            "Please count the {set_noun} for each {group}.",
            "For every {group}, how much {set_noun} there are?",
            "Tell me how many of these {set_noun} there is in every {group}.",
        ],
    },
    "THRESHOLD_AMBIGUOUS": {
        "plain": [
            "Only keep the {big} ones among those {set_noun}.",
            "Which of those {set_noun} are on the {high} side?",
            "Filter those {set_noun} down to the {big} ones.",
            "Just the {set_noun} that are {above} the cutoff, please.",
        ],
        "terse": [
            "Only the {big} {set_noun}.",
            "Drop everything but the {big} {set_noun}.",
            "Those {set_noun}, {high} end only.",
            "Keep the {big} {set_noun}, drop the rest.",
        ],
        "tech": [
            "Apply a threshold to those {set_noun} and keep the {high} values.",
            "Filter the current {set_noun} to the {high} end of the range.",
            "Restrict the {set_noun} to rows {above} the cutoff.",
            "Return the subset of those {set_noun} at the {high} end.",
        ],
        "nonnative": [
            "Keep only the {big} ones of these {set_noun}, please.",
            "Which of those {set_noun} are the {big} ones?",
            "I want only the {set_noun} what are {above} the limit.",
            "Please only these {set_noun} which are {big}.",
        ],
    },
}

# put in front of the persona's wording; each ends a sentence, so the wording keeps its capital
_TOPIC_SHIFT_LEADS = [
    "New question. ",
    "Switching topics. ",
    "Something different now. ",
    "Let's leave that aside. ",
    "Moving on to another subject. ",
    "Changing the subject. ",
    "Here's a different one. ",
]

# ---------------------------------------------------------------------------------------------------
# Persona styles: register, which cores they draw on, and wrappers around the core ("{core}" keeps its
# capital; "{lc}" lower-cases its first letter, so it is only used when the core starts with template
# text).

_PERSONA_REGISTER = {
    "journalist": "plain", "student": "plain", "product_manager": "plain", "novice_user": "plain",
    "data_analyst": "tech", "casual_user": "plain", "impatient_exec": "terse",
    "adversarial_user": "plain", "non_native_speaker": "nonnative", "verbose_user": "plain",
}

_WRAPPERS: dict[str, list[str]] = {
    "journalist": [
        "For a story I'm working on: {lc}",
        "I'm fact-checking a piece. {core}",
        "{core} I'd like to be able to cite this accurately.",
        "Quick check for my article: {lc}",
        "{core} This is going into print, so precision matters.",
        "{core} My editor will ask where this came from.",
        "{core} I'll quote this, so please be exact.",
    ],
    "student": [
        "For my class project: {lc}",
        "{core} I'm trying to learn how to read this data.",
        "I'm studying this dataset for an assignment. {core}",
        "Okay, next step of my homework: {lc}",
        "{core} I want to check my own answer against yours.",
        "{core} Our professor said this part is tricky.",
    ],
    "product_manager": [
        "For the roadmap review: {lc}",
        "{core} I need this for the stakeholder update.",
        "Quick sanity check before the planning meeting: {lc}",
        "{core} Keep it brief, I just need the answer.",
        "{core} It goes on a slide this afternoon.",
        "{core} The team is waiting on this one.",
    ],
    "novice_user": [
        "Um, {lc}",
        "Sorry, I'm new to this. {core}",
        "{core} I hope I'm asking this right.",
        "Hi, I'm still figuring this tool out. {core}",
        "{core} I think that's how to put it?",
        "{core} Not sure if that makes sense.",
    ],
    "data_analyst": [
        "{core}",
        "Next query: {lc}",
        "{core} Exact values, please, no rounding.",
        "Continuing the analysis: {lc}",
        "{core} Deduplicate the result.",
    ],
    "casual_user": [
        "hey, {lc}",
        "ok so {lc}",
        "{core} thanks!",
        "{core} cheers",
        "{core} no rush",
        "{core} just wondering",
    ],
    "impatient_exec": [
        "{core} Now.",
        "{core} Quickly.",
        "{core}",
        "Bottom line: {lc}",
        "{core} Short answer.",
    ],
    "adversarial_user": [
        "Your last answer looked wrong to me. {core}",
        "{core} And don't make anything up this time.",
        "Let's see if you can get this one right: {lc}",
        "I'll be checking this against the source. {core}",
        "{core} Prove it with the actual data.",
        "{core} No guessing.",
        "{core} I already know the answer, so be careful.",
    ],
    "non_native_speaker": [
        "{core}",
        "Hello, {lc}",
        "{core} Thank you very much.",
        "Sorry for my English. {core}",
        "{core} Thanks for the help.",
        "{core} I hope it is clear.",
    ],
    "verbose_user": [
        "I've been going through this data for a while now and there's something I'd really like to "
        "understand better, so bear with me. {core}",
        "So, just to give you a bit of context, I'm putting together a fairly detailed overview and I "
        "want to make sure every piece of it is right. {core}",
        "{core} I know that might seem like a small detail, but it matters quite a bit for what I'm "
        "trying to piece together, so I'd appreciate a careful answer.",
        "Okay, here's the next thing I've been wondering about, and I'll try to phrase it as clearly "
        "as I can. {core}",
        "{core} I realise I keep adding questions, but each of these fills in a different part of the "
        "picture I'm building.",
        "{core} If anything about that is unclear, go with the most literal reading of what I wrote.",
        "{core} I'd rather have the complete list than a quick summary, if that's all the same to you.",
    ],
}
# Wrappers tied to the conversation: a greeting or an introduction only opens a session; a phrase
# that presupposes an earlier turn never does. Every other wrapper fits any turn. A session uses each
# wrapper at most once (``render(..., used=...)``); the bare "{core}" is not a phrase and may repeat.
_FIRST_TURN_ONLY = frozenset({
    "I'm fact-checking a piece. {core}", "I'm studying this dataset for an assignment. {core}",
    "Sorry, I'm new to this. {core}", "Hi, I'm still figuring this tool out. {core}", "hey, {lc}",
    "Hello, {lc}", "Sorry for my English. {core}",
    "I've been going through this data for a while now and there's something I'd really like to "
    "understand better, so bear with me. {core}",
    "So, just to give you a bit of context, I'm putting together a fairly detailed overview and I "
    "want to make sure every piece of it is right. {core}",
})
_LATER_TURNS_ONLY = frozenset({
    "Okay, next step of my homework: {lc}", "Next query: {lc}", "Continuing the analysis: {lc}",
    "Your last answer looked wrong to me. {core}", "{core} And don't make anything up this time.",
    "Okay, here's the next thing I've been wondering about, and I'll try to phrase it as clearly "
    "as I can. {core}",
    "{core} I realise I keep adding questions, but each of these fills in a different part of the "
    "picture I'm building.",
})
# Wrappers that only fit some questions: a remark about a list never follows a single figure, and a
# remark about rounding only follows a computed figure (a mean, a total, an extreme).
_LISTING_ONLY = frozenset({
    "{core} Deduplicate the result.",
    "{core} I'd rather have the complete list than a quick summary, if that's all the same to you.",
})
_FIGURE_ONLY = frozenset({"{core} Exact values, please, no rounding."})
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
# a core opening with its own lead-in ("Next: ...", "Those fleets: total?"): a colon before the question
_CORE_LEAD_IN = re.compile(r"^[^?.!]*?:\s")

_CLARIFICATIONS: dict[str, list[str]] = {
    "PIVOT_AMBIGUOUS": ["I mean the one with the {extreme} {prop}."],
    "AGG_MAX_AMBIGUOUS": ["I meant the highest {prop}."],
    "AGG_AVG_AMBIGUOUS": ["I meant their average {prop}."],
    "AGG_SUM_AMBIGUOUS": ["I meant their total {prop}."],
    "THRESHOLD_AMBIGUOUS": ["I mean the ones with {prop} {op} {value}."],
}

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
    if family == "THRESHOLD_AMBIGUOUS":
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


def _all_lists() -> list[list[str]]:
    lists, seen = [], set()
    for registers in _CORES.values():
        for cores in registers.values():
            if id(cores) not in seen:
                seen.add(id(cores))
                lists.append(cores)
    return lists + list(_WRAPPERS.values()) + [_TOPIC_SHIFT_LEADS]


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
    template = _without_repeated_noun(wrapper.replace("{lc}", _lc(core)).replace("{core}", core), values)
    if family in _TOPIC_SHIFT:
        template = rng.choice(pool(_TOPIC_SHIFT_LEADS, split)) + _uc(template)
    return _fill(template, values, family)


def clarification(family: str, slots: Mapping[str, str]) -> str:
    """The scripted user answer that resolves an ambiguous turn ("I meant their average tax rate.").

    ``family`` is an ambiguous family (``AGG_AVG_AMBIGUOUS``) or its base (``AGG_AVG``)."""
    if family not in _CLARIFICATIONS and f"{family}_AMBIGUOUS" in _CLARIFICATIONS:
        family = f"{family}_AMBIGUOUS"
    if family not in _CLARIFICATIONS:
        raise TemplateError(f"{family!r} is not an ambiguous family; known: {', '.join(AMBIGUOUS_FAMILIES)}")
    _check(family, None, slots)
    return _fill(_CLARIFICATIONS[family][0], {k: v for k, v in slots.items() if isinstance(v, str)}, family)


# ---------------------------------------------------------------------------------------------------
# Leak detection: what a non-technical utterance must not contain.

CYPHER_KEYWORDS = frozenset("""
    MATCH OPTIONAL RETURN WHERE WITH ORDER BY LIMIT SKIP COUNT DISTINCT UNWIND CALL YIELD CREATE MERGE
    SET DELETE DETACH REMOVE FOREACH UNION ALL AS AND OR XOR NOT IN IS NULL CASE WHEN THEN ELSE END
    ASC DESC ASCENDING DESCENDING COLLECT SUM AVG MIN MAX EXISTS STARTS ENDS CONTAINS ON LOAD CSV
    INDEX CONSTRAINT
""".split())

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

    Flags: upper-case Cypher keywords (``MATCH``, ``COUNT`` ...), UPPER_SNAKE tokens, CamelCase tokens,
    identifiers with an underscore, ``{slot}`` placeholders, and, given the world ``spec``, its
    relationship types and multi-word labels. ``allowed`` lists strings (entity names, values) whose own
    tokens are not to be flagged."""
    scrubbed = text
    for a in sorted((a for a in allowed if a), key=len, reverse=True):
        scrubbed = scrubbed.replace(a, " ")
    found: list[str] = []
    found += [m for m in _SLOT.findall(scrubbed)]
    found += [t for t in _UPPER_TOKEN.findall(scrubbed) if t in CYPHER_KEYWORDS]
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
