"""Gold key-values and relationship triples derived from a Cypher query, for datasets that lack them.

The benchmark's own sessions carry exact ``gold_key_values`` and ``gold_triples`` (the chain builder
put them into the query). External corpora (e.g. Neo4j's Text2Cypher dataset) carry only the gold
Cypher; this module derives both from it so that the key-value and triple rewards work there too.

Parser decision. This is a small pattern parser over the project's Cypher toolkit
(``graphs.cypher_syntax``: its tokens, with string literals, comments and backticked names already
handled, its names, string decoding, lenient bracket matching and keyword sets), not a grammar package. The grammar packages on PyPI were tried: ``graphglot`` 0.14.3 (GQL/Cypher)
rejects map projections (``RETURN m {.title}``) and ``shortestPath(...)``, both common in the
Text2Cypher corpus, and the libcypher-parser bindings are unmaintained C extensions. The rewards only
need two things, graph patterns and ``property OP literal`` comparisons, and need them to degrade
gracefully: whatever this parser does not understand is skipped, never fatal. No dependency to pin.

What is extracted (``parse(query)``):

- **Variables**: every labelled node pattern ``(v:Label)`` binds ``v`` to its labels (first binding
  wins) and every relationship pattern ``[r:TYPE]`` binds ``r`` to its type, anywhere in the query
  (MATCH, OPTIONAL MATCH, pattern predicates, EXISTS/COUNT subqueries, pattern comprehensions).
- **Triples**: each hop ``(a)-[:T]->(b)`` of every pattern chain, in the stored direction:
  ``(a)<-[:T]-(b)`` gives ``(:B)-[:T]->(:A)``. A node without a label takes its variable's label from
  elsewhere in the query. An undirected hop ``(a)-[:T]-(b)`` gives the undirected form
  ``(:A)-[:T]-(:B)`` (labels sorted), which matches either direction. Alternatives (``:A|B``,
  ``[:R|S]``) give one triple per combination. A hop whose label or type is still unknown is resolved
  through ``schema`` (the world's canonical triples) when exactly one schema triple fits; otherwise it
  is left out. Variable-length hops (``*1..3``) count like single hops.
- **Key-values**: ``{label, property, value}`` for every literal in a node or relationship map
  (``(d:Director {name: 'X'})``) and for every comparison of a property with a literal:
  ``v.p OP lit`` or ``lit OP v.p`` with OP one of ``= <> < > <= >= =~ STARTS WITH ENDS WITH
  CONTAINS IN`` (``IN [a, b]`` gives one entry per element); a property wrapped in one single-argument
  function (``toLower(v.p) = 'x'``) counts as the property. Literals: strings (decoded), numbers,
  booleans, and temporal constructors of one string (``date('1996-08-09')`` gives the string
  ``'1996-08-09'``, the form the benchmark stores). ``label`` is the variable's label (a
  relationship's type), or ``None`` when the query never labels the variable. Parameters and nulls
  are skipped.

Both lists keep the order of first appearance and hold no duplicates. The result for the
benchmark's own gold queries equals the builder's exact annotations (tested).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from graphs.cypher_syntax import (TEMPORAL_FUNCTIONS, WORD_OPERATORS, decode_string, group_end, is_closing,
                                  is_opening, name_of, tokenize)
from cypherturn.errors import InputError
_TRIPLE_TEXT = re.compile(r"^\(:(?P<src>.+?)\)-\[:(?P<type>.+?)\]-(?P<arrow>>?)\(:(?P<dst>.+?)\)$")


@dataclass(frozen=True, order=True)
class Triple:
    """One relationship triple; ``directed=False`` matches both directions."""

    src: str
    type: str
    dst: str
    directed: bool = True

    @classmethod
    def make(cls, src: str, rel_type: str, dst: str, directed: bool = True) -> "Triple":
        if not directed and dst < src:
            src, dst = dst, src
        return cls(src, rel_type, dst, directed)

    def __str__(self) -> str:
        return f"(:{self.src})-[:{self.type}]-{'>' if self.directed else ''}(:{self.dst})"

    @classmethod
    def from_text(cls, text: str) -> "Triple":
        """The inverse of ``str()``: ``(:A)-[:R]->(:B)`` or the undirected ``(:A)-[:R]-(:B)``."""
        m = _TRIPLE_TEXT.match(text.strip())
        if not m:
            raise InputError(f"not a canonical triple: {text!r} (expected '(:Src)-[:TYPE]->(:Dst)')")
        return cls.make(m["src"], m["type"], m["dst"], bool(m["arrow"]))


@dataclass
class ParsedQuery:
    variables: dict[str, tuple[str, ...]] = field(default_factory=dict)  # var -> labels (or (type,))
    triples: list[Triple] = field(default_factory=list)
    key_values: list[dict[str, Any]] = field(default_factory=list)


# -- literals --------------------------------------------------------------------------------------------

def _number(text: str) -> int | float | None:
    try:
        if re.fullmatch(r"\d+", text):
            return int(text)
        if re.fullmatch(r"0x[0-9a-fA-F]+", text):
            return int(text, 16)
        return float(text)
    except ValueError:
        return None


class _Parser:
    def __init__(self, query: str, schema: Iterable[Any] | None):
        self.t = tokenize(query)
        self.n = len(self.t)
        self.schema = [_as_triple(s) for s in schema] if schema else []
        self.vars: dict[str, tuple[str, ...]] = {}
        self.rel_vars: set[str] = set()
        self.chains: list[list[tuple]] = []  # node, rel, node, rel, node ...
        self.maps: list[tuple[str | None, list[str], list[tuple[str, Any]]]] = []  # (var, labels, [(prop, value)])

    def text(self, i: int) -> str:
        return self.t[i].text if 0 <= i < self.n else ""

    def upper(self, i: int) -> str:
        return self.t[i].upper if 0 <= i < self.n else ""

    # -- literals --------------------------------------------------------------------------------
    def literal(self, i: int) -> tuple[bool, Any, int]:
        """(ok, value, next index) for a literal starting at i."""
        if i >= self.n:
            return False, None, i
        tok = self.t[i]
        if tok.kind == "string":
            return True, decode_string(tok.text), i + 1
        if tok.kind == "number":
            value = _number(tok.text)
            return (value is not None), value, i + 1
        if tok.text == "-" and i + 1 < self.n and self.t[i + 1].kind == "number":
            value = _number(self.t[i + 1].text)
            return (value is not None), (-value if value is not None else None), i + 2
        if tok.kind == "word":
            word = tok.text.lower()
            if word in ("true", "false"):
                return True, word == "true", i + 1
            if (word in TEMPORAL_FUNCTIONS and self.text(i + 1) == "(" and i + 2 < self.n
                    and self.t[i + 2].kind == "string" and self.text(i + 3) == ")"):
                return True, decode_string(self.t[i + 2].text), i + 4
        return False, None, i

    def literal_list(self, i: int) -> tuple[bool, list[Any], int]:
        if self.text(i) != "[":
            return False, [], i
        values, j = [], i + 1
        while j < self.n:
            ok, value, j = self.literal(j)
            if not ok:
                return False, [], i
            values.append(value)
            if self.text(j) == ",":
                j += 1
                continue
            if self.text(j) == "]":
                return True, values, j + 1
            return False, [], i
        return False, [], i

    def map_literal(self, i: int) -> tuple[list[tuple[str, Any]], int]:
        """Literal entries of the map starting at i ('{'), and the index after its '}'."""
        close = group_end(self.t, i + 1)
        entries, j = [], i + 1
        expect_key = True
        while j < close:
            tok = self.t[j]
            if is_opening(tok):  # a nested map, list or call: its entries are not this map's
                j = group_end(self.t, j + 1) + 1
                continue
            if expect_key and name_of(tok) and self.text(j + 1) == ":":
                ok, value, k = self.literal(j + 2)
                if ok and self.text(k) in (",", "}"):
                    entries.append((name_of(tok), value))
                expect_key = False
            if tok.text == ",":
                expect_key = True
            j += 1
        return entries, min(close + 1, self.n)

    # -- patterns --------------------------------------------------------------------------------
    def names_after_colon(self, j: int) -> tuple[list[str], int]:
        """``:A:B``, ``:A&B``, ``:A|B``, ``:A|:B`` -> names, next index."""
        names: list[str] = []
        while self.text(j) in (":", "&", "|"):
            k = j + 1
            if self.text(k) == ":":  # [:A|:B]
                k += 1
            name = name_of(self.t[k]) if k < self.n else None
            if name is None:
                break
            names.append(name)
            j = k + 1
        return names, j

    def node(self, i: int):
        """A node pattern at i: ((var, labels, map), next index) or None."""
        if self.text(i) != "(":
            return None
        j = i + 1
        var = None
        if j < self.n and name_of(self.t[j]) and (self.text(j + 1) in (":", ")", "{", "$")
                                                or self.upper(j + 1) == "WHERE"):
            var = name_of(self.t[j])
            j += 1
        labels, j = self.names_after_colon(j)
        props: list[tuple[str, Any]] = []
        if self.text(j) == "{":
            props, j = self.map_literal(j)
        elif self.text(j) == "$":
            j += 2
        if self.upper(j) == "WHERE":  # inline predicate: skip to the closing ')'
            j = group_end(self.t, j)
        if self.text(j) != ")":
            return None
        return (var, labels, props), j + 1

    def rel(self, i: int):
        """A relationship pattern at i: ((var, types, map, direction), next index) or None.

        direction: '>' left to right, '<' right to left, '' undirected."""
        j = i
        left = False
        if self.text(j) == "<":
            left = True
            j += 1
        if self.text(j) != "-":
            return None
        j += 1
        var, types, props = None, [], []
        if self.text(j) == "[":
            j += 1
            if j < self.n and name_of(self.t[j]) and self.text(j + 1) in (":", "]", "*", "{", "$"):
                var = name_of(self.t[j])
                j += 1
            types, j = self.names_after_colon(j)
            while j < self.n:  # to the closing ']', reading the property map (*1..3 and the like skipped)
                tok = self.t[j]
                if tok.text == "{":
                    props, j = self.map_literal(j)
                    continue
                if is_opening(tok):
                    j = group_end(self.t, j + 1) + 1
                    continue
                if is_closing(tok):
                    break
                j += 1
            if self.text(j) != "]":
                return None
            j += 1
            if self.text(j) != "-":
                return None
            j += 1
        elif self.text(j) == "-":  # -- short form
            j += 1
        else:
            return None
        right = False
        if self.text(j) == ">":
            right = True
            j += 1
        direction = ">" if right and not left else "<" if left and not right else ""
        return (var, types, props, direction), j

    def scan(self) -> None:
        i = 0
        while i < self.n:
            got = self.node(i) if self.text(i) == "(" else None
            if got is None:
                i += 1
                continue
            chain = [got[0]]
            j = got[1]
            while True:
                r = self.rel(j)
                if r is None:
                    break
                nxt = self.node(r[1])
                if nxt is None:
                    break
                chain.extend([r[0], nxt[0]])
                j = nxt[1]
            for k, part in enumerate(chain):
                if k % 2 == 0:
                    var, labels, props = part
                    if var and labels and var not in self.vars:
                        self.vars[var] = tuple(labels)
                    self.maps.append((var, labels, props))
                else:
                    var, types, props, _ = part
                    if var:
                        self.rel_vars.add(var)
                        if types and var not in self.vars:
                            self.vars[var] = tuple(types)
                    self.maps.append((var, types, props))
            self.chains.append(chain)
            # resume inside the first node so that nested patterns (rare) are still seen
            i = i + 1 if len(chain) == 1 else j

    # -- results ---------------------------------------------------------------------------------
    def labels_of(self, var: str | None, labels: list[str]) -> list[str]:
        if labels:
            return list(labels)
        if var and var in self.vars:
            return list(self.vars[var])
        return []

    def triples(self) -> list[Triple]:
        out: list[Triple] = []
        for chain in self.chains:
            for k in range(1, len(chain), 2):
                (avar, alabels, _), (_, types, _, direction), (bvar, blabels, _) = chain[k - 1:k + 2]
                a, b = self.labels_of(avar, alabels), self.labels_of(bvar, blabels)
                if direction == "<":
                    a, b = b, a
                for t in self.hop(a, list(types), b, direction != ""):
                    if t not in out:
                        out.append(t)
        return out

    def hop(self, a: list[str], types: list[str], b: list[str], directed: bool) -> list[Triple]:
        if a and b and types:
            return [Triple.make(x, r, y, directed) for x in a for r in types for y in b]
        if not self.schema:
            return []

        def fits(t: Triple, x: list[str], y: list[str]) -> bool:
            return (not x or t.src in x) and (not types or t.type in types) and (not y or t.dst in y)

        forward = [t for t in self.schema if fits(t, a, b)]
        backward = [] if directed else [t for t in self.schema if fits(t, b, a)]
        candidates = list(dict.fromkeys(forward + backward))
        if len(candidates) != 1:
            return []
        t = candidates[0]
        return [t if directed else Triple.make(t.src, t.type, t.dst, False)]

    def comparisons(self) -> list[tuple[str, str, Any]]:
        """(var, property, value) for each property-literal comparison."""
        found: list[tuple[str, str, Any]] = []
        for i in range(self.n):
            prop_ref = self.prop_at(i)
            if prop_ref is not None:  # v.p OP literal
                var, prop, j = prop_ref
                op_end = self.operator(j)
                if op_end is not None:
                    op, k = op_end
                    if op == "IN":
                        ok, values, _ = self.literal_list(k)
                        if ok:
                            found.extend((var, prop, v) for v in values)
                    else:
                        ok, value, _ = self.literal(k)
                        if ok:
                            found.append((var, prop, value))
                continue
            ok, value, j = self.literal(i)  # literal OP v.p
            if ok and (i == 0 or self.text(i - 1) not in (".", "-", "[", ",", ":")):
                op_end = self.operator(j)
                if op_end is not None and op_end[0] not in ("IN",):
                    ref = self.prop_at(op_end[1])
                    if ref is not None:
                        found.append((ref[0], ref[1], value))
        return found

    def prop_at(self, i: int):
        """``v.p`` or ``fn(v.p)`` at i: (var, prop, next index) or None."""
        if i >= self.n or (i > 0 and self.text(i - 1) == "."):
            return None
        tok = self.t[i]
        if tok.kind == "word" and self.text(i + 1) == "(" and self.text(i + 2) not in ("(",):
            inner = self.prop_at(i + 2)
            if inner is not None and self.text(inner[2]) == ")":
                return inner[0], inner[1], inner[2] + 1
            return None
        var = name_of(tok)
        if var is None or self.text(i + 1) != "." or i + 2 >= self.n:
            return None
        prop = name_of(self.t[i + 2])
        if prop is None or self.text(i + 3) == ".":
            return None
        if self.text(i + 3) == "(":  # a namespaced function call such as apoc.text.x(...)
            return None
        return var, prop, i + 3

    def operator(self, j: int):
        two = self.text(j) + self.text(j + 1)
        if two in ("<>", "<=", ">=", "=~"):
            return two, j + 2
        if self.text(j) in ("=", "<", ">") and self.t[j].kind == "punct":
            return self.text(j), j + 1
        word = self.upper(j)
        if word in WORD_OPERATORS:
            follow = WORD_OPERATORS[word]
            if follow is None:
                return word, j + 1
            if self.upper(j + 1) == follow:
                return f"{word} {follow}", j + 2
        return None

    def key_values(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []

        def add(label, prop, value):
            kv = {"label": label, "property": prop, "value": value}
            if kv not in out:
                out.append(kv)

        items: list[tuple[int, str | None, str, Any]] = []
        for var, labels, props in self.maps:
            names = self.labels_of(var, labels)
            for prop, value in props:
                items.append((0, names[0] if names else None, prop, value))
        for var, prop, value in self.comparisons():
            names = self.labels_of(var, [])
            items.append((1, names[0] if names else None, prop, value))
        for _, label, prop, value in items:
            add(label, prop, value)
        return out


def _as_triple(item: Any) -> Triple:
    if isinstance(item, Triple):
        return item
    if isinstance(item, str):
        return Triple.from_text(item)
    src, rel_type, dst = item
    return Triple(src, rel_type, dst, True)


def parse(query: str, schema: Iterable[Any] | None = None) -> ParsedQuery:
    """Variables, triples and key-values of ``query`` (see the module docstring). Never raises for
    odd input: what is not understood is skipped. ``schema``: canonical triples (strings like
    ``(:A)-[:R]->(:B)``, ``Triple``s or ``(src, type, dst)`` tuples) to resolve unlabelled hops."""
    p = _Parser(query if isinstance(query, str) else "", schema)
    p.scan()
    return ParsedQuery(variables=dict(p.vars), triples=p.triples(), key_values=p.key_values())


@functools.lru_cache(maxsize=65536)
def _cached(query: str, schema: tuple | None) -> tuple[tuple[str, ...], tuple[tuple, ...]]:
    parsed = parse(query, schema)
    kvs = tuple((kv["label"], kv["property"], _freeze(kv["value"])) for kv in parsed.key_values)
    return tuple(str(t) for t in parsed.triples), kvs


def _freeze(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def gold_triples(query: str, schema: Iterable[Any] | None = None) -> list[str]:
    """The canonical triples of ``query`` as strings (``(:Src)-[:TYPE]->(:Dst)``); cached."""
    return list(_cached(query, tuple(str(_as_triple(s)) for s in schema) if schema else None)[0])


def gold_key_values(query: str, schema: Iterable[Any] | None = None) -> list[dict[str, Any]]:
    """The key-values of ``query`` as ``{label, property, value}`` dicts; cached."""
    kvs = _cached(query, tuple(str(_as_triple(s)) for s in schema) if schema else None)[1]
    return [{"label": label, "property": prop, "value": value} for label, prop, value in kvs]
