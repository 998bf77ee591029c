"""Realism audit of a session build (issue 11): prints the rate of every defect class a careful
reviewer flags, the question kinds per world and the gold complexity.

    python scripts/audit_sessions.py BUILD_DIR [--json OUT.json] [--no-db]

Each check is a pure function of the sessions and the world specs, except the symmetric-traversal
check, which re-executes every gold that crosses a relationship type the spec declares ``symmetric``
with that relationship read both ways, and the typed-name check, which re-verifies every name a turn
says as a user types it (``Turn.typed_names``) with a plain equality test and with SEARCH_VALUES (both
need the worlds loaded; ``--no-db`` skips them). A rate is
``count / denominator`` where the denominator is the set of turns the check applies to (printed).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmark.lexicon import Lexicon  # noqa: E402
from benchmark.session import Session, Turn, read_sessions  # noqa: E402
from benchmark.templates import _CORES, FIGURE_ONLY_REMARKS, LISTING_ONLY_REMARKS, _WRAPPERS  # noqa: E402
from benchmark.world_builder import FILTERS, LISTING_MODES, is_round as builder_is_round, is_year  # noqa: E402
from benchmark.world_builder import canonical_rows
from benchmark.world_builder import MIN_AGGREGATED, MIN_COUNTED, ONE_ROW_FILTER_RATE  # noqa: E402
from benchmark.chain import literal  # noqa: E402
from benchmark.typed_names import LOOKUP_KINDS, equal_counts, resolves  # noqa: E402
from graphs.search import search_values  # noqa: E402
from graphs.executor import SafeExecutor
from graphs.spec import WorldSpec, get_spec  # noqa: E402


# words that presuppose an earlier turn; none may appear in a session's first utterance
_REFERS_BACK = re.compile(
    r"\b(your last answer|last time|this time|again|earlier|previous|those|these|that one|"
    r"next step|next query|next thing|continuing|also|as well|any more|anymore|from before)\b", re.I)
_GREETING = re.compile(r"^(?:.*?[.!?:]\s+)?(hi|hello|hey|good (?:morning|afternoon|evening))\b|"
                       r"\b(sorry|apolog\w*|excuse me)\b", re.I)
# one lead-in: a short segment ending in ':' or a short stock sentence / interjection at the start
_LEAD_COLON = re.compile(r"^[^:.?!{}]{2,60}?:\s+")
_LEAD_SENTENCE = re.compile(
    r"^(?:new question|switching topics|something different now|let's leave that aside|moving on[^.]*|changing the subject|here's a different one|"
    r"sorry[^.?!]*|hi\b[^.?!]*|hello|hey|um|ok so|"
    r"i'm (?:fact-checking|studying|new|still)[^.?!]*|i'll be checking[^.?!]*|"
    r"i've been going through[^.?!]*|so, just to give you[^.?!]*|okay, here's the next thing[^.?!]*|"
    r"(?:going back|back|returning|let's go back) to the [^:.?!]* (?:from before|we had earlier|from earlier))"
    r"[.,!:]?\s+", re.I)
# words a value may share with the text before it without naming its type ("... and By Ash and Oath")
_FUNCTION_WORDS = frozenset({"a", "an", "and", "the", "of", "in", "on", "at", "to", "by", "for", "with", "or"})
_AGG_ADJ = r"(?:highest|largest|maximum|max|top|biggest|most high|average|mean|lowest|smallest|minimum|min)"
_RET_AS = re.compile(r"(\w+)\.`?(\w+)`? AS `?(\w+)`?")
_AGG_FN = re.compile(r"\b(count|sum|avg|max|min|collect|percentileCont|stDev)\(", re.I)
_THRESH = re.compile(r"\.`?(\w+)`? ([<>]=?) (-?\d+(?:\.\d+)?)")


# the persona phrases of the templates (the text of each wrapper around the core), lower-cased
PERSONA_PHRASES = frozenset(
    part.strip(" :,").lower() for wrappers in _WRAPPERS.values() for w in wrappers
    for part in re.split(r"\{core\}|\{lc\}", w) if len(part.strip(" :,").split()) >= 2)


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def is_round(value: str) -> bool:
    """How a person says a threshold (the generator's own rule, benchmark.world_builder.is_round)."""
    return builder_is_round(float(value))


def lead_ins(text: str) -> int:
    """How many stacked lead-ins open ``text``."""
    n, rest = 0, text
    while True:
        m = _LEAD_SENTENCE.match(rest) or _LEAD_COLON.match(rest)
        if not m or len(m.group(0).split()) > 25:
            return n
        n += 1
        rest = rest[m.end():]


def result_label(cypher: str) -> str | None:
    """The label of the nodes a listing gold returns (``RETURN DISTINCT n3.name AS name``)."""
    m = re.search(r"RETURN DISTINCT (\w+)\.", cypher)
    if not m:
        return None
    lab = re.search(r"\(" + re.escape(m.group(1)) + r":`?(\w+)`?", cypher)
    return lab.group(1) if lab else None


def _var_labels(cypher: str) -> dict[str, str]:
    return {v: lab for v, lab in re.findall(r"\((\w+):`?(\w+)`?", cypher)}


def hop_origin(cypher: str) -> str | None:
    """The label of the node the listed set was reached from in its last hop (the anchor of an
    opening, the prior set of an expansion); None when the set was not reached by a hop."""
    m = re.search(r"RETURN DISTINCT (\w+)\.", cypher)
    if not m:
        return None
    v = re.escape(m.group(1))
    labels = _var_labels(cypher)
    node = r"\((\w*)(?::`?(\w+)`?)?[^()]*\)"
    hop = re.compile(node + r"<?-\[[^\]]*\]->?\(" + v + r":")
    found = list(hop.finditer(cypher))
    if not found:
        return None
    var, label = found[-1].group(1), found[-1].group(2)
    return label or labels.get(var)


def unused_relationship_variables(cypher: str) -> list[str]:
    """Relationship variables the gold binds but never uses (``-[e_n3:RIDES]->`` listed only)."""
    return [v for v in re.findall(r"\[(\w+):", cypher) if len(re.findall(r"\b" + v + r"\b", cypher)) < 2]


def redundant_distinct(cypher: str) -> list[str]:
    """``WITH DISTINCT x`` lines where ``x`` already binds each node once: after a one-node ``MATCH``,
    after a filter on a ``WITH DISTINCT x`` or after a ranked cut (``WITH x ORDER BY ... LIMIT k``).
    A careful annotator joins the filters (``WHERE a AND b``) instead."""
    found, distinct = [], None  # the variable known to bind each node once, if any
    for line in cypher.split("\n"):
        m = re.match(r"WITH DISTINCT (\w+)(?: WHERE .*)?$", line)
        if m:
            if distinct == m.group(1):
                found.append(line)
            distinct = m.group(1)
        elif re.match(r"WITH (\w+)(?: WHERE .*| ORDER BY .* LIMIT \d+)?$", line):
            distinct = distinct if distinct == line.split()[1] else None
        elif re.match(r"MATCH \((\w+):`?\w+`?\)$", line):
            distinct = re.match(r"MATCH \((\w+)", line).group(1)
        elif not line.startswith("WHERE "):
            distinct = None
    return found


# the aggregates a phenomenon's gold may compute: the paper's 13 labels have no AGG_MIN, and AGG_MAX
# (the paper's "extreme value" question) covers the minimum as its other extreme (benchmark/session.py)
AGGREGATE_OF = {"AGG_COUNT": {"count"}, "AGG_MAX": {"max", "min"}, "AGG_AVG": {"avg"}, "AGG_SUM": {"sum"}}


def plural_grammar(text: str, plurals: set[str]) -> list[str]:
    """A plural noun where English needs a singular: "every provinces", "each legions", "a provinces",
    "provinces record" (a noun used as a modifier is singular)."""
    bad = []
    for p in plurals:
        e = re.escape(p)
        for pat in (r"\b(?:every|each|a|an) " + e + r"\b", r"\b" + e + r" (?:record|records|entry|entries)\b"):
            bad += [m.group(0) for m in re.finditer(pat, text, re.I)]
    return bad


def _plural_word(word: str) -> bool:
    return len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is", "ics"))


def _gold_prop(cypher: str) -> str | None:
    m = re.search(r"\b(?:sum|avg|max|min)\(\w+\.`?(\w+)`?\)", cypher)
    return m.group(1) if m else None


def _prop_spec(spec: WorldSpec, prop: str, cypher: str):
    """(owner, PropertySpec) of ``prop``: a label the gold matches, else a relationship type."""
    for node in spec.nodes:
        for p in node.properties:
            if p.name == prop and re.search(r":`?" + node.label + r"\b", cypher):
                return node.label, p
    for rel in spec.relationships:
        for p in rel.properties:
            if p.name == prop:
                return rel.type, p
    return None, None


def _both_ways(cypher: str, types: set[str]) -> str:
    """``cypher`` with every relationship of ``types`` read in both directions."""
    def undirected(m: re.Match) -> str:
        return f"-[{m.group(1)}:{m.group(2)}{m.group(3)}]-" if m.group(2) in types else m.group(0)

    cypher = re.sub(r"<-\[(\w*):`?(\w+)`?([^\]]*)\]-(?!>)", undirected, cypher)
    return re.sub(r"(?<!<)-\[(\w*):`?(\w+)`?([^\]]*)\]->", undirected, cypher)


def _uses(cypher: str, types: set[str]) -> bool:
    return any(re.search(r"\[\w*:" + t + r"\b", cypher) for t in types)


def where_conditions(cypher: str) -> list[str]:
    """The conditions of every WHERE (``WHERE a AND b`` gives two; a negated group stays whole)."""
    out = []
    for m in re.finditer(r"(?m)^(?:WITH (?:DISTINCT )?\w+ )?WHERE (.*)$", cypher):
        out += re.split(r" AND (?![^(]*\))", m.group(1))
    return out


def existence_tests(cypher: str) -> list[str]:
    """The null / existence tests a question asks for (``x.p IS NULL``, ``x.p IS NOT NULL``), not the
    guard a ranking puts before ``ORDER BY x.p`` (a null never ranks first)."""
    found = []
    for cond in where_conditions(cypher):
        m = re.fullmatch(r"(\w+\.`?\w+`?) IS (?:NOT )?NULL", cond.strip())
        if m and not re.search(r"ORDER BY " + re.escape(m.group(1)) + r"\b", cypher):
            found.append(cond.strip())
    return found


def question_kinds(session: Session, turn) -> set[str]:
    """The question kinds a gold exercises (read off the Cypher and the columns)."""
    c = turn.gold_cypher
    kinds = set()
    ret = c[c.rfind("RETURN"):]
    aggs = {a.lower() for a in _AGG_FN.findall(ret)}
    if aggs and len(turn.gold_columns) > 1 and re.search(r"RETURN (DISTINCT )?\w+\.\w+", ret):
        kinds.add("grouped_aggregation")
    if "min" in aggs:
        kinds.add("min")
    if re.search(r"ORDER BY [^\n]*LIMIT ([2-9]|\d\d)", c):
        kinds.add("top_k")
    if existence_tests(c):
        kinds.add("existence_null")
    if re.search(r"\[(\w+):\w+[^\]]*\][^\n]*\n?(?:.|\n)*\b\1\.\w+", c) and re.search(r"\[(\w+):", c):
        kinds.add("relationship_property")
    first = c.split("\nWITH")[0]
    if turn.index == 0 or turn.phenomenon == "TOPIC_SHIFT":
        if len(re.findall(r"\[\w*:", first)) >= 2:
            kinds.add("two_hop_opening")
    if len(turn.gold_columns) > 1 and not aggs:
        kinds.add("multi_column")
    if "date(" in c or "duration" in c:
        kinds.add("date_condition")
    if re.search(r"= (true|false)\b|\.(\w+) IS (true|false)|NOT \w+\.\w+\b(?! IS)", c):
        kinds.add("boolean_condition")
    if "OPTIONAL MATCH" in c:
        kinds.add("optional_match")
    kinds |= filter_variant_kinds(session, turn) | range_sort_swap_kinds(session, turn)
    return kinds | aggregate_variant_kinds(turn)


NEW_KINDS = ("grouped_aggregation", "min", "top_k", "existence_null", "relationship_property", "two_hop_opening",
             "multi_column", "date_condition", "boolean_condition", "optional_match")


# --- filter variants (issue 20) ---
FILTER_VARIANT_KINDS = ("either_or", "string_match", "existence_subquery", "correction")
NEW_KINDS += FILTER_VARIANT_KINDS
_VARIANT_PATTERNS = {"either_or": re.compile(r"\.`?\w+`? IN \["),
                     "string_match": re.compile(r"\.`?\w+`? (?:STARTS WITH|CONTAINS) '"),
                     "existence_subquery": re.compile(r"\bEXISTS \{")}


def filter_variant_kinds(session: Session, turn) -> set[str]:
    """The filter variants a turn asks for itself: a condition its gold has more often than the gold it
    builds on (a count over an either/or set does not ask it again); and a correction: a filter turn
    on a filter turn of its own label that drops one of that turn's literals (it re-derives that turn's
    base with another value, where a further filter keeps them all)."""
    dep = session.turns[turn.depends_on] if turn.depends_on is not None else None
    before = dep.gold_cypher if dep is not None else ""
    kinds = {k for k, pat in _VARIANT_PATTERNS.items()
             if len(pat.findall(turn.gold_cypher)) > len(pat.findall(before))}
    if dep is not None and turn.phenomenon in FILTERS and dep.phenomenon == turn.phenomenon \
            and any(kv not in turn.gold_key_values for kv in dep.gold_key_values):
        kinds.add("correction")
    return kinds


# --- aggregate variants (issue 20) ---
# comparisons with the user's number, yes/no questions over the members, percentages and per-group sums
# or means (benchmark.chain's variants), read off the final RETURN; a yes/no's any() / all() over the
# members is a count (AGG_COUNT) for the label check
AGGREGATE_VARIANT_KINDS = ("comparison", "yes_no", "percentage", "per_group_sum_avg")
NEW_KINDS += AGGREGATE_VARIANT_KINDS
_YES_NO = re.compile(r"\b(any|all)\(\w+ IN collect\(")
AGGREGATE_OF["AGG_COUNT"] = AGGREGATE_OF["AGG_COUNT"] | {"any", "all"}


def aggregate_variant_kinds(turn) -> set[str]:
    """The variant kinds a gold exercises (``count(n) > 10 AS count_above``, ``any(x IN collect(n) ...)``,
    ``100.0 * count(CASE WHEN ...) / count(n)``, ``RETURN n.g AS g, sum(n.p) AS sum_p``)."""
    ret = turn.gold_cypher[turn.gold_cypher.rfind("RETURN"):]
    kinds = set()
    if re.search(r"\b(?:count|sum|avg|max|min)\([^()]*\) [<>] -?[\d.]+ AS ", ret):
        kinds.add("comparison")
    if _YES_NO.search(ret):
        kinds.add("yes_no")
    if re.search(r"\b100\.0 \* count\(CASE WHEN ", ret):
        kinds.add("percentage")
    if re.match(r"RETURN \w+\.`?\w+`? AS `?\w+`?, (?:sum|avg)\(", ret):
        kinds.add("per_group_sum_avg")
    return kinds


# --- date ranges, sorted lists, swaps (issue 20) ---
_YEAR_RANGE = re.compile(r"(\w+\.`?\w+`?) >= [^\n]*? AND \1 < ")
_LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'|\b\d+(?:\.\d+)?\b")


def range_sort_swap_kinds(session: Session, turn) -> set[str]:
    """date_range_aggregate: an aggregate over the members whose date or year falls in a range;
    sorted_list: a listing whose final RETURN is ordered and uncut (no LIMIT); swap: a topic shift whose
    gold is the previous turn's with only a literal (the anchor) changed."""
    c = turn.gold_cypher
    kinds = set()
    if _AGG_FN.search(c[c.rfind("RETURN"):]) and _YEAR_RANGE.search(c):
        kinds.add("date_range_aggregate")
    if re.search(r"\nORDER BY [^\n]*$", c) and "LIMIT" not in c[c.rfind("RETURN"):]:
        kinds.add("sorted_list")
    if turn.phenomenon == "TOPIC_SHIFT" and turn.index > 0:
        before = session.turns[turn.index - 1].gold_cypher
        if before != c and _LITERAL.sub("?", before) == _LITERAL.sub("?", c):
            kinds.add("swap")
    return kinds


RANGE_SORT_SWAP_KINDS = ("date_range_aggregate", "sorted_list", "swap")
NEW_KINDS = NEW_KINDS + RANGE_SORT_SWAP_KINDS


ISSUE20_KINDS = FILTER_VARIANT_KINDS + AGGREGATE_VARIANT_KINDS + RANGE_SORT_SWAP_KINDS


def new_kind_shares(per_world: dict) -> dict:
    """Each question kind of issue 20 as a share of all turns, overall and per world (a world's turns: the
    sum of its phenomena in ``kinds_per_world``); the issue asks at least 2% overall and some in every world."""
    totals = {w: sum(v for k, v in kinds.items() if k.isupper()) for w, kinds in per_world.items()}
    n = sum(totals.values()) or 1
    out = {}
    for k in ISSUE20_KINDS:
        worlds = {w: round(kinds.get(k, 0) / (totals[w] or 1), 4) for w, kinds in per_world.items()}
        out[k] = {"overall": round(sum(kinds.get(k, 0) for kinds in per_world.values()) / n, 4),
                  "lowest_world": min(worlds.values(), default=0.0), "per_world": worlds}
    return out


def complexity(turn) -> dict:
    c = turn.gold_cypher
    ret = c[c.rfind("RETURN"):]
    return {
        "match": len(re.findall(r"\bMATCH\b", c)),
        "hops": len(re.findall(r"\[\w*:", c)),
        "with": len(re.findall(r"\bWITH\b", c)),
        "agg": sorted({a.lower() for a in _AGG_FN.findall(ret)}),
        "order_by": "ORDER BY" in c,
        "varlen": bool(re.search(r"\*\d*\.\.", c)),
        "optional": "OPTIONAL MATCH" in c,
    }


class World(NamedTuple):
    """What the checks read of one world: its spec, its wording, its plural nouns, its symmetric types."""

    spec: WorldSpec
    lex: Lexicon
    plurals: set[str]
    symmetric: set[str]

    @classmethod
    def load(cls, world: str) -> World:
        spec = get_spec(world)
        lx = Lexicon(spec)
        plurals = {lx.noun(n.label) for n in spec.nodes if lx.noun(n.label) != lx.noun(n.label, False)}
        return cls(spec, lx, plurals, {r.type for r in spec.relationships if getattr(r, "symmetric", False)})


class Tally:
    """Each check's count and denominator (the turns it applies to), and its first three examples."""

    def __init__(self) -> None:
        self.counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        self.examples: dict[str, list[str]] = defaultdict(list)

    def hit(self, name: str, flag: bool, example: str = "") -> None:
        self.counts[name][1] += 1
        if flag:
            self.counts[name][0] += 1
            if len(self.examples[name]) < 3 and example:
                self.examples[name].append(example)

    def rates(self) -> dict:
        return {k: {"count": v[0], "of": v[1], "rate": round(v[0] / v[1], 4) if v[1] else 0.0}
                for k, v in self.counts.items()}


class Seen:
    """What a session showed before the current turn: the state of the checks that look back."""

    def __init__(self) -> None:
        self.greeted = False
        self.persona_phrases: set[str] = set()
        self.listed: list[tuple[int, list]] = []  # (turn index, rows) of each listing
        self.listed_labels: list[tuple[int, str | None]] = []  # ... and its label
        self.labels_after: list[str | None] = []  # the active set's label after each turn
        self.active_turn = 0

    def remember(self, t) -> None:
        """Take in turn ``t`` once every check has read it."""
        self.greeted = self.greeted or bool(_GREETING.search(t.shown_utterance))
        self.persona_phrases |= persona_phrases(t.shown_utterance)
        if t.chain_mode in LISTING_MODES:
            self.listed_labels.append((t.index, result_label(t.gold_cypher)))
            self.labels_after.append(result_label(t.gold_cypher))
            self.listed.append((t.index, t.gold_rows))
            self.active_turn = t.index
        else:  # an aggregate keeps the set it was asked over active
            self.labels_after.append(self.labels_after[t.depends_on] if t.depends_on is not None else None)
            self.active_turn = t.depends_on if t.depends_on is not None else self.active_turn


class TurnView(NamedTuple):
    """One turn as a check reads it: the turn, its session, its world and what the session showed before."""

    session: Session
    turn: Turn
    world: World
    seen: Seen

    @property
    def text(self) -> str:
        return self.turn.shown_utterance

    @property
    def tag(self) -> str:
        """How an example names the turn."""
        return f"{self.session.id}#{self.turn.index}: {self.text}"

    @property
    def listing(self) -> bool:
        return self.turn.chain_mode in LISTING_MODES

    def source_cypher(self) -> str:
        """The gold of the turn this one builds on ("" for none)."""
        return self.session.turns[self.turn.depends_on].gold_cypher if self.turn.depends_on is not None else ""


Hit = Callable[..., None]  # Tally.hit: (check name, flagged?, example)


def persona_phrases(text: str) -> set[str]:
    return {p for p in PERSONA_PHRASES if p in text.lower()}


# -- the checks of one turn (each calls hit once per turn it applies to) -----------------------------
def check_opening_refers_back(v: TurnView, hit: Hit) -> None:
    if v.turn.index == 0:
        hit("opening_refers_back", bool(_REFERS_BACK.search(v.text)), v.tag)


def check_greeting_after_turn_1(v: TurnView, hit: Hit) -> None:
    if v.turn.index > 0:
        hit("greeting_or_apology_after_turn_1", bool(_GREETING.search(v.text)), v.tag)


def check_greets_more_than_once(v: TurnView, hit: Hit) -> None:
    hit("greets_more_than_once", bool(_GREETING.search(v.text)) and v.seen.greeted, v.tag)


def check_repeated_persona_phrase(v: TurnView, hit: Hit) -> None:
    hit("repeated_persona_phrase", bool(persona_phrases(v.text) & v.seen.persona_phrases), v.tag)


def check_stacked_lead_ins(v: TurnView, hit: Hit) -> None:
    hit("stacked_lead_ins", lead_ins(v.text) >= 2, v.tag)


def check_duplicated_type_noun(v: TurnView, hit: Hit) -> None:
    """A value after a word that repeats its own type noun ("the reef Khafel Reef")."""
    dup = False
    for kv in v.turn.gold_key_values:
        value = kv.get("value")
        if isinstance(value, str) and " " in value or isinstance(value, str) and value[:1].isupper():
            tokens = {w.rstrip("s") for w in _words(value)}
            m = re.search(r"\b([A-Za-z]+) " + re.escape(value), v.text)
            if m and m.group(1).lower().rstrip("s") in tokens - _FUNCTION_WORDS and m.group(1)[:1].islower():
                dup = True
    hit("duplicated_type_noun", dup, v.tag)


def check_plural_noun_grammar(v: TurnView, hit: Hit) -> None:
    hit("plural_noun_grammar", bool(plural_grammar(v.text, v.world.plurals)), v.tag)


def check_redundant_with_distinct(v: TurnView, hit: Hit) -> None:
    hit("redundant_with_distinct", bool(redundant_distinct(v.turn.gold_cypher)), v.tag)


def check_aggregate_label_mismatch(v: TurnView, hit: Hit) -> None:
    t = v.turn
    if t.phenomenon in AGGREGATE_OF:
        fns = {f.lower() for f in _AGG_FN.findall(t.gold_cypher[t.gold_cypher.rfind("RETURN"):])}
        fns |= {q.lower() for q in _YES_NO.findall(t.gold_cypher[t.gold_cypher.rfind("RETURN"):])}
        hit("aggregate_label_mismatch", not AGGREGATE_OF[t.phenomenon] & fns,
            f"{v.tag} [{t.phenomenon}: {', '.join(sorted(fns))}]")


def check_ungrammatical_aggregate(v: TurnView, hit: Hit) -> None:
    """An adjective before a plural property phrase ("the highest years of training")."""
    t = v.turn
    if t.phenomenon.startswith("AGG_") and t.phenomenon != "AGG_COUNT" or "min(" in t.gold_cypher:
        prop = _gold_prop(t.gold_cypher)
        bad = False
        if prop:
            owner, _ = _prop_spec(v.world.spec, prop, t.gold_cypher)
            phrase = v.world.lex.prop(owner or "", prop)
            last = phrase.split(" in ")[0].split(" of ")[0].split()[-1].lower()  # the head noun ("years of training")
            adjective_before = re.search(r"\b" + _AGG_ADJ + r" " + re.escape(phrase) + r"\b", v.text, re.I)
            bad = bool(_plural_word(last) and not phrase.startswith(("number of", "count of")) and adjective_before)
        hit("ungrammatical_aggregate", bad, v.tag)


def check_machine_threshold(v: TurnView, hit: Hit) -> None:
    c = v.turn.gold_cypher
    if v.turn.phenomenon in ("THRESHOLD", "COMPOUND"):
        m = list(_THRESH.finditer(c.split("\n")[-2] if "\n" in c else c))
        m = m or list(_THRESH.finditer(c))
        if m:  # a year is said exactly ("before 1850")
            year = is_year(m[-1].group(1)) and "." not in m[-1].group(3)
            hit("machine_threshold", not year and not is_round(m[-1].group(3)), v.tag)


def check_contrast_of_contrast(v: TurnView, hit: Hit) -> None:
    t = v.turn
    if t.phenomenon == "CONTRAST" and t.depends_on is not None:
        hit("contrast_of_contrast", v.session.turns[t.depends_on].phenomenon == "CONTRAST", v.tag)


def check_expand_round_trip(v: TurnView, hit: Hit) -> None:
    if v.turn.phenomenon == "EXPAND":
        hit("expand_round_trip", any(rows == v.turn.gold_rows for _, rows in v.seen.listed), v.tag)


def check_expand_back_to_origin(v: TurnView, hit: Hit) -> None:
    # back to the kind of node the set was itself reached from (creatures sheltered by a reef, then
    # "the reefs sheltering those creatures")
    if v.turn.phenomenon == "EXPAND":
        origin = hop_origin(v.source_cypher())
        hit("expand_back_to_origin", origin is not None and origin == result_label(v.turn.gold_cypher), v.tag)


def check_pivot_back_to_origin(v: TurnView, hit: Hit) -> None:
    if v.turn.phenomenon == "PIVOT":  # a pivot moves on, never back to where its set came from
        origin = hop_origin(v.source_cypher())
        hit("pivot_back_to_origin", origin is not None and origin == result_label(v.turn.gold_cypher), v.tag)


def check_unused_relationship_variable(v: TurnView, hit: Hit) -> None:
    hit("unused_relationship_variable", bool(unused_relationship_variables(v.turn.gold_cypher)), v.tag)


def check_relationship_aggregate_without_link(v: TurnView, hit: Hit) -> None:
    c = v.turn.gold_cypher
    edge_agg = re.search(r"\b(?:sum|avg|max|min)\((\w+)\.", c)
    edge_type = edge_agg and re.search(r"\[" + edge_agg.group(1) + r":`?(\w+)", c)
    if edge_type:  # a relationship's own property: the wording must name the relationship
        rel = next(r for r in v.world.spec.relationships if r.type == edge_type.group(1))
        phrases = {v.world.lex.link(rel.type, rel.source, rel.target, d) for d in ("forward", "backward")}
        hit("relationship_aggregate_without_link", not any(p in v.text for p in phrases), v.tag)


def check_persona_remark_misfit(v: TurnView, hit: Hit) -> None:
    low = v.text.lower()  # a remark about a list on a figure, or about rounding on a list
    hit("persona_remark_misfit", any(r in low for r in LISTING_ONLY_REMARKS) and not v.listing
        or any(r in low for r in FIGURE_ONLY_REMARKS) and v.turn.chain_mode != "agg_numeric", v.tag)


def check_repeated_result_set(v: TurnView, hit: Hit) -> None:
    if v.listing and v.turn.index > 0:
        hit("repeated_result_set", any(rows == v.turn.gold_rows for _, rows in v.seen.listed), v.tag)


def check_ambiguous_back_reference(v: TurnView, hit: Hit) -> None:
    # a back reference builds on a set other than the active one (past a topic shift) ... and it is
    # ambiguous when the current set is of the same kind, or when a later turn listed a set of that
    # kind too ("the colonies from earlier" after two colony lists)
    t, seen = v.turn, v.seen
    if t.depends_on is not None and t.depends_on != seen.active_turn:
        ref, active = seen.labels_after[t.depends_on], seen.labels_after[seen.active_turn]
        later = any(i > t.depends_on and lab == ref for i, lab in seen.listed_labels)
        hit("ambiguous_back_reference", ref is not None and (ref == active or later), v.tag)


def _aggregated_prop_spec(v: TurnView):
    prop = _gold_prop(v.turn.gold_cypher)
    return _prop_spec(v.world.spec, prop, v.turn.gold_cypher)[1] if prop else None


def check_sum_over_non_additive(v: TurnView, hit: Hit) -> None:
    if v.turn.phenomenon == "AGG_SUM" or re.search(r"\bsum\(", v.turn.gold_cypher):
        pspec = _aggregated_prop_spec(v)
        hit("sum_over_non_additive", pspec is None or not getattr(pspec, "additive", False), v.tag)


def check_extreme_or_mean_over_non_comparable(v: TurnView, hit: Hit) -> None:
    if re.search(r"\b(max|min|avg)\(", v.turn.gold_cypher):
        pspec = _aggregated_prop_spec(v)
        hit("extreme_or_mean_over_non_comparable", pspec is not None and not getattr(pspec, "comparable", True),
            v.tag)


def check_gold_renames_to_name(v: TurnView, hit: Hit) -> None:
    c = v.turn.gold_cypher
    renamed = [(p, a) for _, p, a in _RET_AS.findall(c[c.rfind("RETURN"):]) if p != a and a == "name"]
    hit("gold_renames_to_name", bool(renamed), v.tag)


# --- names as users type them (issue 20) ---
def check_typed_name_not_as_recorded(v: TurnView, hit: Hit) -> None:
    """A typed name the utterance does not say as recorded, or whose stored value the gold does not hold."""
    for r in v.turn.typed_names:
        hit("typed_name_not_as_recorded", r["typed"] not in v.text or literal(r["stored"]) not in v.turn.gold_cypher,
            f"{v.tag} [{r['kind']}: {r['typed']} for {r['stored']}]")


def typed_names_report(sessions: list[Session], *, executor_for=None) -> dict:
    """The share of turns with a typed name per world and overall (``lookup``: a typo or a partial name,
    what only a value lookup resolves), the kinds, and, with ``executor_for``, every typed name
    re-verified on the server: ``equals_stored`` counts typed forms a plain equality test finds (or, for a
    typo or a partial name, a case-insensitive one), ``search_failures`` those SEARCH_VALUES does not
    resolve to the stored value (benchmark.typed_names.resolves). Both must be 0."""
    per_world: dict[str, Counter] = defaultdict(Counter)
    kinds: Counter = Counter()
    equals = failures = 0
    examples: list[str] = []
    for s in sessions:
        for t in s.turns:
            c = per_world[s.world]
            c["turns"] += 1
            c["typed"] += bool(t.typed_names)
            c["lookup"] += any(r["kind"] in LOOKUP_KINDS for r in t.typed_names)
            for r in t.typed_names:
                kinds[r["kind"]] += 1
                if executor_for is None:
                    continue
                run = partial(_run_params, executor_for(s.world))
                counts = equal_counts(run, r["label"], r["property"], r["typed"])
                if counts is None or counts[0] or counts[1] and r["kind"] != "case":
                    equals += 1
                    examples.append(f"{s.id}#{t.index} equals a stored value: {r}")
                found = search_values(s.world, r["label"], r["property"], r["typed"]).values
                if not resolves(r["kind"], r["typed"], r["stored"], list(found)):
                    failures += 1
                    examples.append(f"{s.id}#{t.index} not resolved: {r} -> {found}")

    def shares(c: Counter) -> dict:
        n = c["turns"] or 1
        return {"turns": c["turns"], "typed": c["typed"], "lookup": c["lookup"],
                "typed_share": round(c["typed"] / n, 4), "lookup_share": round(c["lookup"] / n, 4)}
    total = sum(per_world.values(), Counter())
    return {"per_world": {w: shares(per_world[w]) for w in sorted(per_world)}, "overall": shares(total),
            "kinds": dict(sorted(kinds.items())), "checked": executor_for is not None,
            "equals_stored": equals, "search_failures": failures, "examples": examples[:5]}


def _run_params(executor, cypher: str, params: dict):
    return executor.run(cypher, params=params, max_rows=10, timeout=60)


def render_typed_names(report: dict) -> list[str]:
    o = report["overall"]
    out = ["", f"names as users type them: {o['typed_share'] * 100:.2f}% of turns ({o['typed']} of {o['turns']}), "
               f"{o['lookup_share'] * 100:.2f}% a typo or a partial name ({o['lookup']}); kinds {report['kinds']}"]
    out += [f"  {w}: {c['typed_share'] * 100:.2f}% typed, {c['lookup_share'] * 100:.2f}% lookup "
            f"({c['lookup']} of {c['turns']})" for w, c in report["per_world"].items()]
    if report["checked"]:
        out.append(f"  re-verified on the server: {report['equals_stored']} equal a stored value, "
                   f"{report['search_failures']} not resolved by SEARCH_VALUES")
    else:
        out.append("  (not re-verified: --no-db)")
    return out + [f"  {e[:200]}" for e in report["examples"]]


TURN_CHECKS: tuple[Callable[[TurnView, Hit], None], ...] = (
    check_opening_refers_back, check_greeting_after_turn_1, check_greets_more_than_once,
    check_repeated_persona_phrase, check_stacked_lead_ins, check_duplicated_type_noun, check_plural_noun_grammar,
    check_redundant_with_distinct, check_aggregate_label_mismatch, check_ungrammatical_aggregate,
    check_machine_threshold, check_contrast_of_contrast, check_expand_round_trip, check_expand_back_to_origin,
    check_pivot_back_to_origin, check_unused_relationship_variable, check_relationship_aggregate_without_link,
    check_persona_remark_misfit, check_repeated_result_set, check_ambiguous_back_reference,
    check_sum_over_non_additive, check_extreme_or_mean_over_non_comparable, check_gold_renames_to_name,
    check_typed_name_not_as_recorded)


def check_symmetric_traversal(pending: list[tuple[str, Turn]], worlds: dict[str, World], executor_for,
                              hit: Hit) -> int:
    """Re-executes each gold that crosses a symmetric type with that type read both ways: a gold that
    reads it one way only misses rows. Returns how many of the golds read one direction."""
    directed_count = 0
    for world, t in pending:
        both = _both_ways(t.gold_cypher, worlds[world].symmetric)
        directed = both != t.gold_cypher
        changed = False
        if directed:
            directed_count += 1
            r = executor_for(world).run(both, max_rows=5000, timeout=60)
            changed = r.error is not None or canonical_rows(r.rows) != canonical_rows(t.gold_rows)
        hit("symmetric_traversed_one_way", changed, f"{t.index}: {t.utterance}")
    return directed_count


# -- the profile of the build (no defects: what the sessions ask and how) -----------------------------
def five_word_openings(turns: list[Turn]) -> dict:
    n = len(turns)
    openings = Counter(" ".join(_words(t.shown_utterance)[:5]) for t in turns)
    shared = sum(c for c in openings.values() if c > 21)
    return {"shared_by_more_than_20_others": round(shared / n, 4),
            "largest_share": round(max(openings.values()) / n, 4), "top": openings.most_common(3)}


def kinds_per_world(sessions: list[Session]) -> dict:
    """Per world, how many turns exercise each question kind and each phenomenon."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for s in sessions:
        for t in s.turns:
            counts[s.world].update(question_kinds(s, t))
            counts[s.world][t.phenomenon] += 1
    return {w: dict(sorted(counts[w].items())) for w in sorted(counts)}


def gold_complexity(turns: list[Turn]) -> dict:
    n = len(turns)
    total = Counter()
    agg_kinds: Counter = Counter()
    for t in turns:
        cx = complexity(t)
        total.update({k: cx[k] for k in ("match", "hops", "with", "order_by", "varlen", "optional")})
        agg_kinds.update(cx["agg"])
    return {"match_per_gold": round(total["match"] / n, 3), "hops_per_gold": round(total["hops"] / n, 3),
            "with_per_gold": round(total["with"] / n, 3), "order_by_share": round(total["order_by"] / n, 4),
            "varlen_share": round(total["varlen"] / n, 4), "optional_share": round(total["optional"] / n, 4),
            "aggregation_kinds": dict(sorted(agg_kinds.items()))}


def extends_previous_share(sessions: list[Session]) -> float:
    """Share of follow-up golds that are the gold they build on (less its RETURN) plus at most two lines."""
    follow_ups = extends = 0
    for s in sessions:
        for t in s.turns:
            if t.depends_on is None:
                continue
            follow_ups += 1
            head = [x for x in s.turns[t.depends_on].gold_cypher.split("\n") if not x.startswith("RETURN")]
            lines = t.gold_cypher.split("\n")
            extends += lines[:len(head)] == head and len(lines) - len(head) <= 2
    return round(extends / follow_ups, 4) if follow_ups else 0.0


# --- wording variety (issue 20) ---
def repeated_utterance_share(turns: list[Turn]) -> dict:
    """The share of turns whose utterance (as shown: the ambiguous wording where there is one) occurs,
    character for character, more than once in the build; and the most repeated ones."""
    counts = Counter(t.shown_utterance for t in turns)
    repeated = sum(c for c in counts.values() if c > 1)
    return {"share": round(repeated / len(turns), 4) if turns else 0.0, "turns": repeated,
            "top": [(u, c) for u, c in counts.most_common(3) if c > 1]}


@functools.lru_cache(maxsize=None)
def _core_patterns(phenomenon: str) -> tuple[tuple[str, re.Pattern], ...]:
    """The core wordings of every family of ``phenomenon`` (its own, its shapes OPENING_FILTERED ...,
    its ambiguous variant) as patterns: literal text with any text for a slot, the first letter in either
    case (a wrapper may lower-case it); longest first, so the most specific wording wins."""
    cores = {c for fam, regs in _CORES.items() if fam == phenomenon or fam.startswith(phenomenon + "_")
             for cs in regs.values() for c in cs}
    out = []
    for core in sorted(cores, key=len, reverse=True):
        parts = re.split(r"\{\w+\}", core)
        body = ".+?".join(re.escape(p) for p in parts)
        head = f"[{re.escape(core[0].upper())}{re.escape(core[0].lower())}]" if core[0].isalpha() else ""
        out.append((core, re.compile(head + body[len(re.escape(core[0])):] if head else body)))
    return tuple(out)


def core_wordings_used(turns: list[Turn]) -> dict[str, int]:
    """Per phenomenon, how many distinct core wordings (benchmark/wordings.yaml) its turns use."""
    used: dict[str, set[str]] = defaultdict(set)
    for t in turns:
        for core, pattern in _core_patterns(t.phenomenon):
            if pattern.search(t.shown_utterance):
                used[t.phenomenon].add(core)
                break
    return {p: len(used[p]) for p in sorted({t.phenomenon for t in turns})}


_NUMBER = re.compile(r"\d")


def _masked_words(text: str) -> list[str]:
    """An utterance's words for the classifier: lower case, a number as <num>, a capitalised word
    inside a sentence (a name) as <name>, so only the wording is left to learn from."""
    words = []
    for sentence in re.split(r"(?<=[.?!:])\s+", text):
        for i, w in enumerate(re.findall(r"[A-Za-z0-9'\-]+", sentence)):
            words.append("<num>" if _NUMBER.search(w) else "<name>" if i and w[0].isupper() else w.lower())
    return words


def phenomenon_classifier_accuracy(sessions: list[Session]) -> dict:
    """How well the utterance alone names the phenomenon: a multinomial naive Bayes on words (and word
    pairs) with names and numbers masked, trained on the turns of every other world (sorted) and tested
    on the rest, so a world's own nouns do not help. The lower, the less the wording gives away."""
    worlds = sorted({s.world for s in sessions})
    if len(worlds) < 2:
        return {"accuracy": None, "tested": 0}
    train_worlds = set(worlds[::2])
    docs = defaultdict(list)
    for s in sessions:
        for t in s.turns[1:]:  # turn 1 is always OPENING: nothing to tell apart
            w = _masked_words(t.shown_utterance)
            docs[s.world in train_worlds].append((t.phenomenon, w + [a + " " + b for a, b in zip(w, w[1:])]))
    prior: Counter = Counter()
    freq: dict[str, Counter] = defaultdict(Counter)
    for label, feats in docs[True]:
        prior[label] += 1
        freq[label].update(feats)
    vocab = len({f for c in freq.values() for f in c})
    totals = {label: sum(c.values()) for label, c in freq.items()}
    right = 0
    for label, feats in docs[False]:
        def score(c: str) -> float:
            return math.log(prior[c]) + sum(math.log((freq[c][f] + 1) / (totals[c] + vocab)) for f in feats)
        right += max(prior, key=score) == label
    n = len(docs[False])
    return {"accuracy": round(right / n, 4) if n else None, "tested": n,
            "train_worlds": sorted(train_worlds)}


def audit(sessions: list[Session], *, executor_for=None) -> dict:
    """Every rate of the audit (see the module docstring). ``executor_for(world)`` gives a
    :class:`graphs.executor.SafeExecutor` for the symmetric check; None skips it."""
    worlds = {w: World.load(w) for w in sorted({s.world for s in sessions})}
    tally = Tally()
    symmetric_turns: list[tuple[str, Turn]] = []
    for s in sessions:
        seen = Seen()
        for t in s.turns:
            view = TurnView(s, t, worlds[s.world], seen)
            for check in TURN_CHECKS:
                check(view, tally.hit)
            if view.world.symmetric and _uses(t.gold_cypher, view.world.symmetric):
                symmetric_turns.append((s.world, t))
            seen.remember(t)
    directed = 0
    if executor_for is not None:
        directed = check_symmetric_traversal(symmetric_turns, worlds, executor_for, tally.hit)
    turns = [t for s in sessions for t in s.turns]
    n = len(turns)
    phen = Counter(t.phenomenon for t in turns)
    return {
        "sessions": len(sessions), "turns": n,
        "checks": tally.rates(),
        "examples": dict(tally.examples),
        "symmetric": {"turns_using": len(symmetric_turns), "directed": directed, "checked": executor_for is not None},
        "shares": {"REFINE": round(phen["REFINE"] / n, 4), "RECURSE": round(phen["RECURSE"] / n, 4)},
        "phenomena": dict(sorted(phen.items())),
        "five_word_openings": five_word_openings(turns),
        "kinds_per_world": (per_world := kinds_per_world(sessions)),
        "new_kind_shares": new_kind_shares(per_world),
        "complexity": gold_complexity(turns),
        "follow_up_is_previous_plus_one_clause": extends_previous_share(sessions),
        "single_row": single_row_shares(turns),
        "typed_names": typed_names_report(sessions, executor_for=executor_for),
        # --- wording variety (issue 20) ---
        "repeated_utterances": repeated_utterance_share(turns),
        "core_wordings_used": core_wordings_used(turns),
        "phenomenon_classifier": phenomenon_classifier_accuracy(sessions),
    }


ORDER = ("opening_refers_back", "greeting_or_apology_after_turn_1", "greets_more_than_once", "repeated_persona_phrase",
         "stacked_lead_ins", "duplicated_type_noun", "plural_noun_grammar", "ungrammatical_aggregate",
         "machine_threshold", "aggregate_label_mismatch", "redundant_with_distinct",
         "persona_remark_misfit", "contrast_of_contrast", "expand_round_trip", "expand_back_to_origin", "pivot_back_to_origin",
         "unused_relationship_variable", "relationship_aggregate_without_link", "repeated_result_set", "ambiguous_back_reference",
         "sum_over_non_additive", "extreme_or_mean_over_non_comparable", "symmetric_traversed_one_way",
         "gold_renames_to_name", "typed_name_not_as_recorded")


# --- trivial turns and clarifications (issue 20) ---
# An aggregate's set is the result of the turn it depends on (always a listing: an aggregate keeps the set
# it was asked over active), so its size is that turn's row count; a plain count's value is the size too.
_BIG_SMALL = re.compile(r"\b(big|bigger|biggest|small|smaller|smallest|large|larger|largest|little)\b"
                        r"(?! (?:number|value|figure|amount)\b)", re.I)
_CUTOFF = re.compile(r"\b(?:the|that) (?:cutoff|cut-off|limit|threshold|cut)\b", re.I)
_DIRECTION = r"\b(?:high|low|top|bottom)\w* {phrase}\b"


def _texts(t: Turn) -> list[str]:
    """What the user says on a turn: the utterance, and on an ambiguous turn its ambiguous wording and
    the clarification."""
    amb = t.ambiguity_info or {}
    return [t.shown_utterance, *(amb.get(k, "") for k in ("utterance", "clarification"))]


def _source_rows(v: TurnView) -> int | None:
    t = v.turn
    if t.depends_on is None:
        return None
    src = v.session.turns[t.depends_on]
    return len(src.gold_rows) if src.chain_mode in LISTING_MODES else None


def check_count_over_small_set(v: TurnView, hit: Hit) -> None:
    """A count asked over a list that just showed one item ("How many shelves?" -> 1), or over fewer than
    MIN_COUNTED members (a count per value: fewer than two values, or fewer than MIN_COUNTED members in
    all; a count per member: one member; a yes/no, percentage, comparison or a count in a range of
    years: fewer than MIN_COUNTED members listed). The generator's ``trivial_aggregate`` gate keeps them out."""
    t = v.turn
    if t.phenomenon != "AGG_COUNT":
        return
    listed = _source_rows(v)
    hit("count_after_one_item_list", listed == 1, v.tag)
    counts = [r[-1] for r in t.gold_rows]
    if aggregate_variant_kinds(t) or "date_range_aggregate" in range_sort_swap_kinds(v.session, t):
        # a yes/no, percentage, comparison or a count of the members in a range: the set must be bigger
        small = listed is not None and listed < MIN_COUNTED
    elif t.gold_columns == ["count"]:
        small = counts[0] < MIN_COUNTED
    elif "OPTIONAL MATCH" in t.gold_cypher:  # one row per member
        small = len(t.gold_rows) < 2
    else:  # one row per value of a property
        small = len(t.gold_rows) < 2 or sum(counts) < MIN_COUNTED
    hit("count_over_small_set", small, f"{v.tag} [{counts}]")


def check_aggregate_over_small_set(v: TurnView, hit: Hit) -> None:
    """A min / max / avg / sum over a one-row result, or over a set of fewer than MIN_AGGREGATED members
    (the size of the listing it builds on; the generator also asks for that many recorded values)."""
    if v.turn.chain_mode != "agg_numeric":
        return
    listed = _source_rows(v)
    hit("aggregate_over_one_row", listed == 1, v.tag)
    hit("aggregate_over_small_set", listed is not None and listed < MIN_AGGREGATED, f"{v.tag} [{listed} rows]")


def _recursion_type(cypher: str) -> str | None:
    found = re.findall(r"\[\w*:`?(\w+)`?\*\d*\.\.\d*\]", cypher)
    return found[-1] if found else None


def check_recurse_on_recurse(v: TurnView, hit: Hit) -> None:
    """A RECURSE right on the result of a RECURSE over the same relationship: it lists a subset of what
    the last turn listed."""
    t = v.turn
    if t.phenomenon == "RECURSE" and t.depends_on is not None:
        src = v.session.turns[t.depends_on]
        same = src.phenomenon == "RECURSE" and _recursion_type(src.gold_cypher) == _recursion_type(t.gold_cypher)
        hit("recurse_on_recurse", same, v.tag)


def _ranked_prop(v: TurnView):
    """(name, PropertySpec) of the property the turn's own step ranks, aggregates or compares, or (None,
    None): the last such use in the gold (the steps of earlier turns come before it)."""
    c = v.turn.gold_cypher
    uses = [m for pattern in (r"ORDER BY \w+\.`?(\w+)`?", r"\b(?:max|min|avg|sum)\(\w+\.`?(\w+)`?\)", _THRESH)
            for m in re.finditer(pattern, c)]
    if not uses:
        return None, None
    name = max(uses, key=lambda m: m.start()).group(1)
    return name, _prop_spec(v.world.spec, name, c)[1]


def check_big_small_on_non_size(v: TurnView, hit: Hit) -> None:
    """An ambiguous wording that says "big" / "small" (not "the biggest number") where the property
    the clarification names is not a size (``size: true`` in the world spec): "the big storehouses"
    meaning an opening year."""
    if not v.turn.ambiguity_info:
        return
    said = v.turn.ambiguity_info.get("utterance", "").lower()
    for phrase in persona_phrases(said):  # a persona's remark ("a small detail") is not the question
        said = said.replace(phrase, " ")
    said = bool(_BIG_SMALL.search(said))
    _, pspec = _ranked_prop(v)
    hit("big_small_on_non_size", said and not getattr(pspec, "size", False), v.tag)


def check_cutoff_without_earlier_cutoff(v: TurnView, hit: Hit) -> None:
    """"Above the cutoff" / "below the limit" when no earlier turn of the session gave a cutoff on the
    property this turn compares (a comparison of it in an earlier gold). Applies to every turn whose
    words mention one."""
    t = v.turn
    if not any(_CUTOFF.search(x) for x in _texts(t)):
        return
    prop = _THRESH.findall(t.gold_cypher)
    name = prop[-1][0] if prop else r"\w+"
    earlier = any(re.search(r"\.`?" + name + r"`? [<>]=? ", p.gold_cypher) for p in v.session.turns[:t.index])
    hit("cutoff_without_earlier_cutoff", not earlier, v.tag)


def check_rank_direction(v: TurnView, hit: Hit) -> None:
    """A property where 1 is the top (``top_is_low: true``: a court rank) read by a direction word:
    "the lowest rank" (is rank 1 the lowest?), or an ambiguous ranking or cut that leaves the property
    out ("the top official", "the ones on the high side"), whose words run against the number. Saying
    "the lowest rank number" is exact. Applies to the turns whose own step ranks, aggregates or compares
    such a property."""
    name, pspec = _ranked_prop(v)
    if not getattr(pspec, "top_is_low", False):
        return
    word = re.escape(name.replace("_", " "))
    loose = any(re.search(_DIRECTION.format(phrase=word) + r"(?! number)", x, re.I) for x in _texts(v.turn))
    left_out = bool(v.turn.ambiguity_info) and v.turn.phenomenon in ("PIVOT", "THRESHOLD")
    hit("rank_direction", loose or left_out, v.tag)


def single_row_shares(turns: list[Turn]) -> dict:
    """Share of golds with one row, split into aggregates (a count or a statistic is one value by nature)
    and the rest (a listing of one entity), the rest by phenomenon. The rule that makes the rest
    legitimate: a traversal (opening, EXPAND, RECURSE, PIVOT) lists what the data links, and a relationship
    may link one entity (the province a legion is stationed in); a filter or a contrast that keeps one
    member is kept only ONE_ROW_FILTER_RATE of the time ("just one" is a plausible answer, not a common
    one)."""
    n = len(turns) or 1
    one = [t for t in turns if len(t.gold_rows) == 1]
    agg = [t for t in one if t.chain_mode in ("aggregate", "agg_numeric")]
    rest = Counter(t.phenomenon for t in one if t.chain_mode not in ("aggregate", "agg_numeric"))
    filters = sum(c for p, c in rest.items() if p in ("FILTER", "REFINE", "THRESHOLD", "COMPOUND", "CONTRAST"))
    return {"share": round(len(one) / n, 4), "aggregates": round(len(agg) / n, 4),
            "rest": round(sum(rest.values()) / n, 4), "filters": round(filters / n, 4),
            "rest_by_phenomenon": dict(sorted(rest.items()))}


_YES_NO_TEST = re.compile(r"RETURN (?:any|all)\(x IN collect\((\w+)\) WHERE x\.(`?\w+`?)")
# {which} ("whose climate is arid", "with no recorded motto", "marked as protected") follows a noun or
# "one(s)"; straight after "is" / "are" only "marked as" reads as English
_VERB_BEFORE_WHICH = re.compile(r"\b(?:is|are) (?:whose|with (?:no|a) recorded)\b", re.I)


def check_yes_no_on_filtered_property(v: TurnView, hit: Hit) -> None:
    """A yes/no question about a property the set was itself filtered on (or complemented on): the filter
    decides the answer ("any of those with no recorded year of death?" right after "the ones with one")."""
    c = v.turn.gold_cypher
    cut = c.rfind("RETURN")
    m = _YES_NO_TEST.search(c[cut:])
    if m:
        tested = re.compile(rf"\b{m.group(1)}\.{re.escape(m.group(2))}\b")
        hit("yes_no_on_filtered_property", any(tested.search(x) for x in where_conditions(c[:cut])), v.tag)


def check_verb_before_which(v: TurnView, hit: Hit) -> None:
    """A set description glued to a verb: "I want know if any of those tomes is whose language is Draconic"."""
    if aggregate_variant_kinds(v.turn) & {"yes_no", "percentage"}:
        hit("verb_before_which", any(_VERB_BEFORE_WHICH.search(x) for x in _texts(v.turn)), v.tag)


TRIVIAL_CHECKS = (check_count_over_small_set, check_aggregate_over_small_set, check_recurse_on_recurse,
                  check_big_small_on_non_size, check_cutoff_without_earlier_cutoff, check_rank_direction,
                  check_yes_no_on_filtered_property, check_verb_before_which)
TURN_CHECKS = TURN_CHECKS + TRIVIAL_CHECKS
ORDER = ORDER + ("count_after_one_item_list", "count_over_small_set", "aggregate_over_one_row",
                 "aggregate_over_small_set", "recurse_on_recurse", "big_small_on_non_size",
                 "cutoff_without_earlier_cutoff", "rank_direction", "yes_no_on_filtered_property",
                 "verb_before_which")


def render(report: dict) -> str:
    out = [f"audit of {report['sessions']} sessions, {report['turns']} turns", "", "defect rates:"]
    for k in ORDER:
        v = report["checks"].get(k)
        if v is None:
            out.append(f"  {k:40s}     n/a")
            continue
        out.append(f"  {k:40s} {v['rate'] * 100:6.2f}%  ({v['count']} of {v['of']})")
    sym = report["symmetric"]
    out.append(f"  symmetric: {sym['turns_using']} turns use a symmetric type, {sym['directed']} directed"
               + ("" if sym["checked"] else " (not re-executed: --no-db)"))
    out += ["", f"REFINE share {report['shares']['REFINE'] * 100:.2f}%, RECURSE share {report['shares']['RECURSE'] * 100:.2f}%"]
    f5 = report["five_word_openings"]
    out.append(f"five-word openings shared by more than 20 others: {f5['shared_by_more_than_20_others'] * 100:.1f}% "
               f"of utterances; the most common one covers {f5['largest_share'] * 100:.2f}% ({f5['top'][0][0]!r})")
    out.append(f"follow-up golds that are the previous gold plus one clause: "
               f"{report['follow_up_is_previous_plus_one_clause'] * 100:.1f}%")
    one = report["single_row"]
    out.append(f"single-row golds: {one['share'] * 100:.1f}% of golds: aggregates {one['aggregates'] * 100:.1f}%, "
               f"the rest {one['rest'] * 100:.1f}% {one['rest_by_phenomenon']}, of which filters and contrasts "
               f"{one['filters'] * 100:.1f}% (a traversal lists what the data links, one entity too; a filter keeps "
               f"one member {ONE_ROW_FILTER_RATE:.0%} of the time)")
    # --- wording variety (issue 20) ---
    rep = report["repeated_utterances"]
    out.append(f"utterances repeated word for word: {rep['share'] * 100:.2f}% of turns ({rep['turns']} turns "
               f"whose utterance occurs more than once in the build)")
    for u, k in rep["top"]:
        out.append(f"  {k}x {u[:120]!r}")
    out.append("distinct core wordings used per phenomenon: "
               + ", ".join(f"{p} {k}" for p, k in report["core_wordings_used"].items()))
    clf = report["phenomenon_classifier"]
    if clf["accuracy"] is not None:
        out.append(f"bag-of-words naive Bayes names the phenomenon of {clf['accuracy'] * 100:.1f}% of follow-up "
                   f"turns from the utterance alone ({clf['tested']} turns of worlds unseen in training)")
    c = report["complexity"]
    out += ["", "gold complexity (per gold / share of golds):",
            f"  MATCH clauses {c['match_per_gold']}, hops {c['hops_per_gold']}, WITH {c['with_per_gold']}, "
            f"ORDER BY {c['order_by_share'] * 100:.1f}%, variable-length {c['varlen_share'] * 100:.1f}%, "
            f"OPTIONAL MATCH {c['optional_share'] * 100:.1f}%",
            f"  aggregation kinds: {c['aggregation_kinds']}", "", "question kinds per world (turns):"]
    for w, kinds in report["kinds_per_world"].items():
        new = ", ".join(f"{k} {kinds.get(k, 0)}" for k in NEW_KINDS)
        out.append(f"  {w}: {new}")
    out += render_typed_names(report["typed_names"])
    out += ["", "question kinds of issue 20, share of all turns (overall; lowest world; per world):"]
    for k, sh in report["new_kind_shares"].items():
        worlds = ", ".join(f"{w} {v * 100:.1f}" for w, v in sh["per_world"].items())
        out.append(f"  {k:22s} {sh['overall'] * 100:5.2f}%  lowest {sh['lowest_world'] * 100:4.1f}%  ({worlds})")
    out += ["", "examples:"]
    for k in ORDER:
        for e in report["examples"].get(k, [])[:2]:
            out.append(f"  [{k}] {e[:200]}")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", help="a build directory (or its sessions.jsonl)")
    parser.add_argument("--json", help="also write the report as JSON here")
    parser.add_argument("--no-db", action="store_true", help="skip the check that re-executes golds")
    args = parser.parse_args(argv)
    sessions = list(read_sessions(args.build))
    executor_for = None
    if not args.no_db:
        cache: dict = {}

        def executor_for(world: str):
            return cache.setdefault(world, SafeExecutor(world, timeout=60))
    report = audit(sessions, executor_for=executor_for)
    sys.stdout.write(render(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
