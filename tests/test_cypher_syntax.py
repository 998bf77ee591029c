"""The Cypher toolkit (graphs.cypher_syntax): lexer offsets, the keyword rule, brackets, clauses, names."""

from __future__ import annotations

import pytest

from graphs import cypher_guard
from graphs.cypher_syntax import (CypherParseError, Token, bracket_pairs, decode_string, enclosing_brackets,
                                  final_return, find_top, follows_as, group_end, is_keyword, name_of,
                                  nesting_depth, parse, plain_name, projection_is_aggregating, split_clauses,
                                  split_union, tokenize)


def test_tokens_carry_offsets_and_compare_by_text():
    q = "MATCH (n:`My Label`) // c\nWHERE n.x = 'a b' RETURN n"
    toks = tokenize(q)
    assert all(q[t.start:t.end] == t.text for t in toks)
    assert [t.kind for t in toks[:6]] == ["word", "punct", "word", "punct", "quoted", "punct"]
    assert "c" not in [t.text for t in toks]  # the comment is dropped
    assert Token("word", "MATCH") == toks[0] and toks[0].start == 0 and toks[0].end == 5
    assert toks[0].upper == "MATCH" and Token("string", "'x'").upper == ""
    assert cypher_guard.tokenize is tokenize and cypher_guard.Token is Token  # the guard lexes with the toolkit's lexer


@pytest.mark.parametrize("query, index, expected", [
    ("MATCH (n) RETURN n", 0, True),
    ("RETURN n.limit", 3, False),        # a property key
    ("MATCH (n:Match) RETURN n", 4, False),  # a label
    ("RETURN $return", 2, False),        # a parameter
    ("RETURN {count: 1}", 2, False),     # a map key
    ("MATCH (set:X) RETURN 1", 2, False),  # a labelled variable
    ("RETURN 'MATCH'", 1, False),        # not a word
])
def test_the_keyword_rule(query, index, expected):
    assert is_keyword(tokenize(query), index) is expected


def test_follows_as():
    toks = tokenize("RETURN x AS limit")
    assert follows_as(toks, 3) and not follows_as(toks, 1) and not follows_as(toks, 0)


def test_bracket_pairs_are_strict():
    toks = tokenize("RETURN [x IN (1) | {a: x}]")
    pairs = bracket_pairs(toks)
    assert pairs[1] == len(toks) - 1 and pairs[len(toks) - 1] == 1
    with pytest.raises(CypherParseError, match="unbalanced"):
        bracket_pairs(tokenize("RETURN (]"))
    with pytest.raises(CypherParseError, match="unclosed"):
        bracket_pairs(tokenize("RETURN ([1]"))


def test_lenient_brackets():
    toks = tokenize("f({a: [x)] }")  # a ')' closes the '[' it meets: lenient
    around = enclosing_brackets(toks)
    assert around[0] == ("", 0, 0) and around[1] == ("", 0, 0) and around[3] == ("{", 2, 1)
    assert around[5] == ("{", 2, 1) and around[6] == ("[", 3, 1)  # a bracket is not inside itself
    assert around[7] == ("{", 2, 1) and around[8] == ("(", 1, 0) and around[9] == ("", 0, 0)
    assert nesting_depth(toks) == 3 and nesting_depth(tokenize("RETURN 1")) == 0
    assert nesting_depth(tokenize(")))(((")) == 3  # a closing bracket with nothing open is ignored
    toks = tokenize("(a WHERE f(x) = 1) RETURN")
    assert group_end(toks, 1) == 9 and toks[9].text == ")"
    assert group_end(toks, 10) == len(toks)


def test_clauses_unions_and_the_final_return():
    q = ("MATCH (a:A) WHERE a.x STARTS WITH 'RETURN' OPTIONAL MATCH (a)-->(b) CALL { WITH a RETURN 1 AS one } "
         "WITH a, count(b) AS n ORDER BY n RETURN a UNION ALL MATCH (c) RETURN c AS a ORDER BY a")
    toks, pairs = parse(q + ";")
    parts = split_union(toks, pairs, 0, len(toks))
    assert len(parts) == 2
    first = split_clauses(toks, pairs, *parts[0])
    assert [c.keyword for c in first] == ["MATCH", "OPTIONAL MATCH", "CALL", "WITH", "RETURN"]
    with_clause = first[3]
    assert toks[find_top(toks, pairs, with_clause.body, with_clause.end, "ORDER")].text == "ORDER"
    assert projection_is_aggregating(toks, pairs, with_clause.body, with_clause.end)
    assert not projection_is_aggregating(toks, pairs, first[4].body, first[4].end)
    _, _, last = final_return(q)
    assert toks[last.start].text == "RETURN" and toks[last.body].text == "c"
    assert final_return("MATCH (n) WITH n ORDER BY n.x RETURN n") is not None
    assert final_return("MATCH (n)") is None
    with pytest.raises(CypherParseError):
        split_clauses(*parse("n RETURN n"), 0, 3)
    with pytest.raises(CypherParseError):
        final_return("MATCH (n RETURN n")


def test_an_alias_and_an_aggregate_in_a_subquery_expression_are_not_what_they_spell():
    toks, pairs = parse("MATCH (n) RETURN n.x AS order, COUNT { (n)--() } AS c")
    ret = split_clauses(toks, pairs, 0, len(toks))[-1]
    assert find_top(toks, pairs, ret.body, ret.end, "ORDER") is None
    assert not projection_is_aggregating(toks, pairs, ret.body, ret.end)


def test_names_and_strings():
    assert name_of(Token("word", "Movie")) == "Movie"
    assert name_of(Token("quoted", "`a``b`")) == "a`b"
    assert name_of(Token("string", "'x'")) is None and name_of(None) is None
    assert plain_name(Token("quoted", "`Movie`")) == "Movie"
    assert plain_name(Token("quoted", "`My Movie`")) is None
    assert plain_name(Token("quoted", "`Movie")) is None  # unterminated
    assert decode_string("'it\\'s'") == "it's" and decode_string('"a\\nb"') == "a\nb"
    assert decode_string("'\\u00e9'") == "é" and decode_string("'open") == "open"


def test_the_vocabulary_holds_every_word_of_every_set_upper_cased():
    """VOCABULARY is Cypher's one word list (the benchmark's leak check reads it; it had its own)."""
    from graphs import cypher_syntax as cs
    sets = [cs.KEYWORDS, cs.CALLABLE_KEYWORDS, cs.CLAUSE_KEYWORDS, cs.CLAUSE_OPENERS, cs.WRITE_KEYWORDS,
            cs.ADMIN_KEYWORDS, cs.PREFIX_KEYWORDS, cs.SUBQUERY_EXPRESSIONS, cs.STATEMENT_WORDS,
            set(cs.WORD_OPERATORS), cs.AGGREGATE_FUNCTIONS, cs.TEMPORAL_FUNCTIONS]
    assert cs.VOCABULARY == {w.upper() for s in sets for w in s}
    assert all(w == w.upper() for w in cs.VOCABULARY)
    assert {"ON", "CSV", "INDEX", "CONSTRAINT", "SUM", "DATE", "MERGE", "SHOW"} <= cs.VOCABULARY
    assert "order" not in cs.VOCABULARY and "PROVINCE" not in cs.VOCABULARY


@pytest.mark.parametrize("value", ["Dreleth Leaf", "O'Brien", "back\\slash", "both \\' kinds", "", "naïve – ünïcode"])
def test_string_literal_is_read_back_by_decode_string_and_the_tokenizer(value):
    from graphs.cypher_syntax import string_literal

    text = string_literal(value)
    assert decode_string(text) == value
    toks = tokenize(f"RETURN {text} AS v")
    assert [decode_string(t.text) for t in toks if t.kind == "string"] == [value]
