"""The guard's lexer against Neo4j itself: random mixtures of comments, strings, escapes, backticks,
\\u escapes and line terminators, each hiding or exposing numbered markers ``, 1 AS k7``. Neo4j's view
of which markers are live code is the column list of ``EXPLAIN`` of the query; the guard's view is
``live_words``. They must agree on every query Neo4j accepts. The seed is LEXER_FUZZ_SEED (default
0) and the number of cases LEXER_FUZZ_CASES (default 2500)."""

from __future__ import annotations

import os
import random
import re
from concurrent.futures import ThreadPoolExecutor

import neo4j
import pytest

from graphs import connections
from graphs.cypher_guard import live_words
from graphs.cypher_syntax import InvalidEscape

pytestmark = pytest.mark.neo4j

SEED = int(os.environ.get("LEXER_FUZZ_SEED", "0"))
CASES = int(os.environ.get("LEXER_FUZZ_CASES", "2500"))
MARKER = re.compile(r"^[ks]\d+$", re.I)

TERMINATORS = ["\n", "\r", "\r\n", "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\\u000a", "\\u000d",
               "\\u2028", ""]
# pieces of text that may close, open or escape something depending on where they land
PIECES = ["a", " ", "//", "/*", "*/", "*\\u002f", "'", '"', "`", "``", "\\", "\\\\", "\\'", '\\"', "\\u0027",
          "\\u0022", "\\u0060", "\\\\u0027", "\\u005cu0027", "\\u000a", "\\u000d", "\r", "\n", "\u2028", "\x85",
          "\t", "\u00a0", "é", "SHOW"]
SPACES = [" ", "\t", "\n", "\r", "\u00a0", "\u2028", "\u2029", "\u3000", "\x0b", "\x0c", "\x1f"]


def _case(rng: random.Random) -> str:
    n = 0

    def marker() -> str:
        nonlocal n
        n += 1
        return f", 1 AS k{n}"

    def content() -> str:
        return "".join(rng.choice(PIECES + [marker()]) for _ in range(rng.randint(0, 6)))

    parts = ["RETURN 1 AS k0"]
    for _ in range(rng.randint(1, 6)):
        kind = rng.randrange(6)
        if kind == 0:
            parts.append(marker())
        elif kind == 1:
            parts.append("//" + content() + rng.choice(TERMINATORS))
        elif kind == 2:
            parts.append("/*" + content() + rng.choice(["*/", "*\\u002f", "\\u002a/", "*/"]))
        elif kind == 3:
            n += 1
            quote = rng.choice(["'", '"', "\\u0027"])
            parts.append(f", {quote}{content()}{rng.choice([quote, chr(39), chr(34)])} AS s{n}")
        elif kind == 4:
            parts.append(", 1 AS `" + content().replace("`", rng.choice(["``", "`"])) + "`")
        else:
            parts.append(rng.choice(SPACES))
        parts.append(rng.choice(SPACES + [""]))
    return "".join(parts)


def _neo4j_markers(drv, query: str) -> set[str] | None:
    try:
        with drv.session() as s:
            result = s.run("EXPLAIN " + query)
            keys = result.keys()
            result.consume()
    except neo4j.exceptions.Neo4jError:
        return None  # Neo4j refuses the text: nothing runs, nothing to compare
    return {k.lower() for k in keys if MARKER.match(k)}


def _guard_markers(query: str) -> set[str] | None:
    try:
        return {w.lower() for w in live_words(query) if MARKER.match(w)}
    except InvalidEscape:
        return None


def test_the_guard_sees_live_code_exactly_where_neo4j_parses_it():
    rng = random.Random(SEED)
    queries = [_case(rng) for _ in range(CASES)]
    drv = connections.driver(connections.resolve("ancient_empire"))
    with ThreadPoolExecutor(max_workers=6) as pool:
        server_views = list(pool.map(lambda q: _neo4j_markers(drv, q), queries))
    compared = 0
    mismatches = []
    for query, server_view in zip(queries, server_views):
        guard_view = _guard_markers(query)
        if server_view is None:
            continue
        compared += 1
        if guard_view != server_view:
            mismatches.append((query, sorted(server_view), sorted(guard_view or [])))
    assert not mismatches, mismatches[:5]
    assert compared >= CASES // 4  # enough of the random texts are valid Cypher to mean something
