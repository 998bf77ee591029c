"""The GRPO paper's four rewards, the gold derivation parser and the reward registry (no database)."""

from __future__ import annotations

import inspect
import math
import sys
import textwrap
from pathlib import Path

import pytest

import rewards
from rewards import gold_from_cypher
from rewards.completions import check_format, completion_text, extract_answer, extract_query, extract_tag
from rewards.paper import (answer_reward, format_reward, key_value_reward, make_key_value_reward,
                           make_triple_reward, normalize_cypher, parse_key_values, parse_triples, triple_reward)
from rewards.registry import RewardSpecError, parse_reward_specs, resolve, weighted

ROOT = Path(__file__).resolve().parents[1]


def respond(key_value: str, relationship: str, answer: str, reasoning: str = "Think about the schema.") -> str:
    return (f"<reasoning>\n{reasoning}\n<key_value>\n{key_value}\n</key_value>\n"
            f"<relationship>\n{relationship}\n</relationship>\n</reasoning>\n<answer>\n{answer}\n</answer>")


def chat(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


# -- the paper's examples -------------------------------------------------------------------------------

# §2.2.3 / §2.2.4 (the paper typesets the quotes typographically; Cypher needs straight ones)
DARABONT_GOLD = ("MATCH (a:Actor)-[:ACTED_IN]->(:Movie)<-[:DIRECTED]-(d:Director)\n"
                 "WHERE d.name = 'Frank Darabont'\nRETURN DISTINCT a.name")
DARABONT = dict(gold_cypher=[DARABONT_GOLD],
                gold_key_values=[[{"label": "Director", "property": "name", "value": "Frank Darabont"}]],
                gold_triples=[["(:Actor)-[:ACTED_IN]->(:Movie)", "(:Director)-[:DIRECTED]->(:Movie)"]])
DARABONT_RESPONSE = respond(
    "Frank Darabont",
    "(Actor)-[:ACTED_IN]->(Movie)\n(Movie)<-[:DIRECTED]-(Director)",  # the paper's "Relevant triples"
    'match (actor:Actor)-[:ACTED_IN]->(:Movie)<-[:DIRECTED]-(director:Director)\n'
    'where director.name = "Frank Darabont"\nreturn distinct actor.name;')

# Table 9: the supervised model's answers (wrong) and the RL model's (correct)
DATE_GOLD = "MATCH (o:Order) WHERE o.OrderDate = '1996-08-09' RETURN o.OrderID"
DATE_SFT = "MATCH (o:Order) WHERE o.OrderDate = datetime('1996-08-09T00:00:00Z') RETURN o.OrderID"
CATEGORY_GOLD = ("MATCH (c:Customer)-[:PLACED]->(o:Order)-[:CONTAINS]->(p:Product)-[:BELONGS_TO]->(cat:Category) "
                 "WHERE c.Country = 'Mexico' AND cat.CategoryName = 'Beverages' RETURN p.ProductName")
CATEGORY_SFT = ("MATCH (c:Customer)-[:PLACED]->(o:Order)-[:CONTAINS]->(p:Product) WHERE p.CategoryID = 'Beverages' "
                "AND c.Country = 'Mexico' RETURN DISTINCT p.ProductName")


def test_darabont_example_scores_four_out_of_four_plain_and_conversational():
    for completion in (DARABONT_RESPONSE, chat(DARABONT_RESPONSE)):
        for fn in (format_reward, answer_reward, key_value_reward, triple_reward):
            assert fn(["q"], [completion], **DARABONT) == [1.0], fn.__name__


def test_darabont_gold_key_values_and_triples_derive_from_the_query():
    assert gold_from_cypher.gold_key_values(DARABONT_GOLD) == DARABONT["gold_key_values"][0]
    assert gold_from_cypher.gold_triples(DARABONT_GOLD) == DARABONT["gold_triples"][0]
    derived = {"gold_cypher": DARABONT["gold_cypher"]}  # an external row: no gold kv / triples columns
    assert key_value_reward(None, [DARABONT_RESPONSE], **derived) == [1.0]
    assert triple_reward(None, [DARABONT_RESPONSE], **derived) == [1.0]


def test_northwind_date_example():
    kw = {"gold_cypher": [DATE_GOLD] * 2}
    assert gold_from_cypher.gold_key_values(DATE_GOLD) == [{"label": "Order", "property": "OrderDate",
                                                        "value": "1996-08-09"}]
    assert gold_from_cypher.gold_triples(DATE_GOLD) == []
    rl = respond("1996-08-09", "none", DATE_GOLD)
    sft = respond("datetime('1996-08-09T00:00:00Z')", "none", DATE_SFT)
    assert answer_reward(None, [rl, sft], **kw) == [1.0, -1.0]
    assert key_value_reward(None, [rl, sft], **kw) == [1.0, -1.0]
    # no relationship in the gold: "none" is the right extraction, a listed triple is not
    assert triple_reward(None, [rl, respond("1996-08-09", "(:Order)-[:CONTAINS]->(:Product)", DATE_GOLD)],
                         **kw) == [1.0, -1.0]
    # date('…') stands for its string
    assert key_value_reward(None, [respond("Order.OrderDate = date('1996-08-09')", "none", DATE_GOLD)],
                            gold_cypher=[DATE_GOLD]) == [1.0]


def test_northwind_category_example():
    kw = {"gold_cypher": [CATEGORY_GOLD] * 2}
    assert gold_from_cypher.gold_triples(CATEGORY_GOLD) == [
        "(:Customer)-[:PLACED]->(:Order)", "(:Order)-[:CONTAINS]->(:Product)", "(:Product)-[:BELONGS_TO]->(:Category)"]
    assert gold_from_cypher.gold_key_values(CATEGORY_GOLD) == [
        {"label": "Customer", "property": "Country", "value": "Mexico"},
        {"label": "Category", "property": "CategoryName", "value": "Beverages"}]
    rl = respond("Mexico, Beverages",
                 "(:Customer)-[:PLACED]->(:Order)-[:CONTAINS]->(:Product)-[:BELONGS_TO]->(:Category)", CATEGORY_GOLD)
    sft = respond("Customer.Country = Mexico\nProduct.CategoryID = Beverages",
                  "(:Customer)-[:PLACED]->(:Order), (:Order)-[:CONTAINS]->(:Product)", CATEGORY_SFT)
    assert answer_reward(None, [rl, sft], **kw) == [1.0, -1.0]
    assert triple_reward(None, [rl, sft], **kw) == [1.0, -1.0]  # the multi-hop path misses BELONGS_TO
    assert key_value_reward(None, [rl, sft], **kw) == [1.0, -1.0]  # Beverages mapped to the wrong property


# -- format -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    respond("x", "none", "RETURN 1"),
    "<reasoning><key_value>x</key_value><relationship>none</relationship></reasoning><answer>RETURN 1</answer>",
    "  \n<reasoning>\n<key_value>a</key_value> then <relationship>b</relationship> done</reasoning>\n\n"
    "<answer>```cypher\nRETURN 1\n```</answer>\n",
])
def test_format_accepts(text):
    assert check_format(text)
    assert format_reward(None, [text, chat(text)]) == [1.0, 1.0]


@pytest.mark.parametrize("text", [
    "",
    "MATCH (n) RETURN n",
    # empty tags
    respond("", "none", "RETURN 1"),
    respond("x", "  ", "RETURN 1"),
    respond("x", "none", " "),
    # wrong order: relationship before key_value; answer before reasoning
    "<reasoning><relationship>r</relationship><key_value>k</key_value></reasoning><answer>RETURN 1</answer>",
    "<answer>RETURN 1</answer><reasoning><key_value>k</key_value><relationship>r</relationship></reasoning>",
    # answer outside tags / missing tags
    "<reasoning><key_value>k</key_value><relationship>r</relationship></reasoning>\nMATCH (n) RETURN n",
    "<reasoning><key_value>k</key_value></reasoning><answer>RETURN 1</answer>",
    # key_value outside reasoning
    "<key_value>k</key_value><reasoning><relationship>r</relationship></reasoning><answer>RETURN 1</answer>",
    # text outside the tags, duplicated tags, an unclosed tag
    "Sure! " + respond("x", "none", "RETURN 1"),
    respond("x", "none", "RETURN 1") + " Hope this helps.",
    respond("x", "none", "RETURN 1") + "<answer>RETURN 2</answer>",
    respond("x <key_value>y</key_value>", "none", "RETURN 1"),
    respond("x", "none", "RETURN 1").replace("</answer>", ""),
    "<REASONING><key_value>k</key_value><relationship>r</relationship></REASONING><answer>RETURN 1</answer>",
])
def test_format_rejects(text):
    assert not check_format(text)
    assert format_reward(None, [text]) == [-1.0]


def test_completion_text_reads_the_last_assistant_message():
    conversation = [{"role": "assistant", "content": "first"}, {"role": "tool", "content": "rows"},
                    {"role": "assistant", "content": [{"type": "text", "text": "sec"}, {"type": "text", "text": "ond"}]},
                    {"role": "user", "content": "thanks"}]
    assert completion_text(conversation) == "second"
    assert completion_text("plain") == "plain"
    assert completion_text([]) == ""
    assert completion_text(None) == ""
    assert completion_text({"role": "assistant", "content": "x"}) == "x"


def test_extractors():
    text = respond("k", "r", "```cypher\nMATCH (n) RETURN n;\n```")
    assert extract_tag(text, "key_value") == "k"
    assert extract_answer(text) == "MATCH (n) RETURN n"
    assert extract_answer("MATCH (n) RETURN n") is None  # outside tags: not an answer
    assert extract_answer("<answer>  </answer>") is None
    assert extract_answer("<answer>RETURN 1</answer> <answer>RETURN 2</answer>") == "RETURN 2"
    assert extract_query("```cypher\nRETURN 3\n```", "auto") == "RETURN 3"
    assert extract_query("RETURN 4;", "auto") == "RETURN 4"
    assert extract_query("RETURN 4;", "answer") is None
    with pytest.raises(ValueError):
        extract_query("x", "bogus")


# -- answer ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,query", [
    ("SUBMIT_ANSWER MATCH (n) RETURN n.name AS name", "MATCH (n) RETURN n.name AS name"),
    ("submit_answer: MATCH (n)\nRETURN n;", "MATCH (n)\nRETURN n"),
    ("EXECUTE_CYPHER RETURN 1", "RETURN 1"),
    ("Action: SUBMIT_ANSWER ```cypher\nRETURN 2\n```", "RETURN 2"),
    ("ASK_USER which one?\nSUBMIT_ANSWER RETURN 3", None),   # the environment plays the first action: a question
    ("<reasoning>x</reasoning><answer>RETURN 4</answer>", "RETURN 4"),
    ("SUBMIT_ANSWER", None), ("no action here", None), ("", None),
])
def test_action_extraction_reads_a_response_as_the_environment_reads_one_action(text, query):
    from envs.actions import SUBMIT, EXECUTE, parse_action

    assert extract_query(text, "action") == query
    parsed = parse_action(text)
    if query is not None and "<answer>" not in text:
        assert parsed.type in (SUBMIT, EXECUTE) and parsed.argument.rstrip(";") == query


@pytest.mark.parametrize("pred", [
    "match (e:Emperor)-[:GOVERNS]->(p:Province) return p.name as name",                  # keyword case
    "MATCH (x:Emperor)  -[:GOVERNS]->\n  (y:Province)\nRETURN y.name AS name ;",          # renaming, spaces
    "MATCH (e:`Emperor`)-[:`GOVERNS`]->(p:Province) RETURN p.`name` AS name",             # backticks
    "MATCH (e:Emperor)-[:GOVERNS]->(p:Province) // the provinces\nRETURN p.name AS name",  # comment
])
def test_answer_normalization_equal(pred):
    gold = "MATCH (e:Emperor)-[:GOVERNS]->(p:Province) RETURN p.name AS name"
    assert normalize_cypher(pred) == normalize_cypher(gold)
    assert answer_reward(None, [f"<answer>{pred}</answer>"], gold_cypher=[gold]) == [1.0]


@pytest.mark.parametrize("pred", [
    "MATCH (e:Emperor)-[:GOVERNS]->(p:Province) RETURN p.name AS province",   # a different column name
    "MATCH (e:emperor)-[:GOVERNS]->(p:Province) RETURN p.name AS name",       # labels are case-sensitive
    "MATCH (e:Emperor)<-[:GOVERNS]-(p:Province) RETURN p.name AS name",       # direction
    "MATCH (e:Emperor)-[:GOVERNS]->(p:Province) RETURN e.name AS name",       # a different variable
    "MATCH (e:Emperor)-[:GOVERNS]->(p:Province) RETURN DISTINCT p.name AS name",
])
def test_answer_normalization_different(pred):
    gold = "MATCH (e:Emperor)-[:GOVERNS]->(p:Province) RETURN p.name AS name"
    assert normalize_cypher(pred) != normalize_cypher(gold)
    assert answer_reward(None, [f"<answer>{pred}</answer>"], gold_cypher=[gold]) == [-1.0]


def test_answer_normalization_details():
    assert normalize_cypher("RETURN 'it''s'") != ""  # odd input never raises
    assert normalize_cypher("MATCH (n) WHERE n.x = \"a'b\" RETURN n") == normalize_cypher("MATCH (n) WHERE n.x = 'a\\'b' RETURN n")
    assert normalize_cypher("RETURN COUNT(*) AS c, 1.50 AS x") == normalize_cypher("return count(*) AS c, 1.5 AS x")
    # strings are never rewritten inside: case and spaces in literals matter
    assert normalize_cypher("MATCH (n) WHERE n.x = 'A  b' RETURN n") != normalize_cypher("MATCH (n) WHERE n.x = 'a b' RETURN n")
    # WITH aliases, comprehension variables and path variables are renamed; property keys named like keywords stay
    a = ("MATCH p = (t:Temple {order: 'x'})-[:WORSHIPS]->(d) WITH t, count(d) AS n, [x IN collect(d) | x.name] AS ds "
         "RETURN t.order AS order, n, ds ORDER BY n DESC")
    b = ("match q = (tt:Temple {order: 'x'})-[:WORSHIPS]->(dd) with tt, COUNT(dd) as k, [y in collect(dd) | y.name] as zs "
         "return tt.order as order, k, zs order by k desc")
    assert normalize_cypher(a) == normalize_cypher(b)


def test_answer_reward_on_the_benchmarks_gold_style():
    gold = ("MATCH (a_n2:Emperor {name: 'Quabraeo the Elder'})<-[:SWORN_TO]-(n2:General)\nWITH DISTINCT n2\n"
            "WHERE n2.victories > 33\nRETURN DISTINCT n2.name AS name")
    pred = ("MATCH (e:Emperor {name: \"Quabraeo the Elder\"})<-[:SWORN_TO]-(g:General) WITH DISTINCT g "
            "WHERE g.victories > 33 RETURN DISTINCT g.name AS name")
    kw = {"gold_cypher": [gold, gold, gold]}
    assert answer_reward(None, [f"<answer>{pred}</answer>", pred, "<answer></answer>"], **kw) == [1.0, -1.0, -1.0]
    with pytest.raises(ValueError, match="gold_cypher"):
        answer_reward(None, ["<answer>RETURN 1</answer>"])


# -- key-values ----------------------------------------------------------------------------------------------

def test_key_value_grammar():
    items = parse_key_values(
        "- Director.name = 'Frank Darabont'\n* year: 1994\n"
        "{label: Order, property: OrderDate, value: '1996-08-09'}\n"
        "label: Customer, property: Country, value: Mexico\n"
        "Helen, financial crises..., date('1996-08-09'); \"Smith, John\"\n"
        "(:Legion).strength == 3000\nnone\n1. true")
    assert items == [("director", "name", "frank darabont"), (None, "year", "1994.0"),
                     ("order", "orderdate", "1996-08-09"), ("customer", "country", "mexico"),
                     (None, None, "helen"), (None, None, "financial crises"), (None, None, "1996-08-09"),
                     (None, None, "smith, john"), ("legion", "strength", "3000.0"), (None, None, "true")]
    assert parse_key_values("none") == [] and parse_key_values("") == [] and parse_key_values(None) == []


def test_key_value_matching_rules():
    gold = [[{"label": "Legion", "property": "strength", "value": 3000},
             {"label": "Emperor", "property": "name", "value": "Quabro Tasherk"}]]
    kw = {"gold_key_values": gold}

    def score(content):
        return key_value_reward(None, [respond(content, "none", "RETURN 1")], **kw)[0]

    assert score("3000, quabro  TASHERK") == 1.0                          # bare values, case and spaces
    assert score("Legion.strength = 3000.0\nEmperor.name = 'Quabro Tasherk'") == 1.0
    assert score("strength: '3000'\nname: Quabro Tasherk") == 1.0
    assert score("General.strength = 3000\nEmperor.name = Quabro Tasherk") == -1.0  # wrong label
    assert score("Legion.morale = 3000\nQuabro Tasherk") == -1.0                    # wrong property
    assert score("3000") == -1.0                                                   # not a superset
    assert score("3000, Quabro Tasherk, Rome, 12, Gaul") == 1.0                     # 5 <= 2*2+1 items
    assert score("3000, Quabro Tasherk, Rome, 12, Gaul, Egypt") == -1.0             # over the guard
    # the Hugging Face export's value_json form and booleans
    hf = {"gold_key_values": [[{"label": "Emperor", "property": "deified", "value_json": "true"}]]}
    assert key_value_reward(None, [respond("Emperor.deified = true", "none", "RETURN 1")], **hf) == [1.0]
    assert key_value_reward(None, [respond("false", "none", "RETURN 1")], **hf) == [-1.0]


def test_key_value_schema_dump_and_empty_tags():
    kw = {"gold_key_values": [[{"label": "Province", "property": "climate", "value": "arid"}]]}
    dump = ", ".join(["arid", "temperate", "alpine", "coastal", "tropical", "humid"])
    assert key_value_reward(None, [respond(dump, "none", "RETURN 1")], **kw) == [-1.0]
    assert key_value_reward(None, ["<reasoning><key_value></key_value></reasoning>"], **kw) == [-1.0]
    assert key_value_reward(None, ["arid"], **kw) == [-1.0]  # outside the tag: nothing extracted


# -- triples ---------------------------------------------------------------------------------------------------

def test_triple_grammar_and_direction():
    got = [str(t) for t in parse_triples(
        "Suppliers -[:SUPPLIES]-> Product, (:Person)-[:ACTED_IN]->(:Movie)\n"
        "(a:A)-[r:R|S]-(b:B)<-[:T]-(C); (x)-[:NOPE]->; garbage")]
    assert got == ["(:suppliers)-[:supplies]->(:product)", "(:person)-[:acted_in]->(:movie)",
                   "(:a)-[:r]-(:b)", "(:a)-[:s]-(:b)", "(:c)-[:t]->(:b)"]
    gold = {"gold_triples": [["(:Emperor)-[:GOVERNS]->(:Province)"]]}

    def score(content, **options):
        fn = make_triple_reward(**options) if options else triple_reward
        return fn(None, [respond("x", content, "RETURN 1")], **gold)[0]

    assert score("(:Province)<-[:GOVERNS]-(:Emperor)") == 1.0
    assert score("(e:Emperor)-[g:GOVERNS]->(p:Province)") == 1.0
    assert score("Emperor -[:GOVERNS]-> Province") == 1.0
    assert score("(:emperor)-[:governs]->(:province)") == 1.0
    assert score("(:Emperor)-[:GOVERNS]-(:Province)") == 1.0          # undirected covers either way
    assert score("(:Province)-[:GOVERNS]->(:Emperor)") == -1.0         # wrong direction
    assert score("(:Emperor)-[:RULES]->(:Province)") == -1.0
    assert score("none") == -1.0
    assert score("`Emperor` -[:`GOVERNS`]-> `Province`") == 1.0


ANCIENT_EMPIRE_SCHEMA = ["(:Legion)-[:COMMANDED_BY]->(:General)", "(:Province)-[:CONTAINS]->(:City)",
                         "(:Province)-[:GARRISONS]->(:Legion)", "(:Emperor)-[:GOVERNS]->(:Province)",
                         "(:City)-[:HOSTS]->(:Temple)", "(:General)-[:SWORN_TO]->(:Emperor)",
                         "(:Temple)-[:WORSHIPS]->(:Deity)"]


def test_triple_schema_dump_is_refused():
    kw = {"gold_triples": [["(:Emperor)-[:GOVERNS]->(:Province)"]]}
    dump = respond("x", "\n".join(ANCIENT_EMPIRE_SCHEMA), "RETURN 1")
    assert triple_reward(None, [dump], **kw) == [-1.0]
    near = respond("x", "\n".join(ANCIENT_EMPIRE_SCHEMA[:3]), "RETURN 1")  # three items, none the gold
    assert triple_reward(None, [near], **kw) == [-1.0]
    ok = respond("x", "\n".join(ANCIENT_EMPIRE_SCHEMA[2:5]), "RETURN 1")  # 3 items incl. the gold: 3 <= 2*1+1
    assert triple_reward(None, [ok], **kw) == [1.0]
    loose = make_triple_reward(max_factor=10, slack=0)
    assert loose(None, [dump], **kw) == [1.0]


def test_empty_gold_modes():
    kw = {"gold_triples": [[], []], "gold_key_values": [[], []]}
    said_none = respond("none", "none", "MATCH (n:Legion) RETURN count(n)")
    listed = respond("Legion", "(:Province)-[:GARRISONS]->(:Legion)", "MATCH (n:Legion) RETURN count(n)")
    assert triple_reward(None, [said_none, listed], **kw) == [1.0, -1.0]
    assert key_value_reward(None, [said_none, listed], **kw) == [1.0, -1.0]
    assert make_triple_reward(empty_gold="pass")(None, [said_none, listed], **kw) == [1.0, 1.0]
    assert make_key_value_reward(empty_gold="skip")(None, [said_none, listed], **kw) == [None, None]
    with pytest.raises(ValueError):
        make_triple_reward(empty_gold="maybe")
    with pytest.raises(ValueError):
        make_key_value_reward(max_factor=0.5)


def test_the_superset_rewards_pickle_and_score_the_same():
    import pickle

    kw = {"gold_triples": [[], ["(:Province)-[:GARRISONS]->(:Legion)"], None],
          "gold_key_values": [[], [{"label": "Legion", "property": "name", "value": "Legion"}], None],
          "gold_cypher": [None, None, DARABONT_GOLD]}
    said_none = respond("none", "none", "RETURN 1")
    listed = respond("Legion", "(:Province)-[:GARRISONS]->(:Legion)", "RETURN 1")
    completions = [said_none, listed, DARABONT_RESPONSE]
    for fn in (key_value_reward, triple_reward, make_key_value_reward(max_factor=5, slack=0, empty_gold="skip"),
               make_triple_reward(empty_gold="pass")):
        clone = pickle.loads(pickle.dumps(fn))
        assert clone is not fn and clone.__name__ == fn.__name__ and repr(clone) == repr(fn)
        scores = fn(None, completions, **kw)
        assert clone(None, completions, **kw) == scores and scores[1:] == [1.0, 1.0]
    assert make_triple_reward(empty_gold="skip")(None, completions, **kw)[0] is None


def test_gold_columns_must_align_and_exist():
    with pytest.raises(ValueError, match="2 entries for 1"):
        triple_reward(None, ["x"], gold_triples=[[], []])
    with pytest.raises(ValueError, match="gold_triples"):
        triple_reward(None, ["x"])
    with pytest.raises(ValueError, match="not of the form"):
        triple_reward(None, ["x"], gold_triples=[["GOVERNS"]])


def test_the_four_rewards_sum_like_the_paper():
    wrong = respond("Frank Darabont", "(:Director)-[:DIRECTED]->(:Movie)", "MATCH (d:Director) RETURN d")
    totals = [sum(fn(None, [c], **DARABONT)[0] for fn in (format_reward, answer_reward, key_value_reward, triple_reward))
              for c in (DARABONT_RESPONSE, wrong, "MATCH (d:Director) RETURN d")]
    assert totals == [4.0, 0.0, -4.0]


# -- the gold derivation parser ---------------------------------------------------------------------------------

def test_gold_from_cypher_patterns_and_comparisons():
    q = ("MATCH (a_x:Emperor {name: 'Quabro'})-[:GOVERNS]->(p:Province)\nWITH DISTINCT p\n"
         "MATCH (p)-[:GARRISONS*1..]->(l:Legion)\nWITH DISTINCT l WHERE l.strength > 3000 AND "
         "l.raised_on < date('0200-01-01') AND NOT coalesce(l.motto = \"Vinci\", false)\n"
         "RETURN DISTINCT l.name AS name")
    parsed = gold_from_cypher.parse(q)
    assert [str(t) for t in parsed.triples] == ["(:Emperor)-[:GOVERNS]->(:Province)", "(:Province)-[:GARRISONS]->(:Legion)"]
    assert parsed.key_values == [
        {"label": "Emperor", "property": "name", "value": "Quabro"},
        {"label": "Legion", "property": "strength", "value": 3000},
        {"label": "Legion", "property": "raised_on", "value": "0200-01-01"},
        {"label": "Legion", "property": "motto", "value": "Vinci"}]
    q2 = ("MATCH (u:User)-[r:WROTE {stars: 5}]->(x)-[:REVIEWS]-(b:Business) WHERE toLower(b.name) CONTAINS 'pizza' "
          "AND b.city IN ['Rome', 'Ostia'] AND 1990 <= r.year AND exists { (b)-[:IN_CATEGORY]->(:Category {name: 'X'}) } "
          "RETURN b {.name, .city} AS business, [(b)<-[:REVIEWS]-(rv) | rv.text] AS texts")
    parsed = gold_from_cypher.parse(q2)
    assert [str(t) for t in parsed.triples] == ["(:Business)-[:IN_CATEGORY]->(:Category)"]  # x and rv unlabelled
    assert {(kv["label"], kv["property"], kv["value"]) for kv in parsed.key_values} == {
        ("WROTE", "stars", 5), ("Business", "name", "pizza"), ("Business", "city", "Rome"),
        ("Business", "city", "Ostia"), ("WROTE", "year", 1990), ("Category", "name", "X")}
    schema = ["(:User)-[:WROTE]->(:Review)", "(:Review)-[:REVIEWS]->(:Business)", "(:Business)-[:IN_CATEGORY]->(:Category)"]
    assert gold_from_cypher.gold_triples(q2, schema) == [
        "(:User)-[:WROTE]->(:Review)", "(:Business)-[:REVIEWS]-(:Review)", "(:Business)-[:IN_CATEGORY]->(:Category)",
        "(:Review)-[:REVIEWS]->(:Business)"]
    assert gold_from_cypher.parse("MATCH p=shortestPath((a:Person {name:'A'})-[*]-(b:Person)) RETURN length(p)").key_values == [
        {"label": "Person", "property": "name", "value": "A"}]


@pytest.mark.parametrize("junk", ["", "(((", "MATCH (n:", "'unterminated", "RETURN $x = n.y", "\x00", "[:R]->(:B)"])
def test_gold_from_cypher_never_raises(junk):
    parsed = gold_from_cypher.parse(junk)
    assert isinstance(parsed.triples, list) and isinstance(parsed.key_values, list)


def test_gold_from_cypher_matches_the_builders_exact_annotations(tmp_path):
    """The derived golds equal what the chain builder recorded, on every chain mode's query shape."""
    from benchmark import chain

    anchored = chain.open_anchored("Emperor", "name", "Quabro Tasherk", "GOVERNS", True, "Province", "name", "n1")
    s = anchored.new_set
    steps = [anchored,
             chain.expand(s, "GARRISONS", True, "Legion", "name", "n2"),
             chain.expand(s, "GARRISONS", True, "Legion", "name", "n2", recursive=True),
             chain.pivot(s, "population", True, "CONTAINS", True, "City", "name", "n3"),
             chain.count(s),
             chain.aggregate_numeric(s, "AGG_AVG", "tax_rate"),
             chain.open_filtered("General", "name", "rank", "prefect", "n5")]
    narrowed = chain.narrow(s, "name", [chain.equals("n1", "Province", "climate", "arid"),
                                        chain.compare("n1", "Province", "population", True, 50000)])
    steps += [narrowed, chain.contrast(narrowed.new_set, "name")]
    import datetime as dt
    steps.append(chain.narrow(chain.expand(s, "GARRISONS", True, "Legion", "name", "n2").new_set, "name",
                              [chain.compare("n2", "Legion", "raised_on", False, dt.date(120, 5, 1))]))
    for step in steps:
        assert gold_from_cypher.gold_triples(step.cypher) == list(step.triples), step.cypher
        assert gold_from_cypher.gold_key_values(step.cypher) == [kv.to_dict() for kv in step.key_values], step.cypher


# -- the registry ------------------------------------------------------------------------------------------------

def test_builtins_resolve_with_trl_signatures():
    for name in rewards.BUILTINS:
        fn = resolve(name)
        assert callable(fn) and fn.__name__.endswith("_reward")
        params = inspect.signature(fn).parameters.values()
        assert any(p.kind == p.VAR_KEYWORD for p in params)
    assert resolve("format") is format_reward
    assert resolve("rewards.paper:answer_reward") is answer_reward
    assert rewards.execution_reward is resolve("execution")


def test_parse_reward_specs_and_weighted(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    parsed = parse_reward_specs(["format:1", "execution:2", "my_rewards:concise_query_reward:0.5", "triple",
                                 {"name": "answer", "weight": 0.25}])
    assert [(name, weight) for name, _, weight in parsed] == [
        ("format", 1.0), ("execution", 2.0), ("my_rewards:concise_query_reward", 0.5), ("triple", 1.0),
        ("answer", 0.25)]
    import my_rewards

    assert parsed[2][1] is my_rewards.concise_query_reward
    funcs, weights = weighted(["format:1", "key_value:-0.5"])
    assert funcs == [format_reward, key_value_reward] and weights == [1.0, -0.5]
    configured = parse_reward_specs([{"name": "triple", "options": {"max_factor": 10, "slack": 0}}])[0][1]
    assert configured is not triple_reward and configured.__name__ == "triple_reward"


def test_the_readme_example_runs(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    fn = resolve("my_rewards:concise_query_reward")
    short = respond("x", "none", "MATCH (n:Legion) RETURN count(n) AS count")
    long_ = respond("x", "none", "MATCH (n:Legion) " + "WHERE n.strength > 1 " * 40 + "RETURN n.name AS name")
    assert fn(["q"] * 4, [short, chat(long_), "no answer", short],
              gold_cypher=["RETURN 1", "RETURN 1", "RETURN 1", None]) == [0.0, -1.0, -1.0, None]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    source = (ROOT / "examples" / "my_rewards.py").read_text(encoding="utf-8")
    body = source[source.index("def concise_query_reward"):].strip()
    assert body in readme  # the README shows the very code that this test runs


def _write_dist(tmp_path: Path, entries: str) -> Path:
    site = tmp_path / "site"
    dist = site / "my_plugin-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-plugin\nVersion: 0.1\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text(entries, encoding="utf-8")
    return site


def test_entry_point_rewards(tmp_path, monkeypatch):
    site = _write_dist(tmp_path, textwrap.dedent("""\
        [cypherturn.rewards]
        concise = my_rewards:concise_query_reward
        broken = my_rewards_missing_module:fn
        """))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    import my_rewards

    assert resolve("concise") is my_rewards.concise_query_reward
    assert parse_reward_specs(["concise:0.3"])[0][2] == 0.3
    with pytest.raises(RewardSpecError, match="broken.*fails to load"):
        resolve("broken")
    with pytest.raises(RewardSpecError) as err:
        resolve("nope")
    assert "concise" in str(err.value)  # installed entry points are listed in the message


@pytest.fixture
def bad_module(tmp_path, monkeypatch):
    (tmp_path / "bad_rewards.py").write_text(textwrap.dedent("""\
        NOT_CALLABLE = 3
        def no_kwargs(prompts, completions):
            return [0.0] * len(completions)
        def one_positional(completions, **kwargs):
            return [0.0] * len(completions)
        def star_args(*args, **kwargs):
            return [0.0] * len(args[1])
        """), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("bad_rewards", None)
    yield "bad_rewards"
    sys.modules.pop("bad_rewards", None)


def test_bad_specs_fail_at_start_up_with_clear_messages(bad_module):
    def message(spec):
        with pytest.raises(RewardSpecError) as err:
            parse_reward_specs([spec])
        return str(err.value)

    m = message("exectuion:2")
    assert "unknown reward 'exectuion'" in m and "format, answer, key_value, triple, execution" in m
    assert "not callable" in message(f"{bad_module}:NOT_CALLABLE")
    assert "no **kwargs" in message(f"{bad_module}:no_kwargs")
    assert "needs 2" in message(f"{bad_module}:one_positional")
    assert "cannot import module" in message("no_such_package.mod:fn")
    assert "has no attribute" in message(f"{bad_module}:missing")
    assert "weight" in message("format:nan") and "weight" in message({"name": "format", "weight": "heavy"})
    assert "takes no options" in message({"name": "format", "options": {"x": 1}})
    assert "bad options" in message({"name": "execution", "options": {"no_such_option": 1}})
    assert "only accepted for built-in" in message({"name": f"{bad_module}:star_args", "options": {"x": 1}})
    assert "keys name, weight, options" in message({"weight": 1})
    assert resolve(f"{bad_module}:star_args")(None, [1, 2]) == [0.0, 0.0]
    with pytest.raises(RewardSpecError):
        resolve("")
    with pytest.raises(RewardSpecError):
        resolve(lambda completions: [])  # a callable spec is checked too


def test_rewards_package_imports_without_the_driver_for_paper_rewards():
    code = ("import sys, rewards; from rewards import weighted; weighted(['format', 'answer', 'key_value', 'triple']);"
            "print('neo4j' in sys.modules)")
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


def test_nan_free_scores():
    texts = [DARABONT_RESPONSE, "", "<answer>", respond("∅", "⟂", "RETURN '\ud800'")]
    for fn in (format_reward, answer_reward, key_value_reward, triple_reward):
        scores = fn(None, texts, **{k: v * len(texts) for k, v in DARABONT.items()})
        assert all(s in (1.0, -1.0) and not math.isnan(s) for s in scores)


def test_reward_specs_cli_resolves_weights_and_rejects_bad_specs():
    import json
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "examples"), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-m", "rewards", "--reward", "format:1", "--reward", "execution:2",
                          "--reward", "my_rewards:concise_query_reward:0.5", "--json"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [r["weight"] for r in rows] == [1.0, 2.0, 0.5]
    assert rows[2]["function"].endswith("concise_query_reward")
    bad = subprocess.run([sys.executable, "-m", "rewards", "--reward", "no_such_reward:1"], capture_output=True,
                         text=True, timeout=120, env=env)
    assert bad.returncode == 2 and "format" in bad.stderr  # the message lists the built-ins
