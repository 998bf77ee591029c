"""First of the executor's three read-only guards: a lexical deny list over Cypher tokens.

The query is tokenized (string literals, comments and backtick-quoted names are recognised, so a
keyword inside them never counts), then refused if a clause keyword that writes or reaches outside
the graph appears as a keyword: CREATE, MERGE, SET, DELETE, DETACH, REMOVE, FOREACH, LOAD CSV,
``CALL { … } IN TRANSACTIONS``, administration commands (DROP, ALTER, GRANT, SHOW, TERMINATE, USE, …),
query prefixes (EXPLAIN, PROFILE, CYPHER options) and any procedure outside the read-only allow-list.
A word counts as a keyword unless it is a property key (after ``.``), a label or type (after ``:``),
a parameter (after ``$``) or a map key (before ``:``). The other two guards (EXPLAIN query type
``r`` and a rolled-back read transaction) live in the executor; this one exists to give a clear
refusal before the server is touched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Procedures a read-only agent may call: schema discovery only.
ALLOWED_PROCEDURES = ("db.labels", "db.relationshipTypes", "db.propertyKeys", "db.schema.visualization",
                      "db.schema.nodeTypeProperties", "db.schema.relTypeProperties", "dbms.components")
_ALLOWED_LOWER = frozenset(p.lower() for p in ALLOWED_PROCEDURES)

WRITE_KEYWORDS = frozenset({"CREATE", "MERGE", "SET", "DELETE", "DETACH", "REMOVE", "FOREACH"})
ADMIN_KEYWORDS = frozenset({"DROP", "ALTER", "GRANT", "DENY", "REVOKE", "RENAME", "SHOW", "TERMINATE",
                            "START", "STOP", "USE", "ENABLE", "DEALLOCATE", "REALLOCATE"})
PREFIX_KEYWORDS = frozenset({"EXPLAIN", "PROFILE", "CYPHER"})

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))
  | (?P<string>'(?:[^'\\]|\\.)*(?:'|\Z)|"(?:[^"\\]|\\.)*(?:"|\Z))
  | (?P<quoted>`(?:[^`]|``)*(?:`|\Z))
  | (?P<number>\d[\w.]*)
  | (?P<word>[^\W\d]\w*)
  | (?P<punct>.)
""", re.VERBOSE | re.DOTALL)


class GuardRefusal(ValueError):
    """The query is not a plain read; the message names the offending construct."""


@dataclass(frozen=True)
class Token:
    kind: str  # word | quoted | string | number | punct
    text: str


def tokenize(query: str) -> list[Token]:
    """Cypher tokens without whitespace and comments. Never raises: unknown characters are punct."""
    tokens = []
    for m in _TOKEN.finditer(query):
        kind = m.lastgroup
        if kind in ("space", "comment"):
            continue
        tokens.append(Token(kind, m.group()))
    return tokens


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
    """Raise GuardRefusal unless the query passes the lexical deny list."""
    tokens = tokenize(query)
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
