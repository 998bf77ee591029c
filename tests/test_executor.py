"""The safe executor against the real Neo4j: results, caps, error kinds and the read-only guarantee."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from cypherturn.lru import LRUCache
from graphs import connections
from graphs.executor import ERROR_KINDS, ExecutorLimits, SafeExecutor, execute
from graphs.generator import generate
from graphs.loader import read_summary
from graphs.spec import get_spec

pytestmark = pytest.mark.neo4j

WORLD = "ancient_empire"
TIMEOUT = 4.0

# (query, expected error kind). Each must come back as that kind within the timeout (+ slack).
ADVERSARIAL = [
    ("CREATE (n:Intruder {x: 1}) RETURN n", "refused"),
    ("MATCH (n:Emperor) SET n.treasury = 0", "refused"),
    ("MATCH (n:Emperor) WITH n LIMIT 1 MERGE (n)-[:OWNS]->(:Gold)", "refused"),
    ("MATCH (n) DETACH DELETE n", "refused"),
    ("MATCH (n:Emperor) DELETE n", "refused"),
    ("MATCH (n:Emperor) REMOVE n.name", "refused"),
    ("MATCH (n:Emperor) FOREACH (x IN [1] | SET n.deified = true)", "refused"),
    ("LOAD CSV FROM 'file:///etc/passwd' AS line RETURN line", "refused"),
    ("LOAD CSV FROM 'http://127.0.0.1:1/x.csv' AS line RETURN line", "refused"),
    ("MATCH (n) CALL { WITH n DETACH DELETE n } IN TRANSACTIONS", "refused"),
    ("CALL dbms.listConfig() YIELD name, value RETURN name, value", "refused"),
    ("CALL db.createLabel('Intruder')", "refused"),
    ("CALL apoc.load.json('file:///etc/hosts')", "refused"),
    ("CREATE INDEX hack FOR (n:Emperor) ON (n.epithet)", "refused"),
    ("SHOW TRANSACTIONS", "refused"),
    ("MATCH (a), (b), (c) WHERE a.name < b.name AND b.name < c.name RETURN count(*)", "timeout"),
    ("UNWIND range(1, 50000000) AS x RETURN collect(x)", "memory"),
    ("RETURN range(1, 300000) AS xs", "too_large"),
    # ~900 MB on the wire: the server cannot send it within the limit (timeout), or fails to (too_large)
    ("RETURN range(1, 100000000) AS xs", {"timeout", "too_large"}),
    ("RETURN '" + "x" * 1_000_000 + "'", "too_large"),
    ("RETURN '\ud800' AS broken", "syntax"),
    ("MATCH (n RETURN n", "syntax"),
    ("", "syntax"),
    ("RETURN 1/0", "runtime"),
]


def _db_checksums():
    return {w: read_summary(connections.resolve(w)).checksum for w in (WORLD, "merchant_harbor")}


def test_a_plain_read_returns_columns_rows_and_timing():
    r = execute(WORLD, "MATCH (e:Emperor)-[g:GOVERNS]->(p:Province) "
                       "RETURN e.name AS emperor, count(p) AS provinces ORDER BY provinces DESC, emperor LIMIT 5")
    assert r.error is None
    assert r.columns == ["emperor", "provinces"]
    assert len(r.rows) == 5 and all(isinstance(row[1], int) for row in r.rows)
    assert [row[1] for row in r.rows] == sorted((row[1] for row in r.rows), reverse=True)
    assert r.elapsed_ms > 0 and r.truncated is False


def test_rows_match_the_generated_graph():
    graph = generate(get_spec(WORLD))
    r = execute(WORLD, "MATCH (e:Emperor) RETURN e.name ORDER BY e.name", max_rows=10_000)
    assert [row[0] for row in r.rows] == sorted(row["name"] for row in graph.nodes["Emperor"])


def test_row_cap_fetches_max_plus_one_and_flags_truncation():
    n = len(generate(get_spec(WORLD)).nodes["City"])
    r = execute(WORLD, "MATCH (c:City) RETURN c.name", max_rows=20)
    assert len(r.rows) == 20 and r.truncated is True
    r = execute(WORLD, "MATCH (c:City) RETURN c.name", max_rows=n)
    assert len(r.rows) == n and r.truncated is False


def test_values_are_normalized_to_json():
    r = execute(WORLD, "MATCH p = (e:Emperor)-[g:GOVERNS]->(pr:Province) "
                       "RETURN e, g, p, date('2020-02-29') AS d, 0.0/0.0 AS nan, [1, 2.5, 'a'] AS l, "
                       "{k: 1} AS m, duration('P1DT2H') AS dur LIMIT 1")
    assert r.error is None
    e, g, p, d, nan, lst, m, dur = r.rows[0]
    assert e["~node"]["labels"] == ["Emperor"] and "name" in e["~node"]["properties"]
    assert g["~relationship"]["type"] == "GOVERNS" and "tribute" in g["~relationship"]["properties"]
    assert [next(iter(x)) for x in p["~path"]] == ["~node", "~relationship", "~node"]
    assert (d, nan, lst, m, dur) == ("2020-02-29", "NaN", [1, 2.5, "a"], {"k": 1}, "P1DT2H")
    json.dumps(r.to_dict(), allow_nan=False)


def test_adversarial_queries_get_bounded_errors_of_the_right_kind_and_change_nothing():
    before = _db_checksums()
    ex = SafeExecutor(WORLD, timeout=TIMEOUT, max_rows=100)
    for query, kind in ADVERSARIAL:
        t0 = time.perf_counter()
        r = ex.run(query)
        wall = time.perf_counter() - t0
        assert r.error is not None, query[:80]
        assert r.error.kind in ERROR_KINDS
        assert r.error.kind in ({kind} if isinstance(kind, str) else kind), (query[:80], r.error)
        assert r.error.message
        assert wall < TIMEOUT + 1.5, (query[:80], wall)
    assert _db_checksums() == before
    assert execute(WORLD, "RETURN 1 AS one").rows == [[1]]  # the server still answers


def test_each_guard_refuses_a_write_on_its_own(monkeypatch):
    from graphs import executor as executor_module

    # Guard 2 alone: with the lexical deny list switched off, the EXPLAIN plan (operator Create) refuses it.
    monkeypatch.setattr(executor_module, "check_read_only", lambda q: None)
    monkeypatch.setattr(SafeExecutor, "_checked", LRUCache(0))  # no lexer verdict cached by earlier tests
    ex = SafeExecutor(WORLD)
    r = ex.run("CREATE (n:Intruder) RETURN n")
    assert r.error is not None and r.error.kind == "refused" and "operator Create" in r.error.message
    # Guard 3 alone: also tell the plan-verdict cache the write is a read; the READ transaction refuses it.
    query = "CREATE (n:Intruder {guard: 3}) RETURN n"
    SafeExecutor._verdicts.put((ex.target.uri, ex.target.database, query), "")
    r = ex.run(query)
    assert r.error is not None and r.error.kind == "refused", r.error
    monkeypatch.undo()
    assert execute(WORLD, "MATCH (n:Intruder) RETURN count(n)").rows == [[0]]


def test_query_cli_prints_the_structured_result():
    out = subprocess.run([sys.executable, "-m", "graphs", "query", WORLD, "MATCH (d:Deity) RETURN count(d) AS n",
                          "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    assert set(payload) == {"columns", "rows", "truncated", "elapsed_ms", "error"}
    assert payload["rows"] == [[len(generate(get_spec(WORLD)).nodes["Deity"])]]
    out = subprocess.run([sys.executable, "-m", "graphs", "query", WORLD, "MATCH (n) DETACH DELETE n", "--json",
                          "--timeout", "5", "--max-rows", "3"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert json.loads(out.stdout)["error"]["kind"] == "refused"


def test_unknown_world_is_a_clear_error():
    out = subprocess.run([sys.executable, "-m", "graphs", "query", "atlantis", "RETURN 1", "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "unknown world 'atlantis'" in out.stderr


def test_input_checks_are_cached_by_text_and_give_the_same_results():
    SafeExecutor._checked.clear()
    ex = SafeExecutor(WORLD, timeout=TIMEOUT, max_rows=10)
    queries = ["RETURN 1 AS one;", "MATCH (n) DETACH DELETE n", "RETURN 'unclosed", "  ;  ",
               "RETURN 1 AS one // MATCH (n) DELETE n\rMATCH (n) DELETE n"]
    first = [ex.run(q) for q in queries]
    hits = SafeExecutor._checked.hits
    second = [ex.run(q) for q in queries]
    assert SafeExecutor._checked.hits == hits + len(queries)
    assert [(r.rows, r.error) for r in first] == [(r.rows, r.error) for r in second]
    assert first[0].rows == [[1]] and [r.error.kind for r in first[1:]] == ["refused", "syntax", "syntax", "refused"]
    # the length limit is the executor's own, checked before the cache
    assert SafeExecutor(WORLD, max_query_chars=5).run(queries[0]).error.kind == "too_large"
    # a long text is checked every time and not kept
    size = len(SafeExecutor._checked)
    long_write = "MATCH (n) DELETE n /*" + "x" * 5000 + "*/"
    assert ex.run(long_write).error.kind == "refused" and len(SafeExecutor._checked) == size


def test_a_compile_error_is_cached_like_a_plan_verdict_and_reads_the_same():
    ex = SafeExecutor(WORLD, timeout=TIMEOUT)
    # passes the lexical guard; Neo4j's EXPLAIN refuses it (m is not defined); unique, so not cached before
    query = f"MATCH (n:Deity) RETURN m.name AS name, '{time.time_ns()}' AS tag"
    key = (ex.target.uri, ex.target.database, query)
    first = ex.run(query)
    assert first.error is not None and first.error.kind == "syntax" and "`m`" in first.error.message
    assert "column 24" in first.error.message  # the position points into the query, not into "EXPLAIN ..."
    hits = SafeExecutor._verdicts.hits
    second = ex.run(query)
    assert SafeExecutor._verdicts.hits == hits + 1  # answered from the cache: no EXPLAIN round trip
    assert (second.rows, second.error) == (first.rows, first.error)
    assert isinstance(SafeExecutor._verdicts.get(key), str)
    # with parameters the verdict is not kept (a compile error could depend on them)
    with_params = query.replace("m.name", "m.name + $x")
    assert ex.run(with_params, params={"x": 1}).error.kind == "syntax"
    assert SafeExecutor._verdicts.get((ex.target.uri, ex.target.database, with_params)) is None
    # a query that compiles still runs
    assert ex.run("MATCH (n:Deity) RETURN count(n) AS n").error is None


def test_limits_are_one_dataclass_with_keyword_overrides_and_validation():
    base = ExecutorLimits(timeout=7.0, max_rows=20)
    ex = SafeExecutor(WORLD, base, max_rows=3)
    assert ex.limits == ExecutorLimits(timeout=7.0, max_rows=3) and base.max_rows == 20
    assert SafeExecutor(WORLD).limits == ExecutorLimits()
    r = ex.run("UNWIND range(1, 10) AS x RETURN x")
    assert r.rows == [[1], [2], [3]] and r.truncated
    for bad in ({"timeout": 0}, {"timeout": float("inf")}, {"max_rows": -1}, {"max_query_chars": 0},
                {"retries": -1}):
        with pytest.raises(ValueError):
            SafeExecutor(WORLD, **bad)
    with pytest.raises(TypeError):
        SafeExecutor(WORLD, max_row=3)  # a misspelt limit is an error, not ignored
