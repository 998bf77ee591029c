"""First of the executor's read-only guards: a lexical deny list over Cypher tokens, lexed as Neo4j does.

Neo4j 5.26 reads a query in two passes, and so does this guard:

1. ``\\uXXXX`` escapes are replaced **anywhere in the text** (not only inside strings) before lexing,
   exactly as Neo4j's ``UnicodeEscapeReplacementReader`` does: a backslash that is not itself escaped
   by a backslash, then ``u``, then up to four characters read by Java's ``Integer.parseInt(s, 16)``
   (so a sign, Unicode decimal digits and full-width hex letters count). ``// x\\u000aSHOW …`` thus
   ends the comment, and ``\\u0027`` closes a string. A malformed escape is a syntax error.
2. The escaped text is lexed with the rules of Neo4j's Cypher 5 lexer: a ``//`` comment ends at
   ``\\n`` or ``\\r`` only (U+2028, U+2029, U+0085, VT and FF do *not* end it — checked against the
   server); ``/* … */`` does not nest; strings in ``'`` or ``"`` take any character after a backslash;
   backtick names escape a backtick by doubling it; whitespace is Neo4j's own set (U+0085 is an
   identifier character there, not a space).

The query is refused if a clause keyword that writes or reaches outside the graph appears as a
keyword: CREATE, MERGE, SET, DELETE, DETACH, REMOVE, FOREACH, LOAD CSV, ``CALL { … } IN TRANSACTIONS``,
administration commands (DROP, ALTER, GRANT, SHOW, TERMINATE, USE, …), query prefixes (EXPLAIN,
PROFILE, CYPHER options) and any procedure outside the read-only allow-list. A word counts as a
keyword unless it is a property key (after ``.``), a label or type (after ``:``), a parameter (after
``$``) or a map key (before ``:``). The executor adds guards that do not depend on this lexer (the
EXPLAIN plan's query type and operators, a rolled-back read transaction); this one gives a clear
refusal before the server is touched.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from graphs.errors import CypherTurnError

# Procedures a read-only agent may call: schema discovery only.
ALLOWED_PROCEDURES = ("db.labels", "db.relationshipTypes", "db.propertyKeys", "db.schema.visualization",
                      "db.schema.nodeTypeProperties", "db.schema.relTypeProperties", "dbms.components")
_ALLOWED_LOWER = frozenset(p.lower() for p in ALLOWED_PROCEDURES)

WRITE_KEYWORDS = frozenset({"CREATE", "MERGE", "SET", "DELETE", "DETACH", "REMOVE", "FOREACH"})
ADMIN_KEYWORDS = frozenset({"DROP", "ALTER", "GRANT", "DENY", "REVOKE", "RENAME", "SHOW", "TERMINATE",
                            "START", "STOP", "USE", "ENABLE", "DEALLOCATE", "REALLOCATE"})
PREFIX_KEYWORDS = frozenset({"EXPLAIN", "PROFILE", "CYPHER"})
MAX_NESTING = 200  # brackets; generated and hand-written queries stay far below

# Neo4j's SPACE token (Cypher 5 lexer); Python's \s differs (it has U+0085, which Neo4j lexes as a letter).
SPACE_CHARS = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
               "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
# Characters that continue an identifier in Neo4j but are not \w in Python.
_PART_EXTRA = r"$\x00-\x08\x0e-\x1b\x7f-\x9f\u00ad\u0300-\u036f"

_TOKEN = re.compile(rf"""
    (?P<space>[{re.escape(SPACE_CHARS)}]+)
  | (?P<comment>//[^\r\n]*|/\*.*?(?:\*/|\Z))
  | (?P<string>'(?:[^'\\]|\\.)*(?:'|\Z)|"(?:[^"\\]|\\.)*(?:"|\Z))
  | (?P<quoted>`(?:[^`]|``)*(?:`|\Z))
  | (?P<number>\d(?:_?\d)*(?:\.\d(?:_?\d)*)?(?:[eE][+-]?(?:_?\d)+)?[\w{_PART_EXTRA}]*)
  | (?P<word>[^\W\d][\w{_PART_EXTRA}]*)
  | (?P<punct>.)
""", re.VERBOSE | re.DOTALL)


class GuardRefusal(CypherTurnError, ValueError):
    """The query is not a plain read; the message names the offending construct."""


class InvalidEscape(CypherTurnError, ValueError):
    """A ``\\u`` escape Neo4j cannot read (Neo4j answers a syntax error); the message says where."""


@dataclass(frozen=True)
class Token:
    kind: str  # word | quoted | string | number | punct
    text: str


_FULLWIDTH_HEX = {**{chr(0xFF21 + i): 10 + i for i in range(6)}, **{chr(0xFF41 + i): 10 + i for i in range(6)}}


def _hex_digit(ch: str) -> int:
    """Java's Character.digit(ch, 16): ASCII and full-width hex letters, any Unicode decimal digit."""
    if ch in "abcdefABCDEF":
        return int(ch, 16)
    if ch in _FULLWIDTH_HEX:
        return _FULLWIDTH_HEX[ch]
    return unicodedata.decimal(ch, -1)


def _java_parse_hex(text: str) -> int | None:
    """Java's Integer.parseInt(text, 16), or None where it throws."""
    sign, digits = 1, text
    if len(text) > 1 and text[0] in "+-":
        sign, digits = (-1 if text[0] == "-" else 1), text[1:]
    if not digits:
        return None
    value = 0
    for ch in digits:
        d = _hex_digit(ch)
        if d < 0:
            return None
        value = value * 16 + d
    return sign * value


def unescape(query: str) -> str:
    """The text Neo4j lexes: every unescaped ``\\uXXXX`` replaced (see the module docstring).

    Raises InvalidEscape where Neo4j would refuse the escape."""
    if "\\u" not in query:
        return query
    out: list[str] = []
    escaped = False  # the previous character was a literal (not unicode-escaped) unescaped backslash
    i, n = 0, len(query)
    while i < n:
        ch = query[i]
        if not escaped and ch == "\\" and i + 1 < n and query[i + 1] == "u":
            value = _java_parse_hex(query[i + 2:i + 6])
            if value is None:
                raise InvalidEscape(f"invalid unicode escape {query[i:i + 6]} at offset {i}: expected four "
                                    "hexadecimal digits")
            out.append(chr(value & 0xFFFF))
            escaped = False
            i += 6
            continue
        out.append(ch)
        escaped = not escaped and ch == "\\"
        i += 1
    return "".join(out)


def tokenize(query: str) -> list[Token]:
    """Cypher tokens of already unescaped text, without whitespace and comments. Never raises:
    unknown characters are punct; an unterminated string, name or comment runs to the end."""
    tokens = []
    for m in _TOKEN.finditer(query):
        kind = m.lastgroup
        if kind in ("space", "comment"):
            continue
        tokens.append(Token(kind, m.group()))
    return tokens


def live_words(query: str) -> list[str]:
    """The words of ``query`` that the guard treats as live code (upper-cased; escapes applied)."""
    tokens = tokenize(unescape(query))
    return [t.text.upper() for i, t in enumerate(tokens) if _is_keyword(tokens, i)]


def _is_keyword(tokens: list[Token], i: int) -> bool:
    if tokens[i].kind != "word":
        return False
    prev = tokens[i - 1].text if i > 0 else ""
    nxt = tokens[i + 1].text if i + 1 < len(tokens) else ""
    return prev not in (".", ":", "$") and nxt != ":"


def _procedure_name(tokens: list[Token], i: int) -> str | None:
    """The dotted name after CALL at i, or None when CALL opens a subquery."""
    parts = []
    j = i + 1
    while j < len(tokens) and tokens[j].kind in ("word", "quoted"):
        parts.append(tokens[j].text.strip("`"))
        if j + 1 < len(tokens) and tokens[j + 1].text == ".":
            j += 2
            continue
        break
    return ".".join(parts) if parts else None


def check_read_only(query: str) -> None:
    """Raise GuardRefusal unless the query passes the lexical deny list (InvalidEscape for an escape
    Neo4j cannot read)."""
    tokens = tokenize(unescape(query))
    for i, tok in enumerate(tokens):
        if not _is_keyword(tokens, i):
            continue
        word = tok.text.upper()
        if word in WRITE_KEYWORDS:
            raise GuardRefusal(f"write clause {word} is not allowed: queries must only read the graph")
        if word == "LOAD" and i + 1 < len(tokens) and tokens[i + 1].text.upper() == "CSV":
            raise GuardRefusal("LOAD CSV is not allowed: queries may not read files or URLs")
        if word == "IN" and i + 1 < len(tokens) and tokens[i + 1].text.upper() in ("TRANSACTIONS", "CONCURRENT"):
            raise GuardRefusal("CALL { ... } IN TRANSACTIONS is not allowed")
        if word in ADMIN_KEYWORDS and i == 0:
            raise GuardRefusal(f"administration command {word} is not allowed")
        if word in PREFIX_KEYWORDS and i == 0:
            raise GuardRefusal(f"query prefix {word} is not accepted: send the plain query")
        if word == "CALL":
            name = _procedure_name(tokens, i)
            if name is not None and name.lower() not in _ALLOWED_LOWER:
                allowed = ", ".join(ALLOWED_PROCEDURES)
                raise GuardRefusal(f"procedure {name} is not allowed; allowed procedures: {allowed}")
    if any(t.text == ";" for t in tokens[:-1]):
        raise GuardRefusal("only one statement per query is allowed")
    depth = deepest = 0
    for t in tokens:  # Neo4j's parser and planner take minutes over thousands of nested brackets
        if t.kind == "punct" and t.text in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif t.kind == "punct" and t.text in ")]}":
            depth -= 1
    if deepest > MAX_NESTING:
        raise GuardRefusal(f"the query nests brackets {deepest} deep; the limit is {MAX_NESTING}")
