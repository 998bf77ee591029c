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


# -- a tool call already parsed (the TRL adapter's route) ------------------------------------------------
def _nested(depth: int):
    value: object = "deep"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("name, arguments", [
    ("execute_cypher", {"query": Q}), ("submit_answer", {"query": f"```cypher\n{Q}\n```"}),
    ("inspect_schema", {}), ("search_values", {"label": "City", "property": "name", "query": "port"}),
    ("ask_user", {"question": "which one?"}), ("submit_answer", {"query": ""}), ("fly", {"to": "x"}),
    ("submit_answer", {"query": '{"q": 1}'}), ("SUBMIT_ANSWER", Q), ("execute_cypher", {"query": "x" * 200_000}),
    ("search_values", {"label": _nested(40)}),
    ("execute_cypher", {"query": "RETURN 1 // </tool_call> <think>"}), (7, None),
])
def test_a_parsed_tool_call_is_the_action_its_text_parses_to(name, arguments):
    from envs.actions import action_from_tool_call, tool_call_text

    assert action_from_tool_call(name, arguments) == parse_action(tool_call_text(name, arguments))


@pytest.mark.parametrize("action", [Action(EXECUTE, Q), Action(SUBMIT, Q), Action(INSPECT, None),
                                    Action(SEARCH, {"label": "City", "property": "name", "query": "port"}),
                                    Action(ASK, "which one? </tool_call>")])
def test_action_text_reads_back_as_the_same_action(action):
    from envs.actions import action_text

    assert parse_action(action_text(action)) == action


@pytest.mark.parametrize("bad, message", [(Action("FLY", Q), "type must be one of"),
                                          (Action(EXECUTE, ""), "non-empty string"),
                                          (Action(SUBMIT, None), "non-empty string"),
                                          (Action(INSPECT, "x"), "None"), (Action(SEARCH, 3), "a dict or a string"),
                                          ("EXECUTE_CYPHER x", "expected an envs.actions.Action")])
def test_a_malformed_action_object_is_an_input_error(bad, message):
    from envs.actions import check_action
    from cypherturn.errors import InputError

    with pytest.raises(InputError, match=message):
        check_action(bad)
