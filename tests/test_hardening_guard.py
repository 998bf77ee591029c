"""Issue 14, security: the guard bypasses (a comment ended by a line terminator or a \\u escape the old
lexer did not see) are refused through `python -m graphs query` and through `env.step`; the plan guard
refuses them on its own; the lexer's view of comments and escapes matches what Neo4j 5.26 parses."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmark.session import Session, Turn
from cypherturn.lru import LRUCache
from graphs import executor as executor_module
from graphs.cypher_guard import check_read_only, live_words
from graphs.cypher_syntax import InvalidEscape, unescape
from graphs.executor import SafeExecutor, plan_refusal

WORLD = "ancient_empire"

# Each read-only-planned statement the issue ran from model-written Cypher, hidden behind a comment.
STATEMENTS = [
    ("SHOW TRANSACTIONS YIELD currentQuery RETURN currentQuery", "ShowTransactions"),
    ("TERMINATE TRANSACTIONS 'neo4j-transaction-1'", "TerminateTransactions"),
    ("LOAD CSV FROM 'http://127.0.0.1:9/x.csv' AS row RETURN row", "LoadCSV"),
    ("SHOW SETTINGS YIELD name RETURN name", "ShowSettings"),
    ("SHOW PROCEDURES YIELD name RETURN name", "ShowProcedures"),
]
HIDERS = ["// x\r", "// x\r\n", "// x\n", "// x\\u000a", "// x\\u000d", "/* x *\\u002f ", "\\u000a"]
ATTACKS = [h + s for h in HIDERS for s, _ in STATEMENTS]


@pytest.mark.parametrize("query", ATTACKS)
def test_the_lexer_sees_every_hidden_statement(query):
    with pytest.raises(Exception) as info:
        check_read_only(query)
    assert "not allowed" in str(info.value)


# What Neo4j 5.26 parses (asked of the server, see test_lexer_fuzz.py): a // comment ends at \n and \r
# only; U+2028, U+2029, U+0085, VT, FF and FS stay inside it.
@pytest.mark.parametrize("terminator, ends", [("\n", True), ("\r", True), ("\r\n", True), ("\u2028", False),
                                               ("\u2029", False), ("\x85", False), ("\x0b", False),
                                               ("\x0c", False), ("\x1c", False)])
def test_line_comment_ends_exactly_where_neo4j_ends_it(terminator, ends):
    words = live_words(f"RETURN 1 AS a // x{terminator} SHOW")
    assert ("SHOW" in words) is ends


@pytest.mark.neo4j
def test_neo4j_itself_ends_line_comments_where_the_guard_does():
    from graphs import connections

    drv = connections.driver(connections.resolve(WORLD))
    for terminator in ["\n", "\r", "\r\n", "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\\u000a",
                       "\\u000d", "\\u2028"]:
        query = f"RETURN 1 AS a // x{terminator}, 2 AS b"
        with drv.session() as s:
            result = s.run("EXPLAIN " + query)
            ended = result.keys() == ["a", "b"]
            result.consume()
        assert ended == ("B" in live_words(query)), repr(terminator)


def test_unicode_escapes_are_applied_as_neo4j_applies_them():
    assert unescape("RETURN 1 AS \\u0061") == "RETURN 1 AS a"
    assert unescape("RETURN '\\\\u0027'") == "RETURN '\\\\u0027'"  # an escaped backslash starts no escape
    assert unescape("\\u005cu0027") == "\\u0027"  # an escaped-in backslash does not escape the next one
    assert unescape("x\\u+061") == "xa" and unescape("x\\u61") == "xa"  # Java's parseInt: a sign, short tail
    assert unescape("x\\u\uff10\uff10\uff16\uff11") == "xa"  # full-width digits count
    with pytest.raises(InvalidEscape):
        unescape("RETURN 1 AS \\uZZZZ")
    assert live_words("RETURN 1 AS a \\u0055NION RETURN 2 AS a") == ["RETURN", "AS", "A", "UNION", "RETURN", "AS", "A"]


@pytest.mark.neo4j
def test_attacks_are_refused_through_the_query_cli():
    for query in [HIDERS[0] + STATEMENTS[0][0], HIDERS[3] + STATEMENTS[1][0], HIDERS[0] + STATEMENTS[2][0]]:
        out = subprocess.run([sys.executable, "-m", "graphs", "query", WORLD, query, "--json"],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 1, out.stderr
        error = json.loads(out.stdout)["error"]
        assert error["kind"] == "refused" and "not allowed" in error["message"], (query, error)


@pytest.mark.neo4j
def test_attacks_are_refused_through_env_step():
    from envs.env import CypherTurnEnv, EnvConfig

    turn = Turn(index=0, utterance="How many deities are there?", gold_cypher="MATCH (d:Deity) RETURN count(d) AS n",
                gold_columns=["n"], gold_rows=[[0]], phenomenon="OPENING", chain_mode="none", depends_on=None)
    env = CypherTurnEnv(config=EnvConfig(protocol="agentic", budget_multiplier=len(ATTACKS) + 1, timeout=5.0),
                        sessions=[Session(id="h", world=WORLD, persona="journalist", turns=[turn])])
    env.reset(options={"session_id": "h"})
    for query in ATTACKS:
        obs, _, done, _, info = env.step(f"EXECUTE_CYPHER {query}")
        assert not done
        assert "refused" in obs.lower() and "not allowed" in obs, (query, obs)


@pytest.mark.neo4j
@pytest.mark.parametrize("statement, operator", STATEMENTS)
def test_the_plan_guard_refuses_each_statement_without_the_lexer(monkeypatch, statement, operator):
    monkeypatch.setattr(executor_module, "check_read_only", lambda q: None)
    monkeypatch.setattr(SafeExecutor, "_checked", LRUCache(0))  # no lexer verdict cached by earlier tests
    r = SafeExecutor(WORLD, timeout=5.0).run(statement)
    assert r.error is not None and r.error.kind == "refused", r.error
    assert operator in r.error.message


@pytest.mark.neo4j
def test_the_plan_guard_allows_schema_procedures_and_refuses_others(monkeypatch):
    monkeypatch.setattr(executor_module, "check_read_only", lambda q: None)
    monkeypatch.setattr(SafeExecutor, "_checked", LRUCache(0))  # no lexer verdict cached by earlier tests
    ex = SafeExecutor(WORLD, timeout=5.0)
    ok = ex.run("CALL db.labels() YIELD label RETURN label ORDER BY label")
    assert ok.error is None and ["Emperor"] in ok.rows
    r = ex.run("CALL dbms.listConfig() YIELD name RETURN name")
    assert r.error is not None and r.error.kind == "refused" and "dbms.listConfig" in r.error.message


def test_plan_refusal_reads_operator_names():
    read = {"operatorType": "ProduceResults@neo4j", "children": [
        {"operatorType": "VarLengthExpand(Pruning,BFS,All)@neo4j", "children": [
            {"operatorType": "NodeUniqueIndexSeek@neo4j"}]}]}
    assert plan_refusal(read) is None
    show = {"operatorType": "ProduceResults@neo4j", "children": [{"operatorType": "ShowTransactions@neo4j"}]}
    assert "ShowTransactions" in plan_refusal(show)
    assert "Create" in plan_refusal({"operatorType": "Create@neo4j"})
