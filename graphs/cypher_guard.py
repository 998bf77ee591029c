"""First of the executor's read-only guards: a lexical deny list over Cypher tokens, lexed as Neo4j does.

The text is read as Neo4j 5.26 reads it, by the toolkit's lexer (``graphs.cypher_syntax``): ``\\uXXXX``
escapes replaced anywhere in the text first (``unescape``; a malformed one is ``InvalidEscape``, as it is
a syntax error in Neo4j), then Neo4j's Cypher 5 lexical rules (``tokenize``; the details are in that
module's docstring).

The query is refused if a clause keyword that writes or reaches outside the graph appears as a
keyword (the toolkit's keyword rule, ``is_keyword``): CREATE, MERGE, SET, DELETE, DETACH, REMOVE,
FOREACH, LOAD CSV, ``CALL { … } IN TRANSACTIONS``, administration commands (DROP, ALTER, GRANT, SHOW,
TERMINATE, USE, …), query prefixes (EXPLAIN, PROFILE, CYPHER options) and any procedure outside the
read-only allow-list. A word counts as a keyword unless it is a property key (after ``.``), a label or
type (after ``:``), a parameter (after ``$``) or a map key (before ``:``). The executor adds guards that
do not depend on this lexer (the EXPLAIN plan's query type and operators, a read-access transaction);
this one gives a clear refusal before the server is touched.
"""

from __future__ import annotations

from graphs.cypher_syntax import (ADMIN_KEYWORDS, PREFIX_KEYWORDS, WRITE_KEYWORDS, Token, is_keyword, nesting_depth,
                                  tokenize, unescape)
from cypherturn.errors import CypherTurnError

# Procedures a read-only agent may call: schema discovery only.
ALLOWED_PROCEDURES = ("db.labels", "db.relationshipTypes", "db.propertyKeys", "db.schema.visualization",
                      "db.schema.nodeTypeProperties", "db.schema.relTypeProperties", "dbms.components")
_ALLOWED_LOWER = frozenset(p.lower() for p in ALLOWED_PROCEDURES)

MAX_NESTING = 200  # brackets; generated and hand-written queries stay far below


class GuardRefusal(CypherTurnError, ValueError):
    """The query is not a plain read; the message names the offending construct."""


def live_words(query: str) -> list[str]:
    """The words of ``query`` that the guard treats as live code (upper-cased; escapes applied)."""
    tokens = tokenize(unescape(query))
    return [t.text.upper() for i, t in enumerate(tokens) if is_keyword(tokens, i)]


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
        if not is_keyword(tokens, i):
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
    deepest = nesting_depth(tokens)  # Neo4j's parser and planner take minutes over thousands of nested brackets
    if deepest > MAX_NESTING:
        raise GuardRefusal(f"the query nests brackets {deepest} deep; the limit is {MAX_NESTING}")
