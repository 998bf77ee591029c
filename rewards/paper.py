"""The GRPO paper's four rewards: format, answer, key-value and triple (each +1 or -1).

All four take TRL's reward signature ``fn(prompts, completions, **kwargs) -> list[float | None]``;
dataset columns arrive as kwargs lists aligned with ``completions``: ``gold_cypher`` (answer, and the
source of derived golds), ``gold_key_values``, ``gold_triples``. The paper sums them (its Formula 1);
with TRL, pass them as separate reward functions with weight 1 each (``rewards.weighted``).

**format_reward**: +1 when ``rewards.completions.check_format`` holds, else -1.

**answer_reward**: +1 when the query in ``<answer>`` equals ``gold_cypher`` after ``normalize_cypher``,
else -1 (also -1 without an ``<answer>`` tag). The normalization, on the tokens of the Cypher toolkit
``graphs.cypher_syntax`` (so nothing inside strings or backticks is touched), with its keyword rule
and keyword set (``is_keyword``, ``KEYWORDS``):

1. whitespace and comments vanish (tokens are re-joined with single spaces); a surrounding code fence
   and a trailing ``;`` are dropped;
2. keywords are upper-cased (``match`` = ``MATCH``; also ``true``/``false``/``null``) and function
   names lower-cased (``COUNT(`` = ``count(``), both being case-insensitive in Cypher; labels, types,
   property keys and variables keep their case;
3. string literals are re-quoted in one style (``"Frank Darabont"`` = ``'Frank Darabont'``; escapes
   decoded and re-encoded); backticks around a plain name are dropped (`` `Movie` `` = ``Movie``);
   decimal numbers are written canonically (``1.50`` = ``1.5``);
4. variables are alpha-renamed to ``v1, v2, …`` in order of first appearance (``(d:Director)`` and
   ``(x:Director)`` agree). Variables are the names bound by node, relationship and path patterns,
   list comprehensions and quantifiers (``x IN``), ``reduce`` accumulators, ``YIELD``, and ``AS`` in
   ``WITH``/``UNWIND``/subqueries; an alias after ``AS`` in the outermost ``RETURN`` is a result
   column name and keeps its text (``AS name`` ≠ ``AS title``, as in strict EX).

Nothing else is normalized (clause order, ``AND`` operand order, redundant parentheses, ``DISTINCT``):
the answer reward is a string match by design, as in the paper; the execution rewards judge meaning.

**key_value_reward**: +1 when the extracted key-values cover every gold key-value, else -1.
Grammar of the ``<key_value>`` content (the paper's example is a bare list, ``Helen, financial
crises``; qualified forms are accepted too):

- items are separated by newlines, commas or semicolons that are outside quotes and brackets; a
  leading list marker (``-``, ``*``, ``•``, ``1.``, ``1)``) is ignored;
- an item is one of: ``Label.property = value`` (or ``:`` / ``==`` instead of ``=``; the label may be
  written ``(:Label)``), ``property = value`` / ``property: value``, a braced map
  ``{label: L, property: P, value: V}``, the line form ``label: L, property: P, value: V``, or a bare
  ``value``;
- a value may be quoted (``'…'``, ``"…"``, typographic quotes; needed for values that contain a
  comma), a number, ``true``/``false``, or a temporal constructor ``date('1996-08-09')`` (which stands
  for its string);
- ``none``, ``n/a``, ``-``, ``null``, ``nil``, ``empty`` and ``…`` items stand for nothing.

A gold entry ``{label, property, value}`` is covered by an item whose value equals it (case-folded,
inner whitespace collapsed, numbers compared as numbers: ``3000`` = ``3000.0``; booleans as
``true``/``false``) and whose label and property, where the item names them, equal the gold's
(case-folded). So a bare value covers the gold entry (the paper's format); a qualified item must name
the right label and property. Gold entries may be ``{label, property, value}`` or the Hugging Face
export's ``{label, property, value_json}``.

**triple_reward**: +1 when the extracted triples cover every gold triple, else -1. Grammar of the
``<relationship>`` content: items separated by newlines, commas or semicolons outside brackets; each
item a chain of nodes and relationships, ``(:A)-[:R]->(:B)<-[:S]-(:C)`` (two triples), where a node is
``(:Label)``, ``(var:Label)``, ``(Label)`` or a bare ``Label`` (so the paper's ``Suppliers -[:SUPPLIES]->
Product`` and ``(Movie)<-[:DIRECTED]-(Director)`` parse), a relationship is ``-[:TYPE]->``,
``<-[:TYPE]-`` or undirected ``-[:TYPE]-`` (``[r:TYPE]``, ``[TYPE]`` and ``[:R|S]`` also parse).
Direction is normalized: ``(:A)<-[:R]-(:B)`` is ``(:B)-[:R]->(:A)``. Labels and types compare
case-folded, backticks removed. An undirected item covers a gold triple in either direction (and an
undirected gold, as derived from an undirected query, is covered in either direction). ``none`` stands
for nothing.

**The guard against gaming ⊇** (listing the whole schema, or every value of the question): for a gold
set of size g > 0, the response scores -1 when it extracts more than ``max_factor * g + slack``
distinct items (defaults 2 and 1: one gold triple allows 3 items, two allow 5), even if they cover the
gold. Items that do not parse do not count (and cover nothing).

**An empty gold set** (a turn whose query has no relationship pattern, or no literal) is handled by
``empty_gold``: ``"exact"`` (default) +1 when nothing is extracted (blank content or ``none``), else -1;
``"pass"``: always +1 (the literal ``X ⊇ ∅``); ``"skip"``: ``None`` (TRL leaves it out of the sum).

**Derived golds.** When a row has no ``gold_key_values`` / ``gold_triples`` (the column is missing or
the value is ``None``), they are derived from ``gold_cypher`` by ``rewards.gold_from_cypher`` (for
external corpora such as Neo4j's Text2Cypher dataset). An empty list is a real, empty gold set.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Iterable

from benchmark.session import decode_json
from graphs.cypher_syntax import (CALLABLE_KEYWORDS, CLAUSE_OPENERS, KEYWORDS, OPENING, Token, decode_string,
                                  enclosing_brackets, group_end, is_keyword, name_of, plain_name, tokenize)
from cypherturn.errors import InputError
from rewards import gold_from_cypher
from rewards.completions import check_format, completion_text, extract_answer, extract_tag, strip_code
from rewards.completions import kwargs_column as _column
from rewards.gold_from_cypher import Triple

EMPTY_GOLD_MODES = ("exact", "pass", "skip")
NOTHING = frozenset({"none", "n/a", "na", "-", "--", "null", "nil", "empty", "...", "…", "nothing"})

# -- helpers shared by the four rewards -----------------------------------------------------------------

def _texts(completions) -> list[str]:
    return [completion_text(c) for c in completions]


# -- format ------------------------------------------------------------------------------------------------

def format_reward(prompts, completions, **kwargs) -> list[float]:
    """+1 when a completion follows the tagged format (``rewards.completions.check_format``), else -1."""
    return [1.0 if check_format(t) else -1.0 for t in _texts(completions)]


# -- answer ------------------------------------------------------------------------------------------------

_DECIMAL = re.compile(r"\d+\.\d+(?:[eE][+-]?\d+)?\Z|\d+[eE][+-]?\d+\Z")


def _canonical_string(text: str) -> str:
    value = decode_string(text)
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


def _unquote(tokens: list[Token]) -> list[Token]:
    """Backticked plain names become word tokens (marked so they never read as keywords)."""
    out = []
    for tok in tokens:
        inner = plain_name(tok)
        out.append(Token("name", inner, tok.start, tok.end) if inner is not None else tok)
    return out


def _is_name(tok: Token) -> bool:
    return tok.kind in ("word", "name")


def normalize_cypher(query: str) -> str:
    """The canonical text of a query for the answer reward (see the module docstring)."""
    tokens = _unquote(tokenize(strip_code(query or "")))
    n = len(tokens)

    def text(i: int) -> str:
        return tokens[i].text if 0 <= i < n else ""

    def up(i: int) -> str:
        return tokens[i].text.upper() if 0 <= i < n and tokens[i].kind == "word" else ""

    # bracket context of every token, and the clause keyword (at the outermost brace level) it is in
    around = enclosing_brackets(tokens)
    innermost = [a.innermost for a in around]
    brace_depth = [a.braces for a in around]
    clause_at: list[str] = []
    clause_by_depth: dict[int, str] = {0: ""}
    for i, tok in enumerate(tokens):
        depth = brace_depth[i]
        for deeper in [d for d in clause_by_depth if d > depth]:  # a closed brace ends its clauses
            del clause_by_depth[deeper]
        if is_keyword(tokens, i) and tok.upper in CLAUSE_OPENERS and innermost[i] in ("", "{"):
            clause_by_depth[depth] = tok.upper
        clause_at.append(clause_by_depth.get(depth, ""))

    def name_position(i: int) -> bool:
        """A name that can be a variable: not a property/label/parameter, map key or function."""
        if not _is_name(tokens[i]) or text(i - 1) in (".", "$") or text(i - 1) == ":":
            return False
        if text(i + 1) == ":" and innermost[i] == "{":
            return False
        if text(i + 1) == "(":
            return False
        if tokens[i].kind == "word" and tokens[i].text.upper() in KEYWORDS:
            return False
        return True

    def top_return_alias(i: int) -> bool:
        return up(i - 1) == "AS" and brace_depth[i] == 0 and clause_at[i] == "RETURN"

    declared: set[str] = set()
    for i in range(n):
        if not name_position(i):
            continue
        prev, nxt = text(i - 1), text(i + 1)
        name = tokens[i].text
        if prev == "(" and (nxt in (":", ")", "{") or up(i + 1) in ("WHERE", "IN")):
            declared.add(name)
        elif prev == "(" and nxt == "=":  # reduce(acc = 0, ...)
            declared.add(name)
        elif prev == "[" and (nxt in (":", "]", "*", "{") or up(i + 1) in ("IN", "WHERE")):
            declared.add(name)
        elif nxt == "=" and (up(i - 1) in ("MATCH", "OPTIONAL") or prev == ","):
            if text(i + 2) == "(" or (i + 3 < n and text(i + 3) == "("):
                declared.add(name)  # path variable
        elif up(i - 1) == "AS" and not top_return_alias(i):
            declared.add(name)
        elif up(i - 1) == "YIELD" or (prev == "," and clause_at[i] == "YIELD"):
            declared.add(name)

    renames: dict[str, str] = {}
    out: list[str] = []
    for i, tok in enumerate(tokens):
        if tok.kind == "string":
            out.append(_canonical_string(tok.text))
        elif tok.kind == "number":
            out.append(repr(float(tok.text)) if _DECIMAL.match(tok.text) else tok.text.lower())
        elif _is_name(tok):
            if name_position(i) and tok.text in declared and not top_return_alias(i):
                if tok.text not in renames:
                    renames[tok.text] = f"v{len(renames) + 1}"
                out.append(renames[tok.text])
            elif is_keyword(tokens, i) and text(i + 1) == "(" and (tok.upper not in KEYWORDS
                                                                 or tok.upper in CALLABLE_KEYWORDS):
                out.append(tok.text.lower())  # a function name
            elif is_keyword(tokens, i) and tok.upper in KEYWORDS:
                out.append(tok.upper)
            else:
                out.append(tok.text)
        else:
            out.append(tok.text)
    return " ".join(out)


def answer_reward(prompts, completions, **kwargs) -> list[float]:
    """+1 when the ``<answer>`` query equals ``gold_cypher`` after ``normalize_cypher``, else -1."""
    texts = _texts(completions)
    golds = _column(kwargs, "gold_cypher", len(texts))
    if golds is None:
        raise InputError("answer_reward needs the dataset column 'gold_cypher'")
    scores = []
    cache: dict[str, str] = {}
    for text, gold in zip(texts, golds):
        query = extract_answer(text)
        if query is None or gold is None:
            scores.append(-1.0)
            continue
        if gold not in cache:
            cache[gold] = normalize_cypher(gold)
        scores.append(1.0 if normalize_cypher(query) == cache[gold] else -1.0)
    return scores


# -- item splitting shared by key-value and triple extraction ----------------------------------------------

_QUOTES = {"'": "'", '"': '"', "`": "`", "“": "”", "‘": "’", "«": "»"}
_BULLET = re.compile(r"\A\s*(?:[-*•·]|\d+[.)])\s+")


def _split_items(content: str, separators: str = ",;\n") -> list[str]:
    items, buf, stack, quote = [], [], [], None
    for ch in content:
        if quote is not None:
            buf.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in _QUOTES:
            quote = _QUOTES[ch]
        elif ch in OPENING:
            stack.append(OPENING[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
        elif not stack and ch in separators:
            items.append("".join(buf))
            buf = []
            continue
        buf.append(ch)
    items.append("".join(buf))
    out = []
    for item in items:
        item = _BULLET.sub("", item).strip()
        if item:
            out.append(item)
    return out


def _is_nothing(item: str) -> bool:
    return item.strip().strip(".").casefold() in NOTHING or item.strip().casefold() in NOTHING


# -- key-values --------------------------------------------------------------------------------------------

_TEMPORAL = re.compile(r"\A(?:date|datetime|localdatetime|time|localtime|duration)\s*"
                       r"\(\s*(?P<q>['\"])(?P<v>.*)(?P=q)\s*\)\Z", re.IGNORECASE | re.DOTALL)
_QUALIFIED = re.compile(
    r"\A(?:\(\s*\w*\s*:\s*)?`?(?P<label>[^\W\d][\w ]*?)`?\s*\)?"       # Label, (:Label)
    r"\s*\.\s*`?(?P<prop>[^\W\d]\w*)`?\s*(?:==|=|:)\s*(?P<value>.+)\Z",  # .property = value
    re.DOTALL)
_PROPERTY_ONLY = re.compile(r"\A`?(?P<prop>[^\W\d]\w*)`?\s*(?:==|=|:)\s*(?P<value>.+)\Z", re.DOTALL)
_ELLIPSIS = re.compile(r"(?:\.\.\.|…)\Z")
_NUMBER = re.compile(r"[+-]?\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?")
_LINE_FORM = re.compile(r"\A\{?\s*label\s*[:=]\s*(?P<label>.+?)\s*,\s*property\s*[:=]\s*(?P<prop>.+?)\s*,\s*"
                        r"value\s*[:=]\s*(?P<value>.+?)\s*\}?\Z", re.IGNORECASE | re.DOTALL)


def _unquote_value(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] in _QUOTES and value[-1] == _QUOTES[value[0]]:
        return value[1:-1]
    return value


def normalize_value(value: Any) -> str:
    """The comparison form of a key-value's value (gold or extracted): quotes and temporal
    constructors removed, numbers as floats (``3000`` = ``3000.0`` = ``'3000'``), booleans as
    ``true``/``false``, other text case-folded with inner whitespace collapsed."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(float(value)) if math.isfinite(float(value)) else str(value).casefold()
    if value is None:
        return "null"
    if not isinstance(value, str):
        value = value.isoformat() if hasattr(value, "isoformat") else str(value)
    text = value.strip()
    m = _TEMPORAL.match(text)
    if m:
        text = m["v"]
    else:
        unquoted = _unquote_value(text)
        if unquoted != text:
            text = unquoted.replace("\\'", "'").replace('\\"', '"')
    text = text.strip()
    if _NUMBER.fullmatch(text):
        try:
            return repr(float(text.replace("_", "")))
        except ValueError:
            pass
    return " ".join(text.split()).casefold()


def parse_key_values(content: str | None) -> list[tuple[str | None, str | None, str]]:
    """(label, property, normalized value) items of a ``<key_value>`` content; label/property are
    case-folded or None. Duplicates removed, order kept."""
    if not content:
        return []
    out: list[tuple[str | None, str | None, str]] = []
    for line in content.splitlines():
        m = _LINE_FORM.match(_BULLET.sub("", line).strip())
        pieces = [line] if m else _split_items(line)
        for piece in pieces:
            piece = piece.strip()
            if not piece or _is_nothing(piece):
                continue
            label = prop = None
            value = piece
            inner = piece[1:-1].strip() if piece.startswith("{") and piece.endswith("}") else piece
            m = _LINE_FORM.match(inner) or _LINE_FORM.match(_BULLET.sub("", inner).strip())
            if m:
                label, prop, value = _unquote_value(m["label"]), _unquote_value(m["prop"]), m["value"]
            elif (m := _QUALIFIED.match(piece)) and not _TEMPORAL.match(piece):
                label, prop, value = m["label"].strip(), m["prop"], m["value"]
            elif (m := _PROPERTY_ONLY.match(piece)) and not _TEMPORAL.match(piece):
                prop, value = m["prop"], m["value"]
            value = _ELLIPSIS.sub("", value.strip()).strip()
            if not value or _is_nothing(value):
                continue
            item = (label.casefold() if label else None, prop.casefold() if prop else None, normalize_value(value))
            if item not in out:
                out.append(item)
    return out


def _gold_kv_items(gold: Iterable[Any]) -> list[tuple[str | None, str | None, str]]:
    items = []
    for kv in gold or []:
        if isinstance(kv, dict):
            if "value" in kv:
                value = kv["value"]
            elif "value_json" in kv:
                value = decode_json(kv["value_json"]) if isinstance(kv["value_json"], str) else kv["value_json"]
            else:
                raise InputError(f"gold key-value {kv!r} has neither 'value' nor 'value_json'")
            label, prop = kv.get("label"), kv.get("property")
        else:  # a bare value
            value, label, prop = kv, None, None
        item = (label.casefold() if label else None, prop.casefold() if prop else None, normalize_value(value))
        if item not in items:
            items.append(item)
    return items


def _kv_covers(item, gold) -> bool:
    label, prop, value = item
    glabel, gprop, gvalue = gold
    return (value == gvalue and (label is None or glabel is None or label == glabel)
            and (prop is None or gprop is None or prop == gprop))


# -- triples -----------------------------------------------------------------------------------------------

def _triple_chain(item: str) -> list[Triple]:
    """Triples of one ``<relationship>`` item (see the module docstring); [] when it does not parse."""
    tokens = tokenize(item)
    n = len(tokens)

    def name(i: int) -> str | None:
        if i >= n:
            return None
        return name_of(tokens[i])

    def node(i: int):
        if i < n and tokens[i].text == "(":
            j = i + 1
            labels: list[str] = []
            if name(j) and j + 1 < n and tokens[j + 1].text == ")":  # (Label)
                return [name(j)], j + 2
            if name(j) and j + 1 < n and tokens[j + 1].text == ":":  # (var:Label)
                j += 1
            while j < n and tokens[j].text in (":", "&", "|"):
                if name(j + 1) is None:
                    return None
                labels.append(name(j + 1))
                j += 2
            if j < n and tokens[j].text == "{":  # ignore a property map
                j = group_end(tokens, j + 1) + 1
            if labels and j < n and tokens[j].text == ")":
                return labels, j + 1
            return None
        if name(i):
            return [name(i)], i + 1
        return None

    def rel(i: int):
        j, left = i, False
        if j < n and tokens[j].text == "<":
            left, j = True, j + 1
        if not (j < n and tokens[j].text == "-"):
            return None
        j += 1
        if not (j < n and tokens[j].text == "["):
            return None
        j += 1
        if name(j) and j + 1 < n and tokens[j + 1].text == ":":  # [r:TYPE]
            j += 1
        types: list[str] = []
        while j < n and tokens[j].text != "]":
            tok = tokens[j]
            if tok.text in (":", "|"):
                j += 1
                continue
            if name(j) and not types or (name(j) and tokens[j - 1].text in ("|", ":")):
                types.append(name(j))
                j += 1
                continue
            j += 1  # *1..3, {props}, …: ignored
        if j >= n or not types:
            return None
        j += 1
        if not (j < n and tokens[j].text == "-"):
            return None
        j += 1
        right = j < n and tokens[j].text == ">"
        if right:
            j += 1
        direction = ">" if right and not left else "<" if left and not right else ""
        return types, direction, j

    first = node(0)
    if first is None:
        return []
    labels, j = first
    triples: list[Triple] = []
    while j < n:
        r = rel(j)
        if r is None:
            return []
        types, direction, j = r
        nxt = node(j)
        if nxt is None:
            return []
        blabels, j = nxt
        a, b = (blabels, labels) if direction == "<" else (labels, blabels)
        for x in a:
            for t in types:
                for y in b:
                    triple = Triple.make(x.casefold(), t.casefold(), y.casefold(), direction != "")
                    if triple not in triples:
                        triples.append(triple)
        labels = blabels
    return triples


def parse_triples(content: str | None) -> list[Triple]:
    """The distinct triples of a ``<relationship>`` content (labels and types case-folded)."""
    if not content:
        return []
    out: list[Triple] = []
    for item in _split_items(content):
        if _is_nothing(item):
            continue
        for triple in _triple_chain(item):
            if triple not in out:
                out.append(triple)
    return out


def _gold_triple_items(gold: Iterable[Any]) -> list[Triple]:
    out: list[Triple] = []
    for item in gold or []:
        if isinstance(item, Triple):
            t = item
        else:
            try:
                t = Triple.from_text(str(item))
            except ValueError:
                parsed = _triple_chain(str(item))
                if len(parsed) != 1:
                    raise InputError(f"gold triple {item!r} is not of the form '(:Src)-[:TYPE]->(:Dst)'") from None
                t = parsed[0]
        t = Triple.make(t.src.casefold(), t.type.casefold(), t.dst.casefold(), t.directed)
        if t not in out:
            out.append(t)
    return out


def _triple_covers(item: Triple, gold: Triple) -> bool:
    if item.type != gold.type:
        return False
    if item.directed and gold.directed:
        return (item.src, item.dst) == (gold.src, gold.dst)
    return {item.src, item.dst} == {gold.src, gold.dst}


# -- the superset rewards ------------------------------------------------------------------------------------

def superset_score(extracted: list, gold: list, covers: Callable[[Any, Any], bool], *, max_factor: float,
                   slack: int, empty_gold: str) -> float | None:
    """+1 / -1 (or None) for "extracted ⊇ gold" under the anti-gaming guard (module docstring)."""
    if not gold:
        if empty_gold == "pass":
            return 1.0
        if empty_gold == "skip":
            return None
        return 1.0 if not extracted else -1.0
    if len(extracted) > max_factor * len(gold) + slack:
        return -1.0
    return 1.0 if all(any(covers(e, g) for e in extracted) for g in gold) else -1.0


def _check_guard(max_factor: float, slack: int, empty_gold: str) -> None:
    if not (max_factor >= 1 and slack >= 0):
        raise InputError("max_factor must be >= 1 and slack >= 0")
    if empty_gold not in EMPTY_GOLD_MODES:
        raise InputError(f"empty_gold must be one of {EMPTY_GOLD_MODES}, got {empty_gold!r}")


def _golds(kwargs: dict, column: str, n: int, derive: Callable[[str], list]) -> list[list]:
    golds = _column(kwargs, column, n)
    cyphers = _column(kwargs, "gold_cypher", n)
    out = []
    for i in range(n):
        gold = golds[i] if golds is not None else None
        if gold is None:
            if cyphers is None or cyphers[i] is None:
                raise InputError(f"reward needs the dataset column {column!r} (or 'gold_cypher' to derive it from)")
            gold = derive(cyphers[i])
        out.append(list(gold))
    return out


class SupersetReward:
    """The base of the key-value and triple rewards: extracts the ``<tag>`` items of each completion,
    parses them and scores them against the row's gold items (``superset_score`` with this reward's
    guard settings). A callable class, as TRL's reward functions are, so that it pickles (to worker
    processes); ``__name__`` is the name TRL logs. Subclasses set the class attributes."""

    name: str        # what TRL logs
    tag: str         # the completion tag holding the items
    column: str      # the dataset column of the gold items

    def __init__(self, *, max_factor: float = 2.0, slack: int = 1, empty_gold: str = "exact"):
        _check_guard(max_factor, slack, empty_gold)
        self.max_factor, self.slack, self.empty_gold = max_factor, slack, empty_gold
        self.__name__ = self.__qualname__ = self.name

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(max_factor={self.max_factor!r}, slack={self.slack!r}, "
                f"empty_gold={self.empty_gold!r})")

    @staticmethod
    def parse(content: str | None) -> list:
        """The items of a tag's content."""
        raise NotImplementedError

    @staticmethod
    def derive(gold_cypher: str) -> list:
        """The gold items derived from a gold query (for rows without the gold column)."""
        raise NotImplementedError

    @staticmethod
    def gold_items(gold: Iterable[Any]) -> list:
        """The comparison form of a row's gold items."""
        raise NotImplementedError

    @staticmethod
    def covers(item: Any, gold: Any) -> bool:
        """Whether one extracted item covers one gold item."""
        raise NotImplementedError

    def __call__(self, prompts, completions, **kwargs) -> list[float | None]:
        texts = _texts(completions)
        golds = _golds(kwargs, self.column, len(texts), self.derive)
        return [superset_score(self.parse(extract_tag(text, self.tag)), self.gold_items(gold), self.covers,
                               max_factor=self.max_factor, slack=self.slack, empty_gold=self.empty_gold)
                for text, gold in zip(texts, golds)]


class KeyValueReward(SupersetReward):
    """+1 when the ``<key_value>`` items cover the gold key-values (guarded), else -1."""

    name, tag, column = "key_value_reward", "key_value", "gold_key_values"
    parse = staticmethod(parse_key_values)
    derive = staticmethod(gold_from_cypher.gold_key_values)
    gold_items = staticmethod(_gold_kv_items)
    covers = staticmethod(_kv_covers)


class TripleReward(SupersetReward):
    """+1 when the ``<relationship>`` triples cover the gold triples (guarded), else -1."""

    name, tag, column = "triple_reward", "relationship", "gold_triples"
    parse = staticmethod(parse_triples)
    derive = staticmethod(gold_from_cypher.gold_triples)
    gold_items = staticmethod(_gold_triple_items)
    covers = staticmethod(_triple_covers)


def make_key_value_reward(*, max_factor: float = 2.0, slack: int = 1, empty_gold: str = "exact") -> KeyValueReward:
    """A key-value reward with its own guard settings (see the module docstring); picklable."""
    return KeyValueReward(max_factor=max_factor, slack=slack, empty_gold=empty_gold)


def make_triple_reward(*, max_factor: float = 2.0, slack: int = 1, empty_gold: str = "exact") -> TripleReward:
    """A triple reward with its own guard settings (see the module docstring); picklable."""
    return TripleReward(max_factor=max_factor, slack=slack, empty_gold=empty_gold)


key_value_reward = make_key_value_reward()
triple_reward = make_triple_reward()
