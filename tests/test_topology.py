"""Each benchmark world really has the topology DESIGN.md section 3 promises, proven on the real Neo4j.

Every query goes through the safe executor (``graphs.executor.execute``) against the worlds that the
``neo4j`` session fixture of conftest.py loads; each assertion states a structural fact that a wrong
spec or a broken generator/loader would violate.
"""

from __future__ import annotations

import pytest

from graphs.executor import execute
from graphs.spec import WorldSpec, all_specs, get_spec

pytestmark = pytest.mark.neo4j

NUMERIC = "valueType(v) IN ['INTEGER NOT NULL', 'FLOAT NOT NULL']"


def query(world: str, cypher: str) -> list[list]:
    """Run a read query through the safe executor; fail the test on any error or truncation."""
    result = execute(world, cypher, timeout=30.0, max_rows=1000)
    assert result.error is None, f"{world}: {cypher}\n-> {result.error}"
    assert not getattr(result, "truncated", False), f"{world}: result truncated: {cypher}"
    return result.rows


def one(world: str, cypher: str) -> list:
    rows = query(world, cypher)
    assert len(rows) == 1, f"{world}: expected one row, got {len(rows)}: {cypher}"
    return rows[0]


def labels_and_types(world: str) -> tuple[list[str], list[str]]:
    labels = one(world, "MATCH (n) UNWIND labels(n) AS l RETURN collect(DISTINCT l)")[0]
    types = one(world, "MATCH ()-[r]->() RETURN collect(DISTINCT type(r))")[0]
    return sorted(labels), sorted(types)


def numeric_edge_properties(spec: WorldSpec) -> set[tuple[str, str]]:
    return {(r.type, p.name) for r in spec.relationships for p in r.properties if p.type in ("int", "float")}


def db_numeric_edge_properties(world: str) -> set[tuple[str, str]]:
    rows = query(world, "MATCH ()-[r]->() UNWIND keys(r) AS k WITH type(r) AS t, k, r[k] AS v "
                        f"WHERE {NUMERIC} RETURN DISTINCT t, k")
    return {(t, k) for t, k in rows}


# --- Ancient Empire: directed cycle, 7 labels / 7 types, numeric props on 5 types, 4-hop paths ---------

def test_ancient_empire_cycle_and_paths():
    w = "ancient_empire"
    cycles = one(w, "MATCH p = (e:Emperor)-[:GOVERNS]->(:Province)-[:GARRISONS]->(:Legion)"
                    "-[:COMMANDED_BY]->(:General)-[:SWORN_TO]->(e) RETURN count(p)")[0]
    assert cycles > 0, "no instance-level cycle Emperor -> Province -> Legion -> General -> same Emperor"
    four_hop = one(w, "MATCH p = (:Emperor)-[:GOVERNS]->(:Province)-[:CONTAINS]->(:City)-[:HOSTS]->(:Temple)"
                      "-[:WORSHIPS]->(:Deity) RETURN count(p), min(length(p))")
    assert four_hop[0] > 0 and four_hop[1] == 4
    labels, types = labels_and_types(w)
    spec = get_spec(w)
    assert len(labels) == 7 and labels == sorted(spec.labels)
    assert len(types) == 8 and types == spec.relationship_types
    with_numeric = {t for t, _ in db_numeric_edge_properties(w)}
    assert len(with_numeric) == 6, sorted(with_numeric)


# --- Magic Academy: bipartite cycle Student/Professor via courses AND organisational units; 6 labels ---

def test_magic_academy_bipartite_cycle():
    w = "magic_academy"
    labels, _ = labels_and_types(w)
    assert labels == sorted(get_spec(w).labels) and len(labels) == 6
    via_house = one(w, "MATCH (s:Student)-[:ENROLLED_IN]->(:Course)<-[:TEACHES]-(p:Professor) "
                       "WHERE EXISTS { (s)-[:MEMBER_OF]->(:House)<-[:HEADS]-(p) } "
                       "RETURN count(DISTINCT [s.name, p.name])")[0]
    via_dept = one(w, "MATCH (s:Student)-[:ENROLLED_IN]->(:Course)<-[:TEACHES]-(p:Professor) "
                      "WHERE EXISTS { (s)-[:MAJORS_IN]->(:Department)<-[:WORKS_IN]-(p) } "
                      "RETURN count(DISTINCT [s.name, p.name])")[0]
    assert via_house > 0, "no Student/Professor pair linked both by a course and by a house"
    assert via_dept > 0, "no Student/Professor pair linked both by a course and by a department"
    # the ambiguity matters: for some professor "their students" differs by route
    ambiguous = one(w, "MATCH (p:Professor) "
                       "WITH p, COLLECT { MATCH (p)-[:TEACHES]->(:Course)<-[:ENROLLED_IN]-(s:Student) "
                       "RETURN DISTINCT s.name } AS by_course, "
                       "COLLECT { MATCH (p)-[:WORKS_IN]->(:Department)<-[:MAJORS_IN]-(s:Student) "
                       "RETURN DISTINCT s.name } AS by_dept "
                       "WHERE any(x IN by_course WHERE x IN by_dept) AND any(x IN by_course WHERE NOT x IN by_dept) "
                       "RETURN count(p)")[0]
    assert ambiguous > 0


# --- Ocean Kingdom: diamond convergence from Kingdom, duplicates unless DISTINCT --------------------

def test_ocean_kingdom_diamond_convergence():
    w = "ocean_kingdom"
    fan_out = one(w, "MATCH (:Kingdom)-[r]->(m) RETURN count(DISTINCT type(r)), count(DISTINCT labels(m)[0])")
    assert fan_out == [3, 3], "Kingdom must fan out through three relationship types to three labels"
    creature = one(w, "MATCH (k:Kingdom)-[:CLAIMS]->(:Reef)-[:SHELTERS]->(c:Creature)"
                      "<-[:RIDES]-(:Fleet)<-[:COMMANDS]-(k) RETURN count(DISTINCT [k.name, c.name])")[0]
    pearl = one(w, "MATCH (k:Kingdom)-[:CLAIMS]->(:Reef)-[:YIELDS]->(p:Pearl)"
                   "<-[:TRADES]-(:Guild)<-[:CHARTERS]-(k) RETURN count(DISTINCT [k.name, p.name])")[0]
    assert creature > 0, "no Creature reached from one Kingdom through both the Reef and the Fleet branch"
    assert pearl > 0, "no Pearl reached from one Kingdom through both the Reef and the Guild branch"
    paths, distinct = one(w, "MATCH (k:Kingdom)-[:CLAIMS|COMMANDS]->()-[:SHELTERS|RIDES]->(c:Creature) "
                             "RETURN count(c), count(DISTINCT [k.name, c.name])")
    assert paths > distinct > 0, "paths from a kingdom to its creatures must repeat without DISTINCT"


# --- Stellar Colony: tree hierarchy plus lateral ALLIED_WITH between factions ------------------------

def test_stellar_colony_tree_and_alliances():
    w = "stellar_colony"
    n_colonies = get_spec(w).node("Colony").count
    total, lo, hi = one(w, "MATCH (c:Colony) WITH c, COUNT { (c)-[:LOCATED_IN]->(:StarSystem)-[:LIES_IN]->(:Sector)"
                           "-[:PART_OF]->(:Galaxy) } AS chains RETURN count(c), min(chains), max(chains)")
    assert total == n_colonies and lo == hi == 1, "every colony needs exactly one chain up to a galaxy"
    parents = one(w, "MATCH (x) WHERE x:Sector OR x:StarSystem OR x:Colony "
                     "WITH x, COUNT { (x)-[:PART_OF|LIES_IN|LOCATED_IN]->() } AS up RETURN min(up), max(up)")
    assert parents == [1, 1], "each non-root node of the hierarchy has exactly one parent"
    roots_up = one(w, "MATCH (g:Galaxy) RETURN count(g), sum(COUNT { (g)-[:PART_OF|LIES_IN|LOCATED_IN]->() })")
    assert roots_up[0] > 0 and roots_up[1] == 0, "galaxies are the roots"
    allied, non_faction, self_loops = one(w, "MATCH (a)-[r:ALLIED_WITH]->(b) RETURN count(r), "
                                             "sum(CASE WHEN a:Faction AND b:Faction THEN 0 ELSE 1 END), "
                                             "sum(CASE WHEN a = b THEN 1 ELSE 0 END)")
    assert allied > 0 and non_faction == 0 and self_loops == 0
    # symmetric: each alliance is stored once, so only an undirected pattern finds both partners
    assert [r.symmetric for r in get_spec(w).relationships if r.type == "ALLIED_WITH"] == [True]
    reciprocal = one(w, "MATCH (a:Faction)-[:ALLIED_WITH]->(b:Faction)-[:ALLIED_WITH]->(a) RETURN count(*)")[0]
    assert reciprocal == 0


@pytest.mark.parametrize("world, rel_type, label, depth", [
    ("ancient_empire", "MENTORED_BY", "General", 3), ("magic_academy", "REQUIRES", "Course", 3),
    ("merchant_harbor", "MADE_FROM", "Commodity", 3), ("ocean_kingdom", "DESCENDS_FROM", "Creature", 4),
    ("arcane_archive", "REFERENCES", "Tome", 5), ("celestial_court", "SERVES_UNDER", "Official", 6)])
def test_hierarchies_for_recursive_questions(world, rel_type, label, depth):
    """Six benchmark worlds hold a layered self-relationship, so RECURSE is asked in most worlds."""
    longest = one(world, f"MATCH p = (:{label})-[:{rel_type}*1..10]->(:{label}) RETURN max(length(p))")[0]
    assert longest == depth


# --- Arcane Archive: linear chain plus recursive REFERENCES on Tome ---------------------------------

def test_arcane_archive_citation_depth():
    w = "arcane_archive"
    rows = query(w, "MATCH p = (:Tome)-[:REFERENCES*5]->(:Tome) RETURN length(p) LIMIT 1")
    assert rows == [[5]], "no REFERENCES chain of 5 hops"
    deeper = one(w, "MATCH p = (:Tome)-[:REFERENCES*6]->(:Tome) RETURN count(p)")[0]
    assert deeper == 0, "REFERENCES has 6 levels, so no chain is longer than 5 hops (and there is no cycle)"
    chain = one(w, "MATCH p = (:Library)-[:HAS_WING]->(:Wing)-[:HOLDS]->(:Shelf)-[:STORES]->(:Tome)"
                   "-[:WRITTEN_BY]->(:Author)-[:TRAINED_AT]->(:School) RETURN count(p)")[0]
    assert chain > 0, "the linear chain Library -> ... -> School is not connected"
    self_types = one(w, "MATCH (a)-[r]->(b) WHERE labels(a) = labels(b) RETURN collect(DISTINCT type(r))")[0]
    assert self_types == ["REFERENCES"], "REFERENCES must be the only same-label relationship"


# --- Celestial Court: SERVES_UNDER at arbitrary depth ----------------------------------------------

def test_celestial_court_serves_under_depth():
    w = "celestial_court"
    deep = one(w, "MATCH p = (:Official)-[:SERVES_UNDER*4]->(:Official) RETURN count(p)")[0]
    assert deep > 0, "no SERVES_UNDER chain of 4 hops"
    to_root = one(w, "MATCH p = (:Official)-[:SERVES_UNDER*6]->(top:Official) "
                     "WHERE NOT EXISTS { (top)-[:SERVES_UNDER]->() } RETURN count(p)")[0]
    assert to_root > 0, "no official six levels below a top official"
    superiors, roots = one(w, "MATCH (o:Official) WITH COUNT { (o)-[:SERVES_UNDER]->() } AS n "
                              "RETURN max(n), sum(CASE n WHEN 0 THEN 1 ELSE 0 END)")
    assert superiors == 1 and roots >= 1, "SERVES_UNDER must be a tree: one superior each, some roots"
    cycles = one(w, "MATCH (o:Official)-[:SERVES_UNDER*1..7]->(o) RETURN count(*)")[0]
    assert cycles == 0


# --- Merchant Harbor: Invoice bridges Trader, Buyer, Storehouse; richest numeric edge properties ----

def test_merchant_harbor_invoice_hub():
    w = "merchant_harbor"
    n, *counts = one(w, "MATCH (i:Invoice) RETURN count(i), "
                        "min(COUNT { (:Trader)-[:ISSUED]->(i) }), max(COUNT { (:Trader)-[:ISSUED]->(i) }), "
                        "min(COUNT { (i)-[:BILLED_TO]->(:Buyer) }), max(COUNT { (i)-[:BILLED_TO]->(:Buyer) }), "
                        "min(COUNT { (i)-[:SHIPPED_FROM]->(:Storehouse) }), "
                        "max(COUNT { (i)-[:SHIPPED_FROM]->(:Storehouse) })")
    assert n == get_spec(w).node("Invoice").count
    assert counts == [1] * 6, "every invoice has exactly one trader, one buyer and one storehouse"
    bridged = one(w, "MATCH (t:Trader)-[:ISSUED]->(i:Invoice)-[:BILLED_TO]->(b:Buyer), "
                     "(i)-[:SHIPPED_FROM]->(s:Storehouse) RETURN count(DISTINCT i)")[0]
    assert bridged == n


def test_merchant_harbor_richest_numeric_edge_properties():
    counts = {s.world: len(numeric_edge_properties(s)) for s in all_specs("benchmark")}
    richest = counts.pop("merchant_harbor")
    assert counts and all(richest > c for c in counts.values()), counts
    spec = get_spec("merchant_harbor")
    assert db_numeric_edge_properties("merchant_harbor") == numeric_edge_properties(spec)
    per_type = {t for t, _ in numeric_edge_properties(spec)}
    assert per_type == set(spec.relationship_types), "every merchant_harbor relationship type is numeric"
