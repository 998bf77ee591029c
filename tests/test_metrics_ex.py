"""EX strict and EX relaxed: a table of hand-made cases.

Pure cases compare hand-written result sets (the executor's normalized shape); DB cases run a
(gold, prediction) pair of Cypher queries on the real ``ancient_empire`` world through the safe
executor (``scoring.score.score_pair``) and check both metrics.
"""

from __future__ import annotations

import pytest

from scoring.metrics.ex import canonical, ex_strict, is_ordered
import itertools
import random
from collections import Counter

from rewards.execution import row_f1
from scoring.metrics.ex_relaxed import align_columns, common_count, ex_relaxed, relaxed_column_match


def node(labels, **props):
    return {"~node": {"labels": list(labels), "properties": props}}


def rel(type_, **props):
    return {"~relationship": {"type": type_, "properties": props}}


A = node(["Emperor"], name="A", years=3)
B = node(["Province"], name="B", tax=0.2)
R = rel("GOVERNS", since=700)

# (id, gold_columns, gold_rows, pred_columns, pred_rows, ordered, expected strict, expected relaxed)
PURE = [
    ("identical", ["n"], [[1], [2]], ["n"], [[1], [2]], False, 1, 1),
    ("int-vs-float", ["n"], [[1]], ["n"], [[1.0]], False, 1, 1),
    ("float-off-by-1e-7", ["x"], [[1.0]], ["x"], [[1.0000001]], False, 0, 1),
    ("float-off-by-1e-3", ["x"], [[1.0]], ["x"], [[1.001]], False, 0, 0),
    ("float-sum-rounding", ["x"], [[0.1 + 0.2]], ["x"], [[0.3]], False, 0, 1),
    ("tiny-vs-zero-abs-tol", ["x"], [[1e-10]], ["x"], [[0]], False, 0, 1),
    ("big-ints-no-tolerance", ["n"], [[1000000]], ["n"], [[1000001]], False, 0, 0),
    ("bool-is-not-int", ["b"], [[True]], ["b"], [[1]], False, 0, 0),
    ("null-vs-null", ["v"], [[None]], ["v"], [[None]], False, 1, 1),
    ("null-vs-empty-string", ["v"], [[None]], ["v"], [[""]], False, 0, 0),
    ("list-other-order", ["l"], [[[1, 2, 3]]], ["l"], [[[3, 1, 2]]], False, 1, 1),
    ("list-other-multiplicity", ["l"], [[[1, 1, 2]]], ["l"], [[[1, 2, 2]]], False, 0, 0),
    ("nested-lists", ["l"], [[[[1, 2], [3]]]], ["l"], [[[[3], [2, 1]]]], False, 1, 1),
    ("list-float-tolerance", ["l"], [[[0.3, 1]]], ["l"], [[[1.0, 0.1 + 0.2]]], False, 0, 1),
    ("map-key-order", ["m"], [[{"a": 1, "b": "x"}]], ["m"], [[{"b": "x", "a": 1.0}]], False, 1, 1),
    ("map-other-keys", ["m"], [[{"a": 1}]], ["m"], [[{"b": 1}]], False, 0, 0),
    ("node-label-order", ["n"], [[node(["A", "B"], k=1)]], ["n"], [[node(["B", "A"], k=1)]], False, 1, 1),
    ("node-other-property", ["n"], [[A]], ["n"], [[node(["Emperor"], name="A", years=4)]], False, 0, 0),
    ("node-vs-its-name", ["n"], [[A]], ["n"], [["A"]], False, 0, 0),
    ("relationship-type", ["r"], [[R]], ["r"], [[rel("RULES", since=700)]], False, 0, 0),
    ("path-reversed", ["p"], [[{"~path": [A, R, B]}]], ["p"], [[{"~path": [B, R, A]}]], False, 1, 1),
    ("path-other", ["p"], [[{"~path": [A, R, B]}]], ["p"], [[{"~path": [A, R, A]}]], False, 0, 0),
    ("date-iso", ["d"], [["0682-09-11"]], ["d"], [["0682-09-11"]], False, 1, 1),
    ("date-other", ["d"], [["0682-09-11"]], ["d"], [["0682-09-12"]], False, 0, 0),
    ("nan-and-infinity", ["x"], [["NaN"], [float("inf")]], ["x"], [[float("nan")], ["Infinity"]], False, 1, 1),
    ("rows-other-order-unordered", ["n"], [[1], [2]], ["n"], [[2], [1]], False, 1, 1),
    ("rows-other-order-ordered", ["n"], [[1], [2]], ["n"], [[2], [1]], True, 0, 0),
    ("duplicate-rows-differ", ["n"], [[1], [1], [2]], ["n"], [[1], [2], [2]], False, 0, 0),
    ("missing-duplicate", ["n"], [[1], [1]], ["n"], [[1]], False, 0, 0),
    ("both-empty-any-columns", ["a"], [], ["b", "c"], [], False, 1, 1),
    ("gold-empty-only", ["a"], [], ["a"], [[1]], False, 0, 0),
    ("pred-empty-only", ["a"], [[1]], ["a"], [], False, 0, 0),
    ("columns-swapped", ["a", "b"], [[1, "x"]], ["b", "a"], [["x", 1]], False, 1, 1),
    ("columns-renamed", ["a"], [[1]], ["z"], [[1]], False, 0, 1),
    ("extra-predicted-column", ["a"], [[1], [2]], ["a", "b"], [[1, "x"], [2, "y"]], False, 0, 1),
    ("missing-predicted-column", ["a", "b"], [[1, 2]], ["a"], [[1]], False, 0, 0),
    ("joint-row-mismatch", ["a", "b"], [[1, "a"], [2, "b"]], ["x", "y"], [[1, "b"], [2, "a"]], False, 0, 0),
    ("interchangeable-columns", ["a", "b"], [[1, 1], [2, 2]], ["x", "y"], [[2, 2], [1, 1]], False, 0, 1),
    ("tolerance-needs-matching", ["x", "s"], [[1.0, "b"], [1.0000000001, "a"]],
     ["x", "s"], [[1.0, "a"], [1.0000000001, "b"]], False, 0, 1),
    ("ordered-renamed-columns", ["a", "b"], [[1, 2], [3, 4]], ["p", "q"], [[1, 2], [3, 4]], True, 0, 1),
    ("ordered-column-choice", ["a"], [[1], [2]], ["p", "q"], [[2, 1], [1, 2]], True, 0, 1),
]


@pytest.mark.parametrize("case", PURE, ids=[c[0] for c in PURE])
def test_pure_cases(case):
    _, gc, gr, pc, pr, ordered, strict, relaxed = case
    assert ex_strict(gc, gr, pc, pr, ordered=ordered) == strict
    assert ex_relaxed(gc, gr, pc, pr, ordered=ordered) == relaxed
    # symmetric by construction for these cases (except where extra columns are involved)
    if len(gc) == len(pc):
        assert ex_strict(pc, pr, gc, gr, ordered=ordered) == strict


def test_relaxed_extra_columns_can_be_refused():
    assert ex_relaxed(["a"], [[1]], ["a", "b"], [[1, 2]], ordered=False) == 1
    assert ex_relaxed(["a"], [[1]], ["a", "b"], [[1, 2]], ordered=False, allow_extra_columns=False) == 0


def test_relaxed_matching_is_deterministic_first_assignment():
    # both predicted columns could serve gold column a; the first in predicted order is taken
    assert relaxed_column_match(["a"], [[1]], ["p", "q"], [[1, 1]], ordered=False) == [0]
    assert relaxed_column_match(["a", "b"], [[1, 2]], ["p", "q", "r"], [[2, 9, 1]], ordered=False) == [2, 0]
    assert relaxed_column_match(["a"], [], ["p"], [], ordered=False) == []


def test_common_count_pairs_each_value_once_under_the_tolerance():
    c = [canonical(v) for v in (1.0, 1.0000001, 2, "x")]
    assert common_count(c, [canonical(v) for v in (1.0000001, 1.0, 2.0, "x")]) == 4
    assert common_count(c, [canonical(v) for v in (1.0, 1.0, 3, "y")]) == 2   # 1.0 twice: both pair, once each
    assert common_count([canonical(1000000)], [canonical(1000001)]) == 0      # integers get no tolerance
    # a chain: pairing the identical 1.0s would leave 1 - 9e-7 and 1 + 9e-7 (not close); sorted pairing pairs all
    assert common_count([canonical(1.0), canonical(1 - 9e-7)], [canonical(1.0), canonical(1 + 9e-7)]) == 2


def _brute_force_common(gold_rows, k, pred_rows, m) -> int:
    """Rows in common (exact values) under the best assignment, trying every one."""
    best = 0
    for cols in itertools.permutations(range(m), k):
        gold = Counter(tuple(canonical(v) for v in row) for row in gold_rows)
        pred = Counter(tuple(canonical(row[j]) for j in cols) for row in pred_rows)
        best = max(best, sum((gold & pred).values()))
    return best


def test_align_columns_finds_the_assignment_with_the_most_rows_in_common():
    rng = random.Random(21)
    for _ in range(400):
        k, n, n2 = rng.randint(1, 3), rng.randint(1, 6), rng.randint(1, 6)
        m = rng.randint(k, 4)
        gold = [[rng.choice([1, 2, "x", "y"]) for _ in range(k)] for _ in range(n)]
        pred = [[rng.choice([1, 2, "x", "y"]) for _ in range(m)] for _ in range(n2)]
        found = align_columns(["g"] * k, gold, ["p"] * m, pred)
        assert (0 if found is None else found.common) == _brute_force_common(gold, k, pred, m), (gold, pred)


def test_row_f1_is_one_exactly_when_ex_relaxed_is():
    """The partial-credit reward and the published metric share one rule: on every unordered pair of the
    table above, and on random ones, row F1 is 1.0 exactly when EX relaxed is 1."""
    for _, gc, gr, pc, pr, ordered, _, relaxed in PURE:
        if not ordered:
            assert (row_f1(gc, gr, pc, pr) == 1.0) == bool(ex_relaxed(gc, gr, pc, pr, ordered=False)), (gr, pr)
    rng = random.Random(7)
    values = [1, 2, 2.5, 2.5000001, "x", [1, 2.0], None]
    for _ in range(500):
        k, n, n2 = rng.randint(1, 3), rng.randint(0, 5), rng.randint(0, 5)
        m = rng.randint(k, 4)
        gold = [[rng.choice(values) for _ in range(k)] for _ in range(n)]
        pred = [[rng.choice(values) for _ in range(m)] for _ in range(n2)]
        gc, pc = [f"g{i}" for i in range(k)], [f"p{j}" for j in range(m)]
        assert (row_f1(gc, gold, pc, pred) == 1.0) == bool(ex_relaxed(gc, gold, pc, pred, ordered=False)), (gold, pred)


def test_canonical_keeps_types_apart():
    assert canonical(1) == canonical(1.0)
    assert canonical(True) != canonical(1)
    assert canonical([2, 1]) == canonical([1, 2])
    assert canonical({"b": 1, "a": [3, 1]}) == canonical({"a": [1, 3], "b": 1.0})


def test_malformed_rows_are_an_error():
    with pytest.raises(ValueError):
        ex_strict(["a", "b"], [[1]], ["a", "b"], [[1, 2]], ordered=False)


@pytest.mark.parametrize("cypher, expected", [
    ("MATCH (n) RETURN n ORDER BY n.x", True),
    ("MATCH (n) RETURN n order by n.x desc LIMIT 3;", True),
    ("MATCH (n) RETURN n ORDER BY n.x SKIP 1 LIMIT 2", True),
    ("MATCH (n) WITH n ORDER BY n.x RETURN n", False),
    ("MATCH (n) WITH n ORDER BY n.x LIMIT 3 RETURN n.name AS name", False),
    ("MATCH (n) RETURN n.order AS o", False),
    ("MATCH (n) RETURN n.`order` AS o, {order: 1} AS m", False),
    ("MATCH (n) WHERE n.name = 'ORDER BY' RETURN n", False),
    ("// RETURN n ORDER BY n.x\nMATCH (n) RETURN n", False),
    ("MATCH (n) RETURN n /* ORDER BY n.x */", False),
    ("CALL { MATCH (n) RETURN n ORDER BY n.x LIMIT 1 } RETURN n", False),
    ("CALL { MATCH (n) RETURN n } RETURN n ORDER BY n.x", True),
    ("MATCH (n) RETURN COLLECT { MATCH (m) RETURN m.x ORDER BY m.x } AS c", False),
    ("MATCH (n) RETURN n.x AS x UNION MATCH (m) RETURN m.x AS x ORDER BY x", True),
    ("MATCH (n) RETURN n.x AS x ORDER BY x UNION MATCH (m) RETURN m.x AS x", False),
    ("MATCH (n:Order) RETURN n", False),
    ("MATCH (n) RETURN n ORDER BY", True),
    ("MATCH (n RETURN n ORDER BY n.x", False),  # unparseable: unordered
    ("", False),
])
def test_is_ordered(cypher, expected):
    assert is_ordered(cypher) is expected


# -- on the real world ---------------------------------------------------------------------------
W = "ancient_empire"
GOV = "MATCH (e:Emperor)-[:GOVERNS]->(p:Province)"

# (id, gold cypher, predicted cypher, expected strict, expected relaxed)
DB = [
    ("same-query", "MATCH (e:Emperor) RETURN e.name AS name", "MATCH (e:Emperor) RETURN e.name AS name", 1, 1),
    ("renamed-variable", "MATCH (e:Emperor) RETURN e.name AS name", "MATCH (x:Emperor) RETURN x.name AS name", 1, 1),
    ("column-order", "MATCH (e:Emperor) RETURN e.name AS name, e.reign_years AS years",
     "MATCH (e:Emperor) RETURN e.reign_years AS years, e.name AS name", 1, 1),
    ("column-name", "MATCH (e:Emperor) RETURN e.name AS name", "MATCH (e:Emperor) RETURN e.name AS emperor", 0, 1),
    ("unaliased-column", "MATCH (e:Emperor) RETURN e.name AS name", "MATCH (e:Emperor) RETURN e.name", 0, 1),
    ("order-by-at-end-same", "MATCH (e:Emperor) RETURN e.name AS name ORDER BY name",
     "MATCH (x:Emperor) RETURN x.name AS name ORDER BY x.name ASC", 1, 1),
    ("order-by-at-end-reversed", "MATCH (e:Emperor) RETURN e.name AS name ORDER BY name",
     "MATCH (e:Emperor) RETURN e.name AS name ORDER BY name DESC", 0, 0),
    ("order-by-only-in-pred", "MATCH (e:Emperor) RETURN e.name AS name",
     "MATCH (e:Emperor) RETURN e.name AS name ORDER BY name DESC", 1, 1),
    ("order-by-inside-with", "MATCH (e:Emperor) WITH e ORDER BY e.name RETURN e.name AS name",
     "MATCH (e:Emperor) WITH e ORDER BY e.name DESC RETURN e.name AS name", 1, 1),
    ("top-k-order", "MATCH (e:Emperor) RETURN e.name AS name ORDER BY e.treasury DESC LIMIT 3",
     "MATCH (e:Emperor) WITH e ORDER BY e.treasury DESC LIMIT 3 RETURN e.name AS name ORDER BY e.treasury DESC", 1, 1),
    ("duplicates-vs-distinct", f"{GOV} RETURN e.name AS name", f"{GOV} RETURN DISTINCT e.name AS name", 0, 0),
    ("distinct-both", f"{GOV} RETURN DISTINCT e.name AS name",
     "MATCH (p:Province)<-[:GOVERNS]-(e:Emperor) WITH DISTINCT e RETURN e.name AS name", 1, 1),
    ("count-int-vs-float", f"{GOV} RETURN count(*) AS n", f"{GOV} RETURN toFloat(count(p)) AS n", 1, 1),
    ("count-wrong", f"{GOV} RETURN count(*) AS n", f"{GOV} RETURN count(DISTINCT e) AS n", 0, 0),
    ("float-arithmetic", "RETURN 0.1 + 0.2 AS x", "RETURN 0.3 AS x", 0, 1),
    ("float-rounded-answer", "MATCH (p:Province) RETURN avg(p.tax_rate) AS r",
     "MATCH (p:Province) RETURN round(avg(p.tax_rate), 2) AS r", 0, 0),
    ("nulls-kept", "MATCH (e:Emperor) RETURN e.name AS name, e.epithet AS epithet",
     "MATCH (e:Emperor) RETURN e.epithet AS epithet, e.name AS name", 1, 1),
    ("nulls-replaced", "MATCH (e:Emperor) RETURN e.name AS name, e.epithet AS epithet",
     "MATCH (e:Emperor) RETURN e.name AS name, coalesce(e.epithet, '') AS epithet", 0, 0),
    ("collect-order", f"{GOV} RETURN e.name AS name, collect(p.name) AS provinces",
     f"{GOV} WITH e, p ORDER BY p.name DESC RETURN e.name AS name, collect(p.name) AS provinces", 1, 1),
    ("collect-wrong-content", f"{GOV} RETURN e.name AS name, collect(p.name) AS provinces",
     f"{GOV} RETURN e.name AS name, collect(p.climate) AS provinces", 0, 0),
    ("map-key-order", "MATCH (e:Emperor) RETURN {name: e.name, years: e.reign_years} AS m",
     "MATCH (e:Emperor) RETURN {years: e.reign_years, name: e.name} AS m", 1, 1),
    ("node-whole", "MATCH (e:Emperor) RETURN e", "MATCH (x:Emperor) RETURN x AS e", 1, 1),
    ("node-vs-property", "MATCH (e:Emperor) RETURN e", "MATCH (e:Emperor) RETURN e.name AS e", 0, 0),
    ("relationship-whole", "MATCH ()-[r:GOVERNS]->() RETURN r", "MATCH (:Province)<-[r:GOVERNS]-() RETURN r", 1, 1),
    ("relationship-other-type", "MATCH ()-[r:GOVERNS]->() RETURN r", "MATCH ()-[r:SWORN_TO]->() RETURN r", 0, 0),
    ("path-whole", "MATCH p = (:Emperor)-[:GOVERNS]->(:Province) RETURN p",
     "MATCH p = (:Province)<-[:GOVERNS]-(:Emperor) RETURN p", 1, 1),
    ("path-longer", "MATCH p = (:Emperor)-[:GOVERNS]->(:Province) RETURN p",
     "MATCH p = (:Emperor)-[:GOVERNS]->(:Province)-[:CONTAINS]->(:City) RETURN p", 0, 0),
    ("date-values", "MATCH (l:Legion) RETURN l.raised_on AS d",
     "MATCH (l:Legion) RETURN date(toString(l.raised_on)) AS d", 1, 1),
    ("date-shifted", "MATCH (l:Legion) RETURN l.raised_on AS d",
     "MATCH (l:Legion) RETURN l.raised_on + duration('P1D') AS d", 0, 0),
    ("both-empty", "MATCH (e:Emperor) WHERE e.reign_years < 0 RETURN e.name AS name",
     "MATCH (g:General) WHERE g.age < 0 RETURN g.name AS general, g.age AS age", 1, 1),
    ("gold-empty-pred-not", "MATCH (e:Emperor) WHERE e.reign_years < 0 RETURN e.name AS name",
     "MATCH (e:Emperor) RETURN e.name AS name", 0, 0),
    ("extra-column", "MATCH (e:Emperor) RETURN e.name AS name",
     "MATCH (e:Emperor) RETURN e.name AS name, e.reign_years AS years", 0, 1),
    ("missing-column", "MATCH (e:Emperor) RETURN e.name AS name, e.reign_years AS years",
     "MATCH (e:Emperor) RETURN e.name AS name", 0, 0),
    ("bool-vs-int", "MATCH (e:Emperor) RETURN e.name AS name, e.deified AS d",
     "MATCH (e:Emperor) RETURN e.name AS name, CASE WHEN e.deified THEN 1 ELSE 0 END AS d", 0, 0),
    ("wrong-filter", "MATCH (e:Emperor) WHERE e.deified RETURN e.name AS name",
     "MATCH (e:Emperor) WHERE NOT e.deified RETURN e.name AS name", 0, 0),
    ("where-vs-inline-map", "MATCH (e:Emperor {deified: true}) RETURN e.name AS name",
     "MATCH (e:Emperor) WHERE e.deified = true RETURN e.name AS name", 1, 1),
]


@pytest.mark.neo4j
@pytest.mark.parametrize("case", DB, ids=[c[0] for c in DB])
def test_db_cases(case):
    from scoring.score import score_pair

    _, gold, pred, strict, relaxed = case
    out = score_pair(W, gold, pred, with_psjs=False)
    assert out["gold"]["error"] is None and out["pred"]["error"] is None, (out["gold"]["error"], out["pred"]["error"])
    assert (out["ex"], out["ex_relaxed"]) == (strict, relaxed)


def test_case_count():
    assert len(PURE) + len(DB) >= 40
