"""The action grammar: every accepted form, clear errors, and property-based fuzzing (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.actions import ASK, EXECUTE, INSPECT, SEARCH, SUBMIT, Action, ParseError, parse_action

Q = "MATCH (e:Emperor) RETURN e.name AS name"


@pytest.mark.parametrize("text, expected", [
    (f"EXECUTE_CYPHER {Q}", Action(EXECUTE, Q)),
    (f"execute_cypher: {Q}", Action(EXECUTE, Q)),
    (f"Action: SUBMIT_ANSWER\n```cypher\n{Q}\n```", Action(SUBMIT, Q)),
    (f"I will check first.\nEXECUTE_CYPHER {Q}", Action(EXECUTE, Q)),
    ("INSPECT_SCHEMA", Action(INSPECT, None)),
    ('SEARCH_VALUES {"label": "Emperor", "property": "name", "query": "quab"}',
     Action(SEARCH, {"label": "Emperor", "property": "name", "query": "quab"})),
    ("ASK_USER Which emperor do you mean?", Action(ASK, "Which emperor do you mean?")),
    (f"<SUBMIT_ANSWER>{Q}</SUBMIT_ANSWER>", Action(SUBMIT, Q)),
    (f'<tool_call>{{"name": "execute_cypher", "arguments": {{"query": "{Q}"}}}}</tool_call>', Action(EXECUTE, Q)),
    (f'<think>hmm, SUBMIT_ANSWER x</think><tool_call>{{"name": "SUBMIT_ANSWER", "arguments": "{Q}"}}</tool_call>',
     Action(SUBMIT, Q)),
    ('<tool_call>{"name": "inspect_schema", "arguments": {}}</tool_call>', Action(INSPECT, None)),
    ('<tool_call>{"name": "search_values", "arguments": {"label": "City", "property": "name", "query": "port"}}</tool_call>',
     Action(SEARCH, {"label": "City", "property": "name", "query": "port"})),
    (f'{{"action": "SUBMIT_ANSWER", "input": "{Q}"}}', Action(SUBMIT, Q)),
    (f'{{"name": "ask_user", "arguments": {{"question": "which one?"}}}}', Action(ASK, "which one?")),
    (f"<reasoning><key_value>Emperor.name</key_value><relationship>(:Emperor)</relationship></reasoning>"
     f"<answer>{Q}</answer>", Action(SUBMIT, Q)),
])
def test_accepted_forms(text, expected):
    assert parse_action(text) == expected


@pytest.mark.parametrize("text, message", [
    ("", "empty"), ("just chatting", "no action found"), ("EXECUTE_CYPHER", "needs a non-empty query"),
    ("<tool_call>{oops</tool_call>", "valid JSON"), ('<tool_call>{"name": "fly", "arguments": {}}</tool_call>',
                                                     "unknown action 'fly'"),
    ('{"name": "submit_answer", "arguments": {}}', "needs a non-empty query"), (None, "must be text"),
])
def test_malformed_actions_get_clear_errors(text, message):
    result = parse_action(text)
    assert isinstance(result, ParseError) and message in result.message and "EXECUTE_CYPHER" in result.message


@settings(max_examples=400, deadline=None)
@given(st.one_of(
    st.text(),
    st.builds(lambda a, b: a + b, st.sampled_from(["EXECUTE_CYPHER ", "SUBMIT_ANSWER ", "SEARCH_VALUES ", "ASK_USER ",
                                                  "INSPECT_SCHEMA", "<tool_call>", "<answer>", "{\"name\": ",
                                                  "<think>", "```"]), st.text()),
    st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                 lambda c: st.lists(c) | st.dictionaries(st.text(), c)).map(repr),
))
def test_the_parser_never_raises_and_always_answers(text):
    result = parse_action(text)
    assert isinstance(result, (Action, ParseError))
    if isinstance(result, ParseError):
        assert result.message
    else:
        assert result.type in (EXECUTE, INSPECT, SEARCH, ASK, SUBMIT)
