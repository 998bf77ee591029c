"""The chain representation: each turn's gold query is built from the previous turn's entity set.

An ``EntitySet`` is a Cypher prefix that binds one variable to a set of nodes of one label, possibly
with repeats (after a traversal) or known to bind each node once (one node pattern, a filter that
followed a ``WITH DISTINCT``, a ranked cut). A consumer adds ``WITH DISTINCT`` only where repeats are
possible, and a filter on a set that already ends with a ``WHERE`` joins it with ``AND``: the gold is
the minimal query a careful annotator writes (``WHERE a AND b``, never ``WHERE a WITH DISTINCT x
WHERE b``), with the same rows. Each chain mode is a function from a
set (plus the choices the builder made: a relationship, a property, a value) to a ``Step``: the gold
query of the turn and, where the mode defines one, the new active set. Because every step extends the
prior set's own clauses, the gold re-derives the prior set rather than pasting its values, and the
gold key-values and relationship triples are exact by construction (they are the literals and the
patterns the builder itself put into the query).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass, field
from typing import Any

from cypherturn.errors import CypherTurnError
from graphs.cypher_syntax import string_literal


class ChainError(CypherTurnError, ValueError):
    """A step asked of a set that cannot take it, or a value with no Cypher literal: the caller's (the
    builder's) mistake, never the model's or a user's."""


def literal(value: Any) -> str:
    """A Cypher literal for a property value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ChainError("no literal for non-finite floats")
        return repr(value)
    if isinstance(value, dt.date):
        return f"date('{value.isoformat()}')"
    if isinstance(value, str):
        return string_literal(value)
    raise TypeError(f"no Cypher literal for {type(value).__name__}")


def ident(name: str) -> str:
    """A label, type or property name, backticked only when it needs to be."""
    return name if name.isidentifier() and name.isascii() else "`" + name.replace("`", "``") + "`"


def triple(source: str, rel_type: str, target: str) -> str:
    """The canonical relationship triple, always in the stored direction."""
    return f"(:{source})-[:{rel_type}]->(:{target})"


@dataclass(frozen=True)
class KeyValue:
    label: str
    property: str
    value: Any

    def to_dict(self) -> dict:
        value = self.value.isoformat() if isinstance(self.value, dt.date) else self.value
        return {"label": self.label, "property": self.property, "value": value}


@dataclass(frozen=True)
class Condition:
    """One filter on a set's variable: ``var.prop OP value``; text is the Cypher, kv its literal."""

    text: str
    key_values: tuple[KeyValue, ...]
    props: tuple[str, ...] = ()  # properties it tests without a literal (an existence test)
    triples: tuple[str, ...] = ()  # relationships it tests (an EXISTS subquery), part of the gold triples
    # a test that is never null (IS [NOT] NULL, [NOT] EXISTS): its opposite, as a CONTRAST writes it
    opposite: str | None = None


@dataclass(frozen=True)
class EntitySet:
    label: str
    var: str
    clauses: tuple[str, ...]
    key_values: tuple[KeyValue, ...] = ()
    triples: tuple[str, ...] = ()
    # the set this one was filtered from, and the filter: what CONTRAST complements
    parent: "EntitySet | None" = None
    condition: Condition | None = None
    filtered_props: frozenset[str] = field(default_factory=frozenset)
    # (edge variable, relationship type) of the one-hop expansion that produced the set, if any:
    # what a question about the relationship's own properties ("their average grade") aggregates
    edge: tuple[str, str] | None = None
    # the label of the node(s) the set was reached from in its last hop (an opening's anchor, the prior
    # set of an expansion): an expansion straight back to it is a round trip a user would not ask for
    origin: str | None = None
    # whether the clauses already bind each node once (one node pattern, a filter after WITH DISTINCT,
    # a ranked cut): then no WITH DISTINCT is added before the next step
    distinct_rows: bool = False

    def distinct(self) -> list[str]:
        """The clauses, then ``WITH DISTINCT`` when the set may bind a node more than once."""
        return list(self.clauses) if self.distinct_rows else [*self.clauses, f"WITH DISTINCT {self.var}"]

    def filtered(self, condition: str) -> list[str]:
        """The clauses with ``condition`` applied to the set's members, written minimally: joined with
        ``AND`` to a ``WHERE`` that already ends the set, right after a one-node ``MATCH``, else after a
        ``WITH`` (``DISTINCT`` only where repeats are possible)."""
        last = self.clauses[-1] if self.clauses else ""
        if self.distinct_rows and last.startswith("WHERE "):
            return [*self.clauses[:-1], f"{last} AND {condition}"]
        if self.distinct_rows and last.startswith("MATCH ") and "[" not in last:
            return [*self.clauses, f"WHERE {condition}"]
        with_ = f"WITH {self.var}" if self.distinct_rows else f"WITH DISTINCT {self.var}"
        return [*self.clauses, with_, f"WHERE {condition}"]

    def members_query(self) -> str:
        """All distinct members with their properties (the builder picks values from these)."""
        return "\n".join([*self.distinct(), f"RETURN properties({self.var}) AS p"])


def _ranked(s: "EntitySet", prop: str) -> list[str]:
    """The set's clauses ready to be ranked by ``prop``: a null never ranks first, so the members without
    it are dropped, unless the set's own filter already compares ``prop`` (``x.p > 5`` holds for no null)."""
    last = s.clauses[-1] if s.clauses else ""
    if s.distinct_rows and last.startswith("WHERE "):
        target = f"{s.var}.{ident(prop)} "
        for cond in re.split(r" AND (?![^(]*\))", last[len("WHERE "):]):
            if cond.startswith(target) and re.match(r"(?:<|>|<=|>=|=) ", cond[len(target):]):
                return list(s.clauses)
    return s.filtered(f"{s.var}.{ident(prop)} IS NOT NULL")


@dataclass(frozen=True)
class Step:
    cypher: str
    columns: tuple[str, ...]
    key_values: tuple[KeyValue, ...]
    triples: tuple[str, ...]
    new_set: EntitySet | None  # None: the active set stays as it was (aggregations)


def _merge(*groups) -> tuple:
    out: list = []
    for group in groups:
        for item in group:
            if item not in out:
                out.append(item)
    return tuple(out)


# The column-naming rule every gold follows and the task prompt states (envs/prompts.py): a property
# is returned under its own name (``p.title AS title``), an aggregate as function_property
# (``avg_price``, ``sum_budget``) and a count of entities as ``count``.
COLUMN_RULE = re.compile(r"(?:\w+\.`?(\w+)`? AS `?(\w+)`?)|(?:(\w+)\(\w+\.`?(\w+)`?\) AS `?(\w+)`?)"
                         r"|(?:count\(\w+\) AS `?(\w+)`?)")


def column_rule_violations(cypher: str) -> list[str]:
    """The RETURN items of ``cypher`` that break the column-naming rule (empty: it follows it)."""
    ret = cypher[cypher.rfind("RETURN"):]
    bad, ret = variant_column_violations(ret)  # a comparison, yes/no or percentage: its own rule
    for m in COLUMN_RULE.finditer(ret):
        prop, alias, fn, fprop, falias, calias = m.groups()
        if alias is not None and alias != prop:
            bad.append(f"{prop} AS {alias}")
        if falias is not None and falias != f"{fn.lower()}_{fprop}":
            bad.append(f"{fn}({fprop}) AS {falias}")
        if calias is not None and calias != "count":
            bad.append(f"count AS {calias}")
    return bad


def _list_step(s: EntitySet, key: str, extra: tuple[str, ...] = ()) -> Step:
    """The gold query listing a set by its display key (returned under the key's own name), with
    the ``extra`` properties the question also asks for ("... and what is the role of each?")."""
    items = ", ".join(f"{s.var}.{ident(p)} AS {ident(p)}" for p in (key, *extra))
    cypher = "\n".join([*s.clauses, f"RETURN DISTINCT {items}"])
    return Step(cypher, (key, *extra), s.key_values, s.triples, s)


def _arrow(rel_type: str, forward: bool, hops: str = "", symmetric: bool = False, edge: str = "") -> str:
    """``-[:R]->`` / ``<-[:R]-``; a symmetric type is read in both directions (``-[:R]-``)."""
    rel = f"[{edge}:{ident(rel_type)}{hops}]"
    return f"-{rel}-" if symmetric else f"-{rel}->" if forward else f"<-{rel}-"


def _pattern(var: str, rel_type: str, forward: bool, new_var: str, new_label: str, hops: str = "",
             symmetric: bool = False, edge: str = "") -> str:
    return f"({var}){_arrow(rel_type, forward, hops, symmetric, edge)}({new_var}:{ident(new_label)})"


# -- openings (turn 1 and topic shifts) ---------------------------------------------------------------

def open_anchored(anchor_label: str, anchor_key: str, anchor_value: Any, rel_type: str, forward: bool,
                  target_label: str, target_key: str, var: str, symmetric: bool = False) -> Step:
    """The targets linked to one named entity: MATCH (a {key: v})-[:R]->(x:T)."""
    anchor = f"(a_{var}:{ident(anchor_label)} {{{ident(anchor_key)}: {literal(anchor_value)}}})"
    clause = f"MATCH {anchor}{_arrow(rel_type, forward, symmetric=symmetric)}({var}:{ident(target_label)})"
    src, dst = (anchor_label, target_label) if forward else (target_label, anchor_label)
    s = EntitySet(target_label, var, (clause,), (KeyValue(anchor_label, anchor_key, anchor_value),),
                  (triple(src, rel_type, dst),), origin=anchor_label)
    return _list_step(s, target_key)


def open_two_hop(anchor_label: str, anchor_key: str, anchor_value: Any, hop1: tuple[str, bool, bool],
                 mid_label: str, hop2: tuple[str, bool, bool], target_label: str, target_key: str,
                 var: str) -> Step:
    """The targets two hops from one named entity through a middle label: each hop is
    (relationship type, forward?, symmetric?)."""
    anchor = f"(a_{var}:{ident(anchor_label)} {{{ident(anchor_key)}: {literal(anchor_value)}}})"
    clause = (f"MATCH {anchor}{_arrow(hop1[0], hop1[1], symmetric=hop1[2])}(m_{var}:{ident(mid_label)})"
              f"{_arrow(hop2[0], hop2[1], symmetric=hop2[2])}({var}:{ident(target_label)})")
    t1 = triple(anchor_label, hop1[0], mid_label) if hop1[1] else triple(mid_label, hop1[0], anchor_label)
    t2 = triple(mid_label, hop2[0], target_label) if hop2[1] else triple(target_label, hop2[0], mid_label)
    s = EntitySet(target_label, var, (clause,), (KeyValue(anchor_label, anchor_key, anchor_value),), _merge([t1, t2]),
                  origin=mid_label)
    return _list_step(s, target_key)


def open_filtered(label: str, key: str, prop: str, value: Any, var: str) -> Step:
    """Every node of a label with a categorical value: MATCH (x:L) WHERE x.p = v."""
    universe = EntitySet(label, var, (f"MATCH ({var}:{ident(label)})",), distinct_rows=True)
    cond = Condition(f"{var}.{ident(prop)} = {literal(value)}", (KeyValue(label, prop, value),))
    s = EntitySet(label, var, tuple(universe.filtered(cond.text)), cond.key_values, (), universe, cond,
                  frozenset({prop}), distinct_rows=True)
    return _list_step(s, key)


# -- chain modes ---------------------------------------------------------------------------------------

def expand(s: EntitySet, rel_type: str, forward: bool, target_label: str, target_key: str, var: str,
           recursive: bool = False, symmetric: bool = False, extra: tuple[str, ...] = ()) -> Step:
    """expand: the nodes one hop (or, recursive, any number of hops) from the prior set."""
    # the relationship gets a variable only when a later turn asks about its properties
    # (aggregate_edges binds it then); a listing gold leaves it anonymous, as an annotator would
    edge = "" if recursive else f"e_{var}"
    clause = "MATCH " + _pattern(s.var, rel_type, forward, var, target_label, "*1.." if recursive else "",
                                 symmetric)
    src, dst = (s.label, target_label) if forward else (target_label, s.label)
    new = EntitySet(target_label, var, (*s.distinct(), clause), s.key_values,
                    _merge(s.triples, [triple(src, rel_type, dst)]), edge=(edge, rel_type) if edge else None,
                    origin=s.label)
    return _list_step(new, target_key, extra)


def pivot(s: EntitySet, prop: str, highest: bool, rel_type: str, forward: bool, target_label: str,
          target_key: str, var: str, symmetric: bool = False) -> Step:
    """pivot: rank the prior set by a property, take the top (or bottom) one, traverse from it."""
    order = "DESC" if highest else "ASC"
    clauses = (*_ranked(s, prop), f"WITH {s.var} ORDER BY {s.var}.{ident(prop)} {order} LIMIT 1",
               "MATCH " + _pattern(s.var, rel_type, forward, var, target_label, symmetric=symmetric))
    src, dst = (s.label, target_label) if forward else (target_label, s.label)
    new = EntitySet(target_label, var, clauses, s.key_values, _merge(s.triples, [triple(src, rel_type, dst)]),
                    origin=s.label)
    return _list_step(new, target_key)


def count(s: EntitySet) -> Step:
    """aggregate: the size of the prior set."""
    cypher = "\n".join([*s.distinct(), f"RETURN count({s.var}) AS count"])
    return Step(cypher, ("count",), s.key_values, s.triples, None)


AGGREGATES = {"AGG_MAX": "max", "AGG_AVG": "avg", "AGG_SUM": "sum"}


def aggregate_numeric(s: EntitySet, phenomenon: str, prop: str, fn: str | None = None) -> Step:
    """agg_numeric: max (or min) / avg / sum of a numeric property over the prior set."""
    fn = fn or AGGREGATES[phenomenon]
    column = f"{fn}_{prop}"
    cypher = "\n".join([*s.distinct(), f"RETURN {fn}({s.var}.{ident(prop)}) AS {ident(column)}"])
    return Step(cypher, (column,), s.key_values, s.triples, None)


def aggregate_edges(s: EntitySet, fn: str, prop: str) -> Step:
    """agg_numeric over the relationship that produced the set: one value per traversed relationship
    ("what is their average grade?" after "the courses those students are enrolled in")."""
    if s.edge is None:
        raise ChainError("the set was not produced by a one-hop expansion")
    column = f"{fn}_{prop}"
    anonymous = f"[:{ident(s.edge[1])}]"
    if anonymous not in s.clauses[-1]:
        raise ChainError("the set's last clause is not its expansion")
    bound = s.clauses[-1].replace(anonymous, f"[{s.edge[0]}:{ident(s.edge[1])}]", 1)
    cypher = "\n".join([*s.clauses[:-1], bound, f"RETURN {fn}({s.edge[0]}.{ident(prop)}) AS {ident(column)}"])
    return Step(cypher, (column,), s.key_values, s.triples, None)


def universe_edges(rel_type: str, fn: str, prop: str) -> Step:
    """The same aggregate over every relationship of the type (the builder's ``depends`` gate)."""
    column = f"{fn}_{prop}"
    cypher = f"MATCH ()-[e:{ident(rel_type)}]->()\nRETURN {fn}(e.{ident(prop)}) AS {ident(column)}"
    return Step(cypher, (column,), (), (), None)


def narrow(s: EntitySet, key: str, conditions: list[Condition]) -> Step:
    """narrow / value_narrow: keep the members of the prior set that meet the condition(s)."""
    cond = Condition(" AND ".join(c.text for c in conditions), _merge(*(c.key_values for c in conditions)),
                     _merge(*(c.props for c in conditions)), _merge(*(c.triples for c in conditions)),
                     opposite=conditions[0].opposite if len(conditions) == 1 else None)
    props = {kv.property for kv in cond.key_values} | set(cond.props)
    new = EntitySet(s.label, s.var, tuple(s.filtered(cond.text)), _merge(s.key_values, cond.key_values),
                    _merge(s.triples, cond.triples), s, cond, s.filtered_props | props, origin=s.origin,
                    distinct_rows=True)
    return _list_step(new, key)


def top_k(s: EntitySet, key: str, prop: str, highest: bool, k: int) -> Step:
    """value_narrow by rank: the ``k`` members with the highest (lowest) ``prop``. It has no condition
    to complement, so no CONTRAST follows it."""
    order = "DESC" if highest else "ASC"
    clauses = (*_ranked(s, prop), f"WITH {s.var} ORDER BY {s.var}.{ident(prop)} {order} LIMIT {k}")
    new = EntitySet(s.label, s.var, clauses, s.key_values, s.triples, None, None, s.filtered_props | {prop},
                    origin=s.origin, distinct_rows=True)
    return _list_step(new, key)


def negation(cond: Condition) -> str:
    """The complement's test, as an annotator writes it. A comparison with a value is null where the property
    is missing, and ``NOT`` alone would drop those nodes: ``NOT coalesce(…, false)`` keeps them. A test that is
    never null is its ``opposite`` (``EXISTS { p }`` for ``NOT EXISTS { p }``, ``x.p IS NOT NULL`` for
    ``x.p IS NULL``); several such tests together become ``NOT (…)``."""
    if cond.key_values:
        return f"NOT coalesce({cond.text}, false)"
    return cond.opposite or f"NOT ({cond.text})"


def contrast(s: EntitySet, key: str) -> Step:
    """contrast: the members of the set s was filtered from that do NOT meet s's last filter (``negation``),
    so the two sets partition the parent exactly."""
    if s.parent is None or s.condition is None:
        raise ChainError("CONTRAST needs a set produced by a filter")
    parent, cond = s.parent, s.condition
    negated = Condition(negation(cond), cond.key_values, cond.props, cond.triples)
    # the complement is filtered on the same properties: a later test of them is decided by the filter
    # ("any of those with no recorded year of death?" after "the ones with one" is always no)
    props = {kv.property for kv in cond.key_values} | set(cond.props)
    new = EntitySet(s.label, s.var, tuple(parent.filtered(negated.text)),
                    _merge(parent.key_values, cond.key_values), _merge(parent.triples, cond.triples), parent, negated,
                    parent.filtered_props | props, origin=parent.origin, distinct_rows=True)
    return _list_step(new, key)


def equals(var: str, label: str, prop: str, value: Any) -> Condition:
    return Condition(f"{var}.{ident(prop)} = {literal(value)}", (KeyValue(label, prop, value),))


def exists(var: str, prop: str, present: bool) -> Condition:
    """An existence test: the property is recorded (or missing) on the node."""
    missing, recorded = f"{var}.{ident(prop)} IS NULL", f"{var}.{ident(prop)} IS NOT NULL"
    return Condition(recorded if present else missing, (), (prop,), opposite=missing if present else recorded)


def count_by(s: EntitySet, prop: str) -> Step:
    """aggregate, grouped: how many members of the prior set have each value of ``prop``."""
    cypher = "\n".join([*s.distinct(), f"RETURN {s.var}.{ident(prop)} AS {ident(prop)}, count({s.var}) AS count"])
    return Step(cypher, (prop, "count"), s.key_values, s.triples, None)


def before_year(var: str, label: str, prop: str, year: int, before: bool) -> Condition:
    """A date condition as people say it: "before 1200" (``< date('1200-01-01')``) or "in 1200 or
    later" (``>= date('1200-01-01')``)."""
    day = dt.date(year, 1, 1)
    return Condition(f"{var}.{ident(prop)} {'<' if before else '>='} {literal(day)}", (KeyValue(label, prop, day),))


def count_neighbours(s: EntitySet, key: str, rel_type: str, forward: bool, target_label: str, var: str,
                     symmetric: bool = False) -> Step:
    """aggregate, per member: how many ``target_label`` nodes each member of the prior set is linked to,
    zero included (OPTIONAL MATCH: a member without any neighbour is part of the answer)."""
    pattern = _pattern(s.var, rel_type, forward, var, target_label, symmetric=symmetric)
    cypher = "\n".join([*s.distinct(), f"OPTIONAL MATCH {pattern}",
                        f"RETURN {s.var}.{ident(key)} AS {ident(key)}, count(DISTINCT {var}) AS count"])
    src, dst = (s.label, target_label) if forward else (target_label, s.label)
    return Step(cypher, (key, "count"), s.key_values, _merge(s.triples, [triple(src, rel_type, dst)]), None)


def compare(var: str, label: str, prop: str, greater: bool, value: Any) -> Condition:
    op = ">" if greater else "<"
    return Condition(f"{var}.{ident(prop)} {op} {literal(value)}", (KeyValue(label, prop, value),))


# --- filter variants (issue 20) ---
# Conditions for the FILTER / REFINE variants a user asks beyond "whose climate is arid": either of two
# values, a name's beginning or a word in it, whether a member has a neighbour at all; and a correction
# of the last filter, which re-derives the set that filter was applied to with the corrected condition.

def either(var: str, label: str, prop: str, values: tuple[Any, Any]) -> Condition:
    """"Whose climate is arid or temperate": ``x.climate IN ['arid', 'temperate']`` (one key-value per
    value, as the reward's parser reads an ``IN`` list)."""
    items = ", ".join(literal(v) for v in values)
    return Condition(f"{var}.{ident(prop)} IN [{items}]", tuple(KeyValue(label, prop, v) for v in values))


def name_match(var: str, label: str, prop: str, fragment: str, start: bool) -> Condition:
    """"Whose name starts with Qu" (``STARTS WITH``) or "with 'Reef' in their name" (``CONTAINS``);
    case-sensitive, as the user typed the fragment."""
    op = "STARTS WITH" if start else "CONTAINS"
    return Condition(f"{var}.{ident(prop)} {op} {literal(fragment)}", (KeyValue(label, prop, fragment),))


def linked(var: str, label: str, rel_type: str, forward: bool, other: str, present: bool,
           symmetric: bool = False) -> Condition:
    """"Which of those provinces have at least one legion stationed in them?" (``EXISTS { pattern }``)
    or "... have no legions ..." (``NOT EXISTS``). The pattern's relationship is a gold triple."""
    pattern = _pattern(var, rel_type, forward, "", other, symmetric=symmetric)
    src, dst = (label, other) if forward else (other, label)
    some, none = f"EXISTS {{ {pattern} }}", f"NOT EXISTS {{ {pattern} }}"
    return Condition(some if present else none, (), (), (triple(src, rel_type, dst),),
                     opposite=none if present else some)


def correct(s: EntitySet, key: str, conditions: list[Condition]) -> Step:
    """A user's correction of the filter that produced ``s`` ("Actually, I meant arid, not temperate"):
    the set that filter was applied to, filtered by the corrected condition(s) instead (never a filter
    of the wrong result)."""
    if s.parent is None or s.condition is None:
        raise ChainError("a correction needs a set produced by a filter")
    return narrow(s.parent, key, conditions)


# --- aggregate variants (issue 20) ---
# Comparisons, yes/no questions, percentages and per-group figures over the prior set. Each is an
# aggregation turn (the active set stays). Their columns follow the rule's sentence on yes/no answers
# and percentages (envs/prompts.py): a boolean named after its test, a percentage as pct_property.

def _figure_expr(s: EntitySet, fn: str, prop: str | None) -> tuple[str, str]:
    """(Cypher expression, column name) of a figure over the set: ``count(n)`` or ``avg(n.age)``."""
    if prop is None:
        return f"count({s.var})", "count"
    return f"{fn}({s.var}.{ident(prop)})", f"{fn}_{prop}"


def figure(s: EntitySet, fn: str, prop: str | None) -> Step:
    """The figure a comparison compares (``count`` when ``prop`` is None): what the depends gate and the
    choice of a threshold near it read."""
    expr, column = _figure_expr(s, fn, prop)
    cypher = "\n".join([*s.distinct(), f"RETURN {expr} AS {ident(column)}"])
    return Step(cypher, (column,), s.key_values, s.triples, None)


def compare_figure(s: EntitySet, fn: str, prop: str | None, greater: bool, value: Any) -> Step:
    """"Are there more than 10 of those?", "Is their average age above 40?": a figure of the set compared
    with the user's number, one boolean named after the figure and the direction (``count_above``,
    ``avg_age_below``). The number of a property's figure is a key-value of that property (as in a
    threshold); a count's is not (no property)."""
    expr, column = _figure_expr(s, fn, prop)
    column += "_above" if greater else "_below"
    cypher = "\n".join([*s.distinct(), f"RETURN {expr} {'>' if greater else '<'} {literal(value)} AS {ident(column)}"])
    kvs = s.key_values if prop is None else _merge(s.key_values, [KeyValue(s.label, prop, value)])
    return Step(cypher, (column,), kvs, s.triples, None)


def _member_test(s: EntitySet, cond: Condition, var: str) -> str:
    """``cond`` (written on the set's variable) written on a list variable instead."""
    return re.sub(r"\b" + re.escape(s.var) + r"\.", f"{var}.", cond.text)


def any_or_all(s: EntitySet, quantifier: str, cond: Condition, prop: str) -> Step:
    """"Is any of those marked as protected?" / "Are they all in the north?": whether any (all) members
    pass ``cond``, a boolean named ``any_<prop>`` / ``all_<prop>``."""
    if quantifier not in ("any", "all"):
        raise ChainError(f"unknown quantifier {quantifier!r}")
    column = f"{quantifier}_{prop}"
    test = _member_test(s, cond, "x")
    cypher = "\n".join([*s.distinct(), f"RETURN {quantifier}(x IN collect({s.var}) WHERE {test}) AS {ident(column)}"])
    return Step(cypher, (column,), _merge(s.key_values, cond.key_values), s.triples, None)


def percentage(s: EntitySet, cond: Condition, prop: str) -> Step:
    """"What percentage of them are marked as protected?": 100.0 * the members passing ``cond`` / all
    members, unrounded (the judge's EX relaxed tolerance takes another exact way to compute it; a
    member where the test is null does not pass), named ``pct_<prop>``."""
    column = f"pct_{prop}"
    cypher = "\n".join([*s.distinct(), f"RETURN 100.0 * count(CASE WHEN {cond.text} THEN 1 END) / count({s.var}) "
                                       f"AS {ident(column)}"])
    return Step(cypher, (column,), _merge(s.key_values, cond.key_values), s.triples, None)


def aggregate_by(s: EntitySet, fn: str, prop: str, group: str) -> Step:
    """"Total treasury of those emperors per dynasty?": one row per value of ``group`` with the sum (or
    mean) of ``prop`` over the members in it."""
    column = f"{fn}_{prop}"
    cypher = "\n".join([*s.distinct(), f"RETURN {s.var}.{ident(group)} AS {ident(group)}, "
                                       f"{fn}({s.var}.{ident(prop)}) AS {ident(column)}"])
    return Step(cypher, (group, column), s.key_values, s.triples, None)


# the columns of the variants: a comparison is the figure's name plus _above / _below, a yes/no over
# the members is any_/all_ plus the property tested, a percentage is pct_ plus the property tested
_VARIANT_COLUMNS = (
    (re.compile(r"\b(\w+)\(\w+\.`?(\w+)`?\) ([<>]) [-\d.]+ AS `?(\w+)`?"),
     lambda m: f"{m[1].lower()}_{m[2]}_{'above' if m[3] == '>' else 'below'}"),
    (re.compile(r"\b(any|all)\(\w+ IN collect\(\w+\) WHERE \w+\.`?(\w+)`?.*\) AS `?(\w+)`?"),
     lambda m: f"{m[1]}_{m[2]}"),
    (re.compile(r"\*\s*count\(CASE WHEN \w+\.`?(\w+)`?.* END\) / count\(\w+\) AS `?(\w+)`?"),
     lambda m: f"pct_{m[1]}"),
)
_COUNT_COMPARE = re.compile(r"\bcount\(\w+\) ([<>]) [-\d.]+ AS `?(\w+)`?")


def variant_column_violations(ret: str) -> tuple[list[str], str]:
    """The items of a RETURN that are comparisons, yes/no answers or percentages and break their
    column rule, and the RETURN without those items (for the rule of the other columns)."""
    bad = []
    for m in _COUNT_COMPARE.finditer(ret):
        if m[2] != f"count_{'above' if m[1] == '>' else 'below'}":
            bad.append(f"{m.group(0)} (expected count_{'above' if m[1] == '>' else 'below'})")
    ret = _COUNT_COMPARE.sub("", ret)
    for pattern, expected in _VARIANT_COLUMNS:
        for m in pattern.finditer(ret):
            if m.groups()[-1] != expected(m):
                bad.append(f"{m.group(0)} (expected {expected(m)})")
        ret = pattern.sub("", ret)
    return bad, ret


# --- date ranges, sorted lists, swaps (issue 20) ---

def year_range(var: str, label: str, prop: str, lo: int, hi: int, dated: bool) -> Condition:
    """A range of years as people say it ("between 1200 and 1300", "in the 1400s"): ``lo`` included,
    ``hi`` not. A date is compared with January 1st of each year (``dated``), a year-valued int with the
    years themselves; the builder only says "between" when no member falls in year ``hi`` itself, so
    the inclusive reading gives the same rows."""
    a, b = (dt.date(lo, 1, 1), dt.date(hi, 1, 1)) if dated else (lo, hi)
    p = f"{var}.{ident(prop)}"
    return Condition(f"{p} >= {literal(a)} AND {p} < {literal(b)}", (KeyValue(label, prop, a), KeyValue(label, prop, b)))


def aggregate_in_range(s: EntitySet, cond: Condition, fn: str = "count", prop: str | None = None) -> Step:
    """aggregate / agg_numeric over the members of the prior set that meet ``cond`` ("how many of those
    were founded between 1200 and 1300?", "the total tonnage of those launched in the 1400s"): a count,
    or ``fn`` of ``prop``. Like every aggregate it leaves the active set as it was."""
    if fn == "count":
        ret, column = f"RETURN count({s.var}) AS count", "count"
    else:
        column = f"{fn}_{prop}"
        ret = f"RETURN {fn}({s.var}.{ident(prop)}) AS {ident(column)}"
    cypher = "\n".join([*s.filtered(cond.text), ret])
    return Step(cypher, (column,), _merge(s.key_values, cond.key_values), s.triples, None)


def expand_sorted(s: EntitySet, rel_type: str, forward: bool, target_label: str, target_key: str, var: str,
                  prop: str, descending: bool, symmetric: bool = False) -> Step:
    """expand, listed in order: the nodes one hop from the prior set with ``prop``, ordered by it ("the
    legions stationed in those provinces, by strength, highest first"). The builder asks it only where
    every such node has ``prop`` and no two share a value, so the order is total and no tie-break is
    needed; the judge compares the rows in order since the final RETURN has ORDER BY."""
    step = expand(s, rel_type, forward, target_label, target_key, var, symmetric=symmetric, extra=(prop,))
    cypher = f"{step.cypher}\nORDER BY {ident(prop)} {'DESC' if descending else 'ASC'}"
    return Step(cypher, step.columns, step.key_values, step.triples, step.new_set)
