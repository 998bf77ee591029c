"""The lexical deny list, the first of the executor's three read-only guards (no database needed)."""

from __future__ import annotations

import pytest

from graphs.cypher_guard import GuardRefusal, check_read_only
from graphs.cypher_syntax import tokenize

READS = [
    "MATCH (n:Emperor) RETURN n.name",
    "MATCH (n:Set {create: 1}) WHERE n.delete = 'CREATE (x)' RETURN n.set",
    "MATCH (n) // DELETE n\nRETURN count(n)",
    "MATCH (n) /* SET n.x = 1 */ RETURN n",
    "MATCH (n) WHERE n.name = \"MERGE\" RETURN n",
    "MATCH (`create`) RETURN 1",
    "CALL db.labels() YIELD label RETURN label",
    "CALL db.schema.nodeTypeProperties()",
    "MATCH (n) CALL { WITH n MATCH (n)--(m) RETURN count(m) AS c } RETURN n.name, c",
    "MATCH (n) RETURN n.name;",
    "WITH $set AS s RETURN s",
    "MATCH (n) WHERE n:Remove RETURN n",
]

WRITES = [
    ("CREATE (n:X)", "CREATE"),
    ("match (n) set n.x = 1", "SET"),
    ("MERGE (n:X {a: 1})", "MERGE"),
    ("MATCH (n) DELETE n", "DELETE"),
    ("MATCH (n) DETACH DELETE n", "DETACH"),
    ("MATCH (n) REMOVE n.name", "REMOVE"),
    ("MATCH (n) FOREACH (x IN [1] | SET n.a = x)", "FOREACH"),
    ("LOAD CSV FROM 'file:///etc/passwd' AS line RETURN line", "LOAD CSV"),
    ("MATCH (n) CALL { WITH n RETURN n.name AS x } IN TRANSACTIONS RETURN x", "IN TRANSACTIONS"),
    ("CALL dbms.listConfig()", "dbms.listConfig"),
    ("CALL `dbms`.`listConfig`()", "dbms.listConfig"),
    ("CALL apoc.load.json('file:///etc/hosts')", "apoc.load.json"),
    ("CALL db.createLabel('X')", "db.createLabel"),
    ("SHOW DATABASES", "SHOW"),
    ("DROP CONSTRAINT c", "DROP"),
    ("CREATE INDEX FOR (n:X) ON (n.a)", "CREATE"),
    ("EXPLAIN MATCH (n) RETURN n", "EXPLAIN"),
    ("PROFILE MATCH (n) RETURN n", "PROFILE"),
    ("MATCH (n) RETURN n; MATCH (m) DETACH DELETE m", "DETACH"),
    ("MATCH (n) RETURN n; MATCH (m) RETURN m", "one statement"),
]


@pytest.mark.parametrize("query", READS)
def test_reads_pass(query):
    check_read_only(query)


@pytest.mark.parametrize("query, what", WRITES)
def test_writes_and_host_access_are_refused_by_name(query, what):
    with pytest.raises(GuardRefusal, match=what):
        check_read_only(query)


def test_tokenizer_never_raises_on_unterminated_input():
    for text in ["'abc", '"abc', "`abc", "/* open", "MATCH (n", "\\", "\x00", "é ∑ 🙂"]:
        tokenize(text)
        try:
            check_read_only(text)
        except GuardRefusal:
            pass
