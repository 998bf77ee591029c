"""PSJS: equivalent queries score 1.0, wrong paths less, and it never raises on accepted Cypher."""

from __future__ import annotations

import pytest

from cypherturn.errors import InfrastructureError
from graphs.cypher_syntax import CypherParseError
from graphs.executor import QueryError, QueryResult
from scoring.metrics import psjs as metric
from scoring.metrics.psjs import PROV_COLUMN, Provenance, jaccard, psjs_from_provenance, rewrite_provenance


def _runner(runner):
    from scoring.judge import shared_judge

    return runner or shared_judge().provenance_runner


def provenance(world, cypher, *, runner=None, timeout=120.0):
    """The metric's provenance on the shared judge's executor unless a test gives its own runner."""
    return metric.provenance(world, cypher, runner=_runner(runner), timeout=timeout)


def psjs(world, gold, pred, *, runner=None, timeout=120.0):
    """The metric on the shared judge's executor unless a test gives its own runner."""
    return metric.psjs(world, gold, pred, runner=_runner(runner), timeout=timeout)

W = "ancient_empire"
NAME = "Quabro Tasherk"  # an emperor of ancient_empire who governs six provinces


# -- pure -----------------------------------------------------------------------------------------
def test_jaccard():
    assert jaccard(set(), set()) == 1.0
    assert jaccard({"a"}, set()) == 0.0
    assert jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)


def test_rewrite_names_patterns_and_adds_the_column():
    q = "MATCH (e:Emperor)-[:GOVERNS]->(p), (g:General) WHERE e.name = 'MATCH (x) RETURN x' RETURN p.name"
    r = rewrite_provenance(q)
    assert r.startswith("MATCH __ct_p1 = (e:Emperor)-[:GOVERNS]->(p), __ct_p2 = (g:General) WHERE")
    assert "'MATCH (x) RETURN x'" in r
    assert r.endswith(f"AS {PROV_COLUMN}")


def test_rewrite_keeps_existing_path_variables_and_handles_aggregation():
    r = rewrite_provenance("MATCH p = (a)-[*1..3]->(b) RETURN b.name AS n, count(*) AS c ORDER BY c DESC LIMIT 1;")
    assert "MATCH p = (a)" in r and "collect(DISTINCT p)" in r
    assert r.index(PROV_COLUMN) < r.index("ORDER BY")
    assert not r.endswith(";")


def test_rewrite_with_distinct_and_where():
    r = rewrite_provenance("MATCH (a:A) WITH DISTINCT a WHERE a.x > 1 RETURN a")
    head, tail = r.split(" WHERE ")
    assert "collect(DISTINCT __ct_p1)" in head and tail.startswith("a.x > 1 RETURN a, ")


def test_rewrite_subquery_and_union():
    r = rewrite_provenance("MATCH (a:A) CALL { WITH a MATCH (a)-->(b) RETURN b } RETURN b.name AS n "
                           "UNION MATCH (c:C) RETURN c.name AS n")
    assert r.count(f"AS {PROV_COLUMN}") == 2
    assert "RETURN b, " in r and "coalesce(__ct_s" in r


@pytest.mark.parametrize("bad", ["", "MATCH (n RETURN n", "RETURN", 42])
def test_rewrite_refuses_cleanly(bad):
    with pytest.raises(CypherParseError):
        rewrite_provenance(bad)


def _fake_runner(kind=None, ids=()):
    def run(world, query, timeout):
        if kind is not None:
            return QueryResult(error=QueryError(kind, "boom"))
        return QueryResult(columns=["x", PROV_COLUMN], rows=[[1, list(ids)], [2, None]])
    return run


def test_unrewritable_or_failing_queries_give_zero_with_a_reason():
    res = psjs(W, "MATCH (n) RETURN n", "MATCH (n RETURN n", runner=_fake_runner(ids=["a"]))
    assert res.score == 0.0 and "cannot rewrite" in res.reason
    res = psjs(W, "MATCH (n) RETURN n", "MATCH (n) RETURN n", runner=_fake_runner("syntax"))
    assert res.score == 0.0 and "failed (syntax)" in res.reason
    res = psjs(W, "MATCH (n) RETURN n", None, runner=_fake_runner(ids=["a"]))
    assert res.score == 0.0 and res.reason == "no prediction"
    res = psjs(W, "MATCH (n) RETURN n", "MATCH (m) RETURN m", runner=_fake_runner(ids=["a", "b"]))
    assert res.score == 1.0 and res.gold_size == 2


def test_infrastructure_errors_raise():
    with pytest.raises(InfrastructureError):
        psjs(W, "MATCH (n) RETURN n", "MATCH (n) RETURN n", runner=_fake_runner("unavailable"))


def test_from_provenance():
    g = Provenance(frozenset({"a", "b"}))
    assert psjs_from_provenance(g, Provenance(frozenset({"a"}))).score == 0.5
    assert psjs_from_provenance(Provenance(None, "x"), g).score == 0.0


# -- on the real world ---------------------------------------------------------------------------
GOLD = f"MATCH (e:Emperor {{name: '{NAME}'}})-[:GOVERNS]->(p:Province) RETURN p.name AS name"
EQUIVALENTS = [
    ("renamed-variables", f"MATCH (x:Emperor {{name: '{NAME}'}})-[:GOVERNS]->(y:Province) RETURN y.name AS name"),
    ("reversed-direction", f"MATCH (p:Province)<-[:GOVERNS]-(e:Emperor {{name: '{NAME}'}}) RETURN p.name AS name"),
    ("where-vs-inline-map", f"MATCH (e:Emperor)-[:GOVERNS]->(p:Province) WHERE e.name = '{NAME}' RETURN p.name"),
    ("named-relationship-and-path", f"MATCH path = (e:Emperor)-[g:GOVERNS]->(p) WHERE e.name = '{NAME}' RETURN p"),
    ("split-match", f"MATCH (e:Emperor) WHERE e.name = '{NAME}' MATCH (e)-[:GOVERNS]->(p:Province) RETURN p.name"),
    ("aggregated-projection", f"MATCH (e:Emperor {{name: '{NAME}'}})-[:GOVERNS]->(p:Province) RETURN count(p) AS n"),
    ("distinct-and-with-chain", f"MATCH (a:Emperor {{name: '{NAME}'}})-[:GOVERNS]->(n1:Province)\nWITH DISTINCT n1\n"
                                "RETURN DISTINCT n1.name AS name"),
    ("collected-then-unwound", f"MATCH (e:Emperor {{name: '{NAME}'}})-[:GOVERNS]->(p) WITH collect(p) AS ps "
                               "UNWIND ps AS p RETURN p.name AS name"),
    ("subquery", f"MATCH (e:Emperor {{name: '{NAME}'}}) CALL (e) {{ MATCH (e)-[:GOVERNS]->(p) RETURN p }} "
                 "RETURN p.name AS name"),
    ("undirected", f"MATCH (e:Emperor {{name: '{NAME}'}})-[:GOVERNS]-(p:Province) RETURN p.name AS name"),
]


@pytest.mark.neo4j
@pytest.mark.parametrize("case", EQUIVALENTS, ids=[c[0] for c in EQUIVALENTS])
def test_equivalent_queries_score_one(case):
    res = psjs(W, GOLD, case[1], timeout=30)
    assert res.score == 1.0, res
    assert res.gold_size == 13  # the emperor, six GOVERNS relationships and six provinces


WRONG = [
    ("other-relationship", f"MATCH (g:General)-[:SWORN_TO]->(e:Emperor {{name: '{NAME}'}}) RETURN g.name AS name"),
    ("extra-hop", f"MATCH (e:Emperor {{name: '{NAME}'}})-[:GOVERNS]->(p:Province)-[:CONTAINS]->(c:City) "
                  "RETURN DISTINCT p.name AS name"),
    ("wrong-anchor", "MATCH (e:Emperor {name: 'Dire Kuyux'})-[:GOVERNS]->(p:Province) RETURN p.name AS name"),
    ("no-anchor", "MATCH (p:Province) RETURN p.name AS name"),
    ("narrower-filter", f"MATCH (e:Emperor {{name: '{NAME}'}})-[:GOVERNS]->(p:Province) WHERE p.population > 500000 "
                        "RETURN p.name AS name"),
    ("limited", f"MATCH (e:Emperor {{name: '{NAME}'}})-[:GOVERNS]->(p:Province) RETURN p.name AS name "
                "ORDER BY p.name LIMIT 1"),
]


@pytest.mark.neo4j
@pytest.mark.parametrize("case", WRONG, ids=[c[0] for c in WRONG])
def test_wrong_paths_score_lower(case):
    res = psjs(W, GOLD, case[1], timeout=30)
    assert 0.0 <= res.score < 1.0, res
    assert res.reason is None


@pytest.mark.neo4j
def test_partial_overlap_is_graded():
    extra_hop = psjs(W, GOLD, WRONG[1][1]).score
    other = psjs(W, GOLD, WRONG[0][1]).score
    assert 0.0 < extra_hop < 1.0
    assert other < extra_hop  # only the emperor in common


VARIED = [
    "MATCH (e:Emperor) RETURN e.name AS name, e.reign_years AS y ORDER BY y DESC, name LIMIT 5",
    "MATCH (e:Emperor)-[:GOVERNS]->(p:Province) RETURN e.name, count(p) AS n, avg(p.tax_rate) AS t ORDER BY n DESC",
    "MATCH (e:Emperor)-[:GOVERNS]->(p) WITH e, count(p) AS n WHERE n > 2 RETURN e.name AS name, n",
    "MATCH (e:Emperor) OPTIONAL MATCH (e)<-[:SWORN_TO]-(g:General) WHERE g.age > 60 RETURN e.name, g.name",
    "MATCH (e:Emperor) OPTIONAL MATCH (e)<-[:SWORN_TO]-(g:General) RETURN e.name AS name, count(g) AS generals",
    "MATCH (l:Legion)-[:COMMANDED_BY*1..2]->(x) RETURN DISTINCT labels(x) AS l",
    "MATCH p = (e:Emperor)-[*1..3]->(c:City) RETURN length(p) AS hops, count(*) AS n",
    f"MATCH p = shortestPath((e:Emperor {{name: '{NAME}'}})-[*..6]-(d:Deity)) RETURN length(p) AS hops LIMIT 3",
    "MATCH (e:Emperor) CALL { WITH e MATCH (e)-[:GOVERNS]->(p) RETURN count(p) AS c } RETURN e.name, c",
    "MATCH (e:Emperor) CALL (e) { MATCH (e)-[:GOVERNS]->(p) RETURN p UNION MATCH (e)<-[:SWORN_TO]-(p) RETURN p } "
    "RETURN e.name AS name, count(p) AS n",
    "UNWIND ['arid', 'marsh'] AS c MATCH (p:Province {climate: c}) RETURN c, count(p) AS n",
    "UNWIND range(1, 3) AS i RETURN i * 2 AS x",
    "MATCH (e:Emperor) WHERE EXISTS { (e)-[:GOVERNS]->(:Province {climate: 'arid'}) } RETURN e.name AS n",
    "MATCH (e:Emperor) WHERE COUNT { (e)-[:GOVERNS]->() } > 3 RETURN e.name AS name",
    "MATCH (e:Emperor) RETURN e.name AS name, COLLECT { MATCH (e)-[:GOVERNS]->(p) RETURN p.name } AS ps",
    "MATCH (e:Emperor) RETURN e.name AS name, [(e)-[:GOVERNS]->(p) | p.name] AS ps",
    "MATCH (e:Emperor) WHERE NOT (e)-[:GOVERNS]->() RETURN e.name AS name",
    "MATCH (e:Emperor) RETURN e.name AS n UNION MATCH (g:General) RETURN g.name AS n",
    "MATCH (e:Emperor) RETURN e.name AS n UNION ALL RETURN 'x' AS n",
    "MATCH (e:Emperor) WITH * WHERE e.deified RETURN *",
    "MATCH (e:Emperor) WITH e {.name, .reign_years} AS m RETURN m",
    "MATCH (e:Emperor) RETURN e {.name, provinces: [(e)-->(p:Province) | p.name]} AS m",
    "MATCH (e:Emperor) RETURN CASE WHEN e.deified THEN 'god' ELSE 'mortal' END AS kind, count(*) AS n",
    "MATCH (e:Emperor) WITH e ORDER BY e.treasury DESC LIMIT 3 MATCH (e)-[:GOVERNS]->(p) RETURN p.name",
    "MATCH (a:Emperor), (b:Deity) WHERE a.reign_years > 30 AND b.worshippers > 5000000 RETURN count(*) AS pairs",
    "MATCH (e:Emperor)-[:GOVERNS]->(p)-[:CONTAINS]->(c:City)-[:HOSTS]->(t:Temple)-[:WORSHIPS]->(d:Deity) "
    "RETURN d.name AS deity, count(DISTINCT e) AS emperors ORDER BY emperors DESC, deity LIMIT 5",
    "MATCH (e:Emperor) WHERE e.name STARTS WITH 'Q' WITH e.name AS name RETURN name",
    "MATCH (n) RETURN labels(n)[0] AS label, count(*) AS n ORDER BY label",
    "MATCH ()-[r]->() RETURN type(r) AS t, count(*) AS n",
    "MATCH (e:`Emperor`) // a comment RETURN nothing\nRETURN e.`name` AS `the name`;",
    "CALL db.labels() YIELD label RETURN label",
    "CALL db.relationshipTypes()",
    "RETURN 1 AS one",
    "MATCH (e:Emperor)((a)-[:GOVERNS]->(b)){1,2}(x) RETURN count(*) AS n",
    "MATCH p = ANY SHORTEST (e:Emperor)-[]->+(d:Deity) RETURN count(p) AS n",
    "MATCH (e:Emperor) WITH collect(e) AS es UNWIND es AS e MATCH (e)-[:GOVERNS]->(p) RETURN count(p) AS n",
    "MATCH (e:Emperor) WHERE e.epithet IS NULL RETURN e.name AS name ORDER BY name SKIP 2 LIMIT 2",
    "MATCH (e:Emperor) RETURN DISTINCT e.dynasty AS d, max(e.treasury) AS m",
]


@pytest.mark.neo4j
@pytest.mark.parametrize("query", VARIED)
def test_never_raises_and_is_one_against_itself(query):
    from graphs.executor import execute

    assert execute(W, query, timeout=30).error is None  # the executor accepts it
    pv = provenance(W, query, timeout=30)
    assert pv.ids is not None, (pv.reason, pv.rewritten)
    res = psjs(W, query, query, timeout=30)
    assert res.score == 1.0
    assert res.reason is None or "empty provenance" in res.reason  # a standalone procedure call


@pytest.mark.neo4j
def test_varied_queries_against_each_other_stay_in_range():
    for gold, pred in zip(VARIED, VARIED[1:] + VARIED[:1]):
        res = psjs(W, gold, pred, timeout=30)
        assert 0.0 <= res.score <= 1.0


@pytest.mark.neo4j
def test_failing_prediction_scores_zero():
    res = psjs(W, GOLD, "MATCH (e:Emperor RETURN e", timeout=30)
    assert res.score == 0.0 and res.reason
    res = psjs(W, GOLD, "MATCH (e:Emperor) RETURN e.name / 0 AS x", timeout=30)
    assert res.score == 0.0 and res.reason


@pytest.mark.neo4j
def test_generator_style_chain_equals_one_flat_pattern():
    chain = (f"MATCH (a_n1:Emperor {{name: '{NAME}'}})-[:GOVERNS]->(n1:Province)\nWITH DISTINCT n1\n"
             "MATCH (n1)-[:CONTAINS]->(n2:City)\nRETURN DISTINCT n2.name AS name")
    flat = (f"MATCH (:Emperor {{name: '{NAME}'}})-[:GOVERNS]->(:Province)-[:CONTAINS]->(c:City) "
            "RETURN DISTINCT c.name AS name")
    res = psjs(W, chain, flat, timeout=30)
    assert res.score == 1.0 and res.gold_size > 13
    # stopping one hop short covers only part of the gold's subgraph
    assert 0.0 < psjs(W, chain, GOLD, timeout=30).score < 1.0
