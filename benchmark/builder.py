"""The session builder: samples sessions on a world, turn by turn, and keeps only verified turns.

For each turn it picks a phenomenon that the active entity set allows, makes the choices the chain
mode needs from the set's real members (a relationship, a property, a value that splits the set),
builds the gold query with ``benchmark.chain``, renders the utterance for the session's persona and
runs the verification gates (DESIGN §5):

- ``executes``: the gold runs through the safe executor without error;
- ``non_empty``: the result has rows (and an aggregate is not null);
- ``size``: a listed set has at most ``MAX_SET`` members (prompts stay tractable);
- ``deterministic``: a second run returns the same rows;
- ``ties``: a PIVOT's top two candidates differ on the ranking property (no tie at LIMIT 1);
- ``strict_subset``: a filter or a contrast keeps some members and drops others;
- ``duplicate``: the session has not asked exactly this query before;
- ``depends``: the same step applied to every node of the label gives a different result, so the
  turn really depends on the prior set;
- ``leak``: the utterance has no unfilled slot, Cypher keyword or schema identifier (unless the
  persona is technical).

A candidate that fails a gate is counted under the gate's name and another candidate is tried; a
session that cannot be completed is dropped and counted. Every random choice comes from one
``random.Random`` per session seeded from (seed, split, world, session number), and gold rows are
stored in a canonical order, so the same seed gives a byte-identical dataset.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from benchmark import chain, templates
from benchmark.lexicon import Lexicon
from benchmark.rewrite import Rewriter, RewriteStats, apply_rewrite, must_keep
from benchmark.session import PERSONAS, PHENOMENA, TECHNICAL_PERSONAS, Session, Turn
from graphs.executor import QueryResult, SafeExecutor
from graphs.generator import Graph, generate
from graphs.spec import RelationshipSpec, WorldSpec

MAX_SET = 60  # largest listed result kept
MIN_OPENING = 2  # an opening lists at least this many entities
AMBIGUITY_RATE = 0.2  # of the turns whose family has an ambiguous wording (about 5-10% of all turns)
BACKREF_RATE = 0.3  # after a topic shift, share of chain turns that go back to the set before it
TURN_COUNTS = {5: 8, 6: 12, 7: 15, 8: 18, 9: 16, 10: 12, 11: 8, 12: 5}  # mean 8.22, as the paper
CANDIDATE_TRIES = 40

CYPHER_KEYWORDS = ("MATCH", "RETURN", "WHERE", "WITH", "ORDER BY", "LIMIT", "DISTINCT", "OPTIONAL",
                   "UNWIND", "CALL", "CREATE", "MERGE", "DETACH", "DELETE", "COUNT(", "COLLECT(")
FILTERS = ("FILTER", "REFINE", "THRESHOLD", "COMPOUND")
# how often each phenomenon is proposed (before feasibility); TOPIC_SHIFT rarer, as in the paper
WEIGHTS = {"EXPAND": 10, "RECURSE": 8, "PIVOT": 8, "AGG_COUNT": 6, "AGG_MAX": 5, "AGG_AVG": 5, "AGG_SUM": 5,
           "FILTER": 8, "REFINE": 10, "THRESHOLD": 8, "COMPOUND": 7, "CONTRAST": 12, "TOPIC_SHIFT": 4}


class BuildUnavailable(RuntimeError):
    """Neo4j stopped answering during a build: infrastructure, never a gate failure."""


class GateFailure(Exception):
    def __init__(self, gate: str, detail: str = ""):
        super().__init__(f"{gate}: {detail}")
        self.gate = gate


def canonical_rows(rows: list[list[Any]]) -> list[list[Any]]:
    """Rows in a fixed order (gold results are multisets; the order is only for byte-identity)."""
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, ensure_ascii=False))


def session_rng(seed: int, split: str, world: str, number: int) -> random.Random:
    digest = hashlib.sha256(f"{seed}:{split}:{world}:{number}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def leaks(text: str, spec: WorldSpec) -> list[str]:
    """Schema identifiers, Cypher keywords or template slots found in an utterance."""
    found = [k for k in CYPHER_KEYWORDS if re.search(r"(?<![A-Za-z])" + re.escape(k) + r"(?![a-z])", text)]
    found += re.findall(r"\{[^}]*\}", text)
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
    found += sorted(words & set(spec.relationship_types))
    found += sorted(w for w in words & set(spec.labels) if not w.islower() and any(c.isupper() for c in w[1:]))
    props = {p.name for n in spec.nodes for p in n.properties} | {p.name for r in spec.relationships
                                                                   for p in r.properties}
    found += sorted(w for w in words & props if "_" in w)
    return found


@dataclass
class _State:
    """The active entity set and the turn whose result it is."""

    set: chain.EntitySet
    turn: int
    phenomenon: str


@dataclass
class WorldBuilder:
    spec: WorldSpec
    executor: SafeExecutor
    gate_failures: Counter = field(default_factory=Counter)
    db_ms: float = 0.0  # summed executor time, for the build benchmark
    rewriter: Rewriter | None = None  # the optional LLM rewrite pass (off by default)
    rewrite_stats: RewriteStats = field(default_factory=RewriteStats)
    _members: dict = field(default_factory=dict)

    def __post_init__(self):
        self.lex = Lexicon(self.spec)
        self.graph: Graph = generate(self.spec)
        self.keys = {n.label: n.key for n in self.spec.nodes}
        self._props = {n.label: {p.name: p for p in n.properties} for n in self.spec.nodes}
        self._last_phen: list[str] = []  # per session being built
        self._seen_queries: set[str] = set()

    # -- schema helpers ---------------------------------------------------------------------------
    def numeric(self, label: str) -> list[str]:
        return [p.name for p in self._props[label].values()
                if p.type in ("int", "float") and p.name != self.keys[label] and not p.values]

    def categorical(self, label: str) -> list[str]:
        return [p.name for p in self._props[label].values()
                if p.type == "string" and p.values and p.name != self.keys[label]]

    def links(self, label: str) -> list[tuple[RelationshipSpec, bool, str]]:
        """(relationship, forward?, other label) for every relationship touching ``label``."""
        out = []
        for r in self.spec.relationships:
            if r.source == label:
                out.append((r, True, r.target))
            if r.target == label:
                out.append((r, False, r.source))
        return out

    def link_phrase(self, r: RelationshipSpec, forward: bool) -> str:
        # forward from the set: the new nodes are targets -> "<targets> FORWARD <sources>"
        return self.lex.link(r.type, r.source, r.target, "forward" if forward else "backward")

    # -- database ---------------------------------------------------------------------------------
    def run(self, cypher: str) -> QueryResult:
        r = self.executor.run(cypher, max_rows=1000)
        self.db_ms += r.elapsed_ms
        if r.error is not None and r.error.kind == "unavailable":
            raise BuildUnavailable(f"world {self.spec.world}: {r.error.message}")
        return r

    def members(self, s: chain.EntitySet) -> list[dict]:
        key = s.clauses
        if key not in self._members:
            r = self.run(s.members_query())
            if r.error is not None:
                raise GateFailure("executes", r.error.message)
            self._members[key] = [row[0] for row in r.rows]
        return self._members[key]

    def verify(self, step: chain.Step, *, listing: bool, universe_step: chain.Step | None) -> QueryResult:
        if step.cypher in self._seen_queries:
            raise GateFailure("duplicate")
        r = self.run(step.cypher)
        if r.error is not None:
            raise GateFailure("executes", f"{r.error.kind}: {r.error.message}")
        if not r.rows or any(v is None for v in r.rows[0]) and not listing:
            raise GateFailure("non_empty")
        if listing and len(r.rows) > MAX_SET:
            raise GateFailure("size", f"{len(r.rows)} rows")
        again = self.run(step.cypher)
        if again.error is not None or canonical_rows(again.rows) != canonical_rows(r.rows):
            raise GateFailure("deterministic")
        if universe_step is not None:
            u = self.run(universe_step.cypher)
            if u.error is None and canonical_rows(u.rows) == canonical_rows(r.rows):
                raise GateFailure("depends")
        return r

    # -- choices ------------------------------------------------------------------------------------
    def universe(self, s: chain.EntitySet) -> chain.EntitySet:
        return chain.EntitySet(s.label, s.var, (f"MATCH ({s.var}:{chain.ident(s.label)})",))

    def threshold(self, values: list, rng: random.Random) -> Any | None:
        """A value strictly between two neighbouring member values that splits the set."""
        distinct = sorted(set(values))
        if len(distinct) < 2:
            return None
        i = rng.randrange(1, len(distinct))
        lo, hi = distinct[i - 1], distinct[i]
        if isinstance(lo, int) and isinstance(hi, int):
            if hi - lo < 2:
                return None
            mid = (lo + hi) // 2
            return mid if lo < mid < hi else None
        mid = round((lo + hi) / 2, 2)
        return mid if lo < mid < hi else None

    def numeric_condition(self, base: chain.EntitySet, members: list[dict],
                          rng: random.Random) -> tuple[chain.Condition, str, bool, Any]:
        """A numeric threshold on a not-yet-filtered property that splits ``members``:
        (condition, property, greater?, value). THRESHOLD and COMPOUND share it."""
        nums = [p for p in self.numeric(base.label) if p not in base.filtered_props]
        if not nums or len(members) < 2:
            raise GateFailure("feasible")
        prop = rng.choice(nums)
        greater = rng.random() < 0.5
        t = self.threshold([m[prop] for m in members if m.get(prop) is not None], rng)
        if t is None:
            raise GateFailure("strict_subset")
        return chain.compare(base.var, base.label, prop, greater, t), prop, greater, t

    # -- turns --------------------------------------------------------------------------------------
    def make_opening(self, rng: random.Random, var: str, avoid_label: str | None) -> tuple[chain.Step, str, dict]:
        labels = [n.label for n in self.spec.nodes if n.label != avoid_label] or [n.label for n in self.spec.nodes]
        label = rng.choice(labels)
        if rng.random() < 0.7 and self.links(label):
            r, forward, other = rng.choice(self.links(label))
            # the anchor is the node at the other end: the set is `label` nodes linked to it
            anchor_label = other
            rows = self.graph.nodes[anchor_label]
            anchor = rows[rng.randrange(len(rows))][self.keys[anchor_label]]
            # set nodes are targets when the anchor is the source (forward from the anchor)
            anchor_forward = not forward if r.source != r.target else rng.random() < 0.5
            step = chain.open_anchored(anchor_label, self.keys[anchor_label], anchor, r.type, anchor_forward,
                                       label, self.keys[label], var)
            slots = {"target_noun": self.lex.noun(label), "link": self.link_phrase(r, anchor_forward),
                     "anchor_noun": self.lex.noun(anchor_label, plural=False), "anchor_name": self.lex.value(anchor)}
            return step, "ANCHORED", slots
        cats = self.categorical(label)
        if not cats:
            raise GateFailure("non_empty", "no categorical property")
        prop = rng.choice(cats)
        values = sorted({row[prop] for row in self.graph.nodes[label] if prop in row})
        value = rng.choice(values)
        step = chain.open_filtered(label, self.keys[label], prop, value, var)
        slots = {"target_noun": self.lex.noun(label), "prop": self.lex.prop(label, prop), "value": self.lex.value(value)}
        return step, "FILTERED", slots

    def make_chain(self, phen: str, base: chain.EntitySet, prev_phen: str, rng: random.Random,
                   var: str) -> tuple[chain.Step, dict, bool, chain.Step | None]:
        """(step, slots, listing?, universe step for the depends gate)."""
        label = base.label
        slots: dict[str, str] = {"set_noun": self.lex.noun(label), "set_noun_singular": self.lex.noun(label, plural=False)}
        uni = self.universe(base)
        if phen in ("EXPAND", "RECURSE"):
            options = [(r, f, o) for r, f, o in self.links(label) if (r.source == r.target) == (phen == "RECURSE")]
            if not options:
                raise GateFailure("feasible")
            r, forward, other = rng.choice(options)
            step = chain.expand(base, r.type, forward, other, self.keys[other], var, recursive=phen == "RECURSE")
            ustep = chain.expand(uni, r.type, forward, other, self.keys[other], var, recursive=phen == "RECURSE")
            slots.update(target_noun=self.lex.noun(other), link=self.link_phrase(r, forward))
            return step, slots, True, ustep
        if phen == "PIVOT":
            members = self.members(base)
            props = [p for p in self.numeric(label) if sum(p in m for m in members) >= 2]
            if not props or not self.links(label):
                raise GateFailure("feasible")
            prop = rng.choice(props)
            highest = rng.random() < 0.6
            values = sorted((m[prop] for m in members if m.get(prop) is not None), reverse=highest)
            if values[0] == values[1]:
                raise GateFailure("ties", f"{prop} top two equal")
            r, forward, other = rng.choice(self.links(label))
            step = chain.pivot(base, prop, highest, r.type, forward, other, self.keys[other], var)
            ustep = chain.pivot(uni, prop, highest, r.type, forward, other, self.keys[other], var)
            slots.update(prop=self.lex.prop(label, prop), extreme="highest" if highest else "lowest",
                         target_noun=self.lex.noun(other), link=self.link_phrase(r, forward))
            return step, slots, True, ustep
        if phen == "AGG_COUNT":
            return chain.count(base), slots, False, chain.count(uni)
        if phen in chain.AGGREGATES:
            members = self.members(base)
            props = [p for p in self.numeric(label) if any(m.get(p) is not None for m in members)]
            if len(members) < 2 or not props:
                raise GateFailure("feasible")
            prop = rng.choice(props)
            slots.update(prop=self.lex.prop(label, prop))
            return (chain.aggregate_numeric(base, phen, prop), slots, False,
                    chain.aggregate_numeric(uni, phen, prop))
        if phen in ("FILTER", "REFINE", "COMPOUND"):
            members = self.members(base)
            cats = [p for p in self.categorical(label) if p not in base.filtered_props]
            if phen == "REFINE" and prev_phen not in FILTERS + ("OPENING_FILTERED",):
                raise GateFailure("feasible")
            if phen == "FILTER" and prev_phen in FILTERS + ("OPENING_FILTERED",):
                raise GateFailure("feasible")
            if not cats or len(members) < 2:
                raise GateFailure("feasible")
            prop = rng.choice(cats)
            counts = Counter(m[prop] for m in members if m.get(prop) is not None)
            values = sorted(v for v, c in counts.items() if c < len(members))
            if not values:
                raise GateFailure("strict_subset")
            value = rng.choice(values)
            conds = [chain.equals(base.var, label, prop, value)]
            slots.update(prop=self.lex.prop(label, prop), value=self.lex.value(value))
            if phen == "COMPOUND":
                keep = [m for m in members if m.get(prop) == value]
                cond, nprop, greater, t = self.numeric_condition(base, keep, rng)
                conds = [cond] + conds
                slots = {**slots, "prop": self.lex.prop(label, nprop), "op": "more than" if greater else "less than",
                         "value": self.lex.value(t), "prop2": self.lex.prop(label, prop),
                         "value2": self.lex.value(value)}
            step = chain.narrow(base, self.keys[label], conds)
            return step, slots, True, chain.narrow(uni, self.keys[label], conds)
        if phen == "THRESHOLD":
            cond, prop, greater, t = self.numeric_condition(base, self.members(base), rng)
            conds = [cond]
            slots.update(prop=self.lex.prop(label, prop), op="more than" if greater else "less than",
                         value=self.lex.value(t))
            return chain.narrow(base, self.keys[label], conds), slots, True, chain.narrow(uni, self.keys[label], conds)
        if phen == "CONTRAST":
            if base.parent is None or base.condition is None or prev_phen not in FILTERS + ("OPENING_FILTERED", "CONTRAST"):
                raise GateFailure("feasible")
            return chain.contrast(base, self.keys[label]), slots, True, None
        raise ValueError(f"unknown phenomenon {phen}")

    def render(self, family: str, persona: str, slots: dict, rng: random.Random) -> str:
        text = templates.render(family, persona, slots, rng)
        if persona not in TECHNICAL_PERSONAS:
            found = leaks(text, self.spec)
            if found:
                raise GateFailure("leak", ", ".join(found))
        if self.rewriter is not None:
            # every entity name and value must survive the rewrite, else the template text stays
            keep = must_keep(slots.get(k) for k in ("anchor_name", "value", "value2"))
            rewritten, ok = apply_rewrite(self.rewriter, text, persona, keep, self.rewrite_stats)
            if ok and (persona in TECHNICAL_PERSONAS or not leaks(rewritten, self.spec)):
                text = rewritten
        return text

    # -- sessions -------------------------------------------------------------------------------------
    def build_session(self, session_id: str, persona: str, n_turns: int, rng: random.Random) -> Session | None:
        turns: list[Turn] = []
        self._last_phen: list[str] = []
        self._seen_queries: set[str] = set()
        states: list[_State] = []  # the active set after each turn
        shift_at: int | None = None  # the last topic shift's turn index
        var_count = 0
        for index in range(n_turns):
            for _attempt in range(CANDIDATE_TRIES):
                var_count += 1
                var = f"n{var_count}"
                try:
                    turn, state = self._one_turn(index, persona, states, shift_at, rng, var)
                except GateFailure as failure:
                    if failure.gate != "feasible":
                        self.gate_failures[failure.gate] += 1
                    continue
                turns.append(turn)
                states.append(state)
                self._last_phen.append(turn.phenomenon)
                self._seen_queries.add(turn.gold_cypher)
                if turn.phenomenon == "TOPIC_SHIFT":
                    shift_at = index
                break
            else:
                self.gate_failures["session_dropped"] += 1
                return None
        return Session(id=session_id, world=self.spec.world, persona=persona, turns=turns)

    def _one_turn(self, index: int, persona: str, states: list[_State], shift_at: int | None,
                  rng: random.Random, var: str) -> tuple[Turn, _State]:
        prev_turn_phen = self._last_phen[-1] if index else ""
        if index == 0 or (phen := self._pick(states[-1], prev_turn_phen, rng)) == "TOPIC_SHIFT":
            avoid = states[-1].set.label if states else None
            step, shape, slots = self.make_opening(rng, var, avoid)
            phen = "OPENING" if index == 0 else "TOPIC_SHIFT"
            slots.setdefault("back", "")
            text = self.render(f"{phen}_{shape}", persona, slots, rng)
            r = self.verify(step, listing=True, universe_step=None)
            if len(r.rows) < MIN_OPENING:
                raise GateFailure("size", "opening too small")
            turn = self._turn(index, text, step, r, phen, None, None)
            tag = "OPENING_FILTERED" if shape == "FILTERED" else phen
            return turn, _State(step.new_set, index, tag)
        active = states[-1]
        base_state = active
        back = ""
        if (shift_at is not None and shift_at > 0 and phen != "CONTRAST" and rng.random() < BACKREF_RATE):
            base_state = states[shift_at - 1]
            back = f"Going back to the {self.lex.noun(base_state.set.label)} from before"
        prev_phen = base_state.phenomenon if base_state is active else ""
        if back and phen not in self.feasible(base_state, ""):
            raise GateFailure("feasible")
        step, slots, listing, ustep = self.make_chain(phen, base_state.set, prev_phen, rng, var)
        slots["back"] = back
        ambiguity = None
        family = phen
        if f"{phen}_AMBIGUOUS" in templates.FAMILIES and rng.random() < AMBIGUITY_RATE:
            ambiguity = {"utterance": self.render(f"{phen}_AMBIGUOUS", persona, slots, rng),
                         "clarification": templates.clarification(f"{phen}_AMBIGUOUS", slots)}
        text = self.render(family, persona, slots, rng)
        r = self.verify(step, listing=listing, universe_step=ustep)
        if phen in FILTERS + ("CONTRAST",):
            size = len(self.members(base_state.set)) if phen != "CONTRAST" else None
            if not r.rows or (size is not None and len(r.rows) >= size):
                raise GateFailure("strict_subset")
        turn = self._turn(index, text, step, r, phen, base_state.turn, ambiguity)
        new_state = _State(step.new_set, index, phen) if step.new_set is not None else \
            _State(base_state.set, base_state.turn, base_state.phenomenon)
        return turn, new_state

    def feasible(self, state: _State, prev_phen: str) -> list[str]:
        """Phenomena the set allows (schema-level check; the members decide the rest)."""
        label, s = state.set.label, state.set
        links = self.links(label)
        numeric = self.numeric(label)
        cats = [p for p in self.categorical(label) if p not in s.filtered_props]
        after_filter = state.phenomenon in FILTERS + ("OPENING_FILTERED", "CONTRAST")
        ok = {"TOPIC_SHIFT", "AGG_COUNT"}
        if any(r.source != r.target for r, _, _ in links):
            ok.add("EXPAND")
        if any(r.source == r.target for r, _, _ in links):
            ok.add("RECURSE")
        if numeric and links:
            ok.add("PIVOT")
        if numeric:
            ok.update(chain.AGGREGATES)
        if cats:
            ok.add("REFINE" if after_filter else "FILTER")
        if [p for p in numeric if p not in s.filtered_props]:
            ok.add("THRESHOLD")
            if cats:
                ok.add("COMPOUND")
        if s.parent is not None and s.condition is not None and after_filter:
            ok.add("CONTRAST")
        ok.discard(prev_phen)  # never the same phenomenon twice in a row
        return sorted(ok)

    def _pick(self, state: _State, prev_phen: str, rng: random.Random) -> str:
        names = self.feasible(state, prev_phen)
        return rng.choices(names, weights=[WEIGHTS[n] for n in names])[0]

    def _turn(self, index: int, text: str, step: chain.Step, r: QueryResult, phen: str,
              depends_on: int | None, ambiguity: dict | None) -> Turn:
        chain_mode = "none" if phen == "OPENING" else PHENOMENA[phen][1]
        return Turn(index=index, utterance=text, gold_cypher=step.cypher, gold_columns=list(r.columns),
                    gold_rows=canonical_rows(r.rows), phenomenon=phen, chain_mode=chain_mode,
                    depends_on=depends_on, ambiguity_info=ambiguity,
                    gold_key_values=[kv.to_dict() for kv in step.key_values], gold_triples=list(step.triples))


def turn_count(rng: random.Random) -> int:
    counts = list(TURN_COUNTS)
    return rng.choices(counts, weights=[TURN_COUNTS[c] for c in counts])[0]


def persona_plan(n: int, rng: random.Random) -> list[str]:
    """Near-uniform personas: each one n/10 times (±1), in a shuffled order."""
    plan = [PERSONAS[i % len(PERSONAS)] for i in range(n)]
    rng.shuffle(plan)
    return plan
