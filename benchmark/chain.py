"""The chain representation: each turn's gold query is built from the previous turn's entity set.

An ``EntitySet`` is a Cypher prefix that binds one variable to a set of nodes of one label (possibly
with repeats; every consumer starts with ``WITH DISTINCT``). Each chain mode is a function from a
set (plus the choices the builder made: a relationship, a property, a value) to a ``Step``: the gold
query of the turn and, where the mode defines one, the new active set. Because every step extends the
prior set's own clauses, the gold re-derives the prior set rather than pasting its values, and the
gold key-values and relationship triples are exact by construction (they are the literals and the
patterns the builder itself put into the query).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Any


def literal(value: Any) -> str:
    """A Cypher literal for a property value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("no literal for non-finite floats")
        return repr(value)
    if isinstance(value, dt.date):
        return f"date('{value.isoformat()}')"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
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

    def distinct(self) -> list[str]:
        return [*self.clauses, f"WITH DISTINCT {self.var}"]

    def members_query(self) -> str:
        """All distinct members with their properties (the builder picks values from these)."""
        return "\n".join([*self.distinct(), f"RETURN properties({self.var}) AS p"])


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


def _list_step(s: EntitySet, key: str) -> Step:
    """The gold query listing a set by its display key."""
    cypher = "\n".join([*s.clauses, f"RETURN DISTINCT {s.var}.{ident(key)} AS name"])
    return Step(cypher, ("name",), s.key_values, s.triples, s)


def _pattern(var: str, rel_type: str, forward: bool, new_var: str, new_label: str, hops: str = "") -> str:
    rel = f"[:{ident(rel_type)}{hops}]"
    arrow = f"-{rel}->" if forward else f"<-{rel}-"
    return f"({var}){arrow}({new_var}:{ident(new_label)})"


# -- openings (turn 1 and topic shifts) ---------------------------------------------------------------

def open_anchored(anchor_label: str, anchor_key: str, anchor_value: Any, rel_type: str, forward: bool,
                  target_label: str, target_key: str, var: str) -> Step:
    """The targets linked to one named entity: MATCH (a {key: v})-[:R]->(x:T)."""
    anchor = f"(a_{var}:{ident(anchor_label)} {{{ident(anchor_key)}: {literal(anchor_value)}}})"
    rel = f"[:{ident(rel_type)}]"
    arrow = f"-{rel}->" if forward else f"<-{rel}-"
    clause = f"MATCH {anchor}{arrow}({var}:{ident(target_label)})"
    src, dst = (anchor_label, target_label) if forward else (target_label, anchor_label)
    s = EntitySet(target_label, var, (clause,), (KeyValue(anchor_label, anchor_key, anchor_value),),
                  (triple(src, rel_type, dst),))
    return _list_step(s, target_key)


def open_filtered(label: str, key: str, prop: str, value: Any, var: str) -> Step:
    """Every node of a label with a categorical value: MATCH (x:L) WHERE x.p = v."""
    universe = EntitySet(label, var, (f"MATCH ({var}:{ident(label)})",))
    cond = Condition(f"{var}.{ident(prop)} = {literal(value)}", (KeyValue(label, prop, value),))
    s = EntitySet(label, var, (*universe.clauses, f"WHERE {cond.text}"), cond.key_values, (), universe, cond,
                  frozenset({prop}))
    return _list_step(s, key)


# -- chain modes ---------------------------------------------------------------------------------------

def expand(s: EntitySet, rel_type: str, forward: bool, target_label: str, target_key: str, var: str,
           recursive: bool = False) -> Step:
    """expand: the nodes one hop (or, recursive, any number of hops) from the prior set."""
    clause = "MATCH " + _pattern(s.var, rel_type, forward, var, target_label, "*1.." if recursive else "")
    src, dst = (s.label, target_label) if forward else (target_label, s.label)
    new = EntitySet(target_label, var, (*s.distinct(), clause), s.key_values,
                    _merge(s.triples, [triple(src, rel_type, dst)]))
    return _list_step(new, target_key)


def pivot(s: EntitySet, prop: str, highest: bool, rel_type: str, forward: bool, target_label: str,
          target_key: str, var: str) -> Step:
    """pivot: rank the prior set by a property, take the top (or bottom) one, traverse from it."""
    order = "DESC" if highest else "ASC"
    clauses = (*s.clauses, f"WITH DISTINCT {s.var} WHERE {s.var}.{ident(prop)} IS NOT NULL",
               f"WITH {s.var} ORDER BY {s.var}.{ident(prop)} {order} LIMIT 1",
               "MATCH " + _pattern(s.var, rel_type, forward, var, target_label))
    src, dst = (s.label, target_label) if forward else (target_label, s.label)
    new = EntitySet(target_label, var, clauses, s.key_values, _merge(s.triples, [triple(src, rel_type, dst)]))
    return _list_step(new, target_key)


def count(s: EntitySet) -> Step:
    """aggregate: the size of the prior set."""
    cypher = "\n".join([*s.distinct(), f"RETURN count({s.var}) AS count"])
    return Step(cypher, ("count",), s.key_values, s.triples, None)


AGGREGATES = {"AGG_MAX": ("max", "max"), "AGG_AVG": ("avg", "avg"), "AGG_SUM": ("sum", "total")}


def aggregate_numeric(s: EntitySet, phenomenon: str, prop: str) -> Step:
    """agg_numeric: max / avg / sum of a numeric property over the prior set."""
    fn, prefix = AGGREGATES[phenomenon]
    column = f"{prefix}_{prop}"
    cypher = "\n".join([*s.distinct(), f"RETURN {fn}({s.var}.{ident(prop)}) AS {ident(column)}"])
    return Step(cypher, (column,), s.key_values, s.triples, None)


def narrow(s: EntitySet, key: str, conditions: list[Condition]) -> Step:
    """narrow / value_narrow: keep the members of the prior set that meet the condition(s)."""
    cond = Condition(" AND ".join(c.text for c in conditions), _merge(*(c.key_values for c in conditions)))
    props = {kv.property for kv in cond.key_values}
    new = EntitySet(s.label, s.var, (*s.distinct(), f"WHERE {cond.text}"), _merge(s.key_values, cond.key_values),
                    s.triples, s, cond, s.filtered_props | props)
    return _list_step(new, key)


def contrast(s: EntitySet, key: str) -> Step:
    """contrast: the members of the set s was filtered from that do NOT meet s's last filter.

    ``coalesce(…, false)`` keeps the nodes where the filtered property is null, so the two sets
    partition the parent exactly.
    """
    if s.parent is None or s.condition is None:
        raise ValueError("CONTRAST needs a set produced by a filter")
    parent, cond = s.parent, s.condition
    negated = Condition(f"NOT coalesce({cond.text}, false)", cond.key_values)
    new = EntitySet(s.label, s.var, (*parent.distinct(), f"WHERE {negated.text}"),
                    _merge(parent.key_values, cond.key_values), parent.triples, parent, negated,
                    parent.filtered_props)
    return _list_step(new, key)


def equals(var: str, label: str, prop: str, value: Any) -> Condition:
    return Condition(f"{var}.{ident(prop)} = {literal(value)}", (KeyValue(label, prop, value),))


def compare(var: str, label: str, prop: str, greater: bool, value: Any) -> Condition:
    op = ">" if greater else "<"
    return Condition(f"{var}.{ident(prop)} {op} {literal(value)}", (KeyValue(label, prop, value),))
