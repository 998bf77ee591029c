"""The action grammar shared by evaluation and training: text from a model -> one of five actions.

Accepted forms, tried in this order (``<think>…</think>`` blocks are removed first):

1. Hermes-style tool call (what Qwen2.5 emits)::

       <tool_call>{"name": "execute_cypher", "arguments": {"query": "MATCH (n) RETURN n LIMIT 1"}}</tool_call>

   Tools: ``execute_cypher(query)``, ``inspect_schema()``, ``search_values(query, label, property)`` (label and property optional, together),
   ``ask_user(question)``, ``submit_answer(query)``; names are case-insensitive and may also be the
   upper-case action names.
2. A JSON object: ``{"action": "EXECUTE_CYPHER", "input": "MATCH …"}`` (``input``, ``payload``,
   ``query``, ``question`` or ``arguments`` hold the argument) or ``{"name": …, "arguments": …}``.
3. Plain tagged text: a line starting with the action name, the argument after it (the rest of the
   text, code fences removed)::

       EXECUTE_CYPHER MATCH (e:Emperor) RETURN e.name
       SEARCH_VALUES {"label": "Emperor", "property": "name", "query": "quabro"}
       INSPECT_SCHEMA

   ``<EXECUTE_CYPHER>…</EXECUTE_CYPHER>`` tags are accepted too.
4. The GRPO paper's response format: ``<reasoning>…</reasoning><answer>CYPHER</answer>`` is a
   SUBMIT_ANSWER of the answer.

A caller that already holds a parsed tool call (the TRL adapter: TRL parses the model's calls itself)
builds the action with ``action_from_tool_call(name, arguments)``, which gives exactly what
``parse_action`` gives for the same call written as ``<tool_call>`` text (``tool_call_text``), without
writing and re-reading that text; ``action_text`` is an action's canonical text, that tool call.

``parse_action`` never raises: text that matches none of these, or whose argument is missing, gives a
``ParseError`` whose message tells the model what to send instead. Parsing is bounded: an action over
``MAX_ACTION_CHARS`` characters, or JSON nested deeper than ``MAX_JSON_DEPTH``, is a ParseError (never a
RecursionError), and ``loads_bounded`` gives the same guarantee to other readers of model-written JSON.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from cypherturn.errors import CypherTurnError, InputError

EXECUTE = "EXECUTE_CYPHER"
INSPECT = "INSPECT_SCHEMA"
SEARCH = "SEARCH_VALUES"
ASK = "ASK_USER"
SUBMIT = "SUBMIT_ANSWER"
ACTIONS = (EXECUTE, INSPECT, SEARCH, ASK, SUBMIT)
INVALID = "INVALID"

# the tool each action is called as (the TRL adapter's method names) and the argument it takes
TOOL_NAMES = {EXECUTE: "execute_cypher", INSPECT: "inspect_schema", SEARCH: "search_values", ASK: "ask_user",
              SUBMIT: "submit_answer"}
_TOOL_ARGUMENT = {EXECUTE: "query", SUBMIT: "query", ASK: "question"}

_ARG_KEYS = {EXECUTE: ("query", "cypher", "input", "payload"), SUBMIT: ("query", "cypher", "input", "payload"),
             ASK: ("question", "input", "payload", "text"), SEARCH: (), INSPECT: ()}

MAX_ACTION_CHARS = 200_000  # the environment's text limit
MAX_JSON_DEPTH = 32  # tool calls nest two or three levels

HELP = ("Send exactly one action, e.g. `EXECUTE_CYPHER <query>`, `INSPECT_SCHEMA`, "
        "`SEARCH_VALUES {\"label\": …, \"property\": …, \"query\": …}`, `ASK_USER <question>` or "
        "`SUBMIT_ANSWER <query>` (or a <tool_call>{\"name\": …, \"arguments\": {…}}</tool_call>).")


@dataclass(frozen=True)
class Action:
    type: str  # one of ACTIONS
    argument: Any  # str for EXECUTE/ASK/SUBMIT, dict or str (raw, maybe malformed JSON) for SEARCH, None for INSPECT


@dataclass(frozen=True)
class ParseError:
    message: str
    type: str = INVALID


_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.S | re.I)
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.S | re.I)
_ANSWER = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.S | re.I)
_TAGGED = re.compile(r"<(EXECUTE_CYPHER|INSPECT_SCHEMA|SEARCH_VALUES|ASK_USER|SUBMIT_ANSWER)>(.*?)</\1>", re.S | re.I)
_LINE = re.compile(r"^[ \t>*`#-]*(?:action\s*:\s*)?(EXECUTE_CYPHER|INSPECT_SCHEMA|SEARCH_VALUES|ASK_USER|SUBMIT_ANSWER)\b[:\s]*",
                   re.M | re.I)
_FENCE = re.compile(r"^```[\w-]*\s*\n?(.*?)\n?```\s*$", re.S)


class JSONTooDeep(CypherTurnError, ValueError):
    """Model-written JSON nested deeper than MAX_JSON_DEPTH."""


def _json_depth(text: str) -> int:
    """The deepest [/{ nesting of ``text`` outside JSON strings (a linear scan, no recursion)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def loads_bounded(text: str) -> Any:
    """json.loads for model-written text: JSONTooDeep (a ValueError) past MAX_JSON_DEPTH instead of a
    RecursionError, whatever the brackets (cut mid-way or thousands deep)."""
    depth = _json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise JSONTooDeep(f"JSON nested {depth} levels deep; the limit is {MAX_JSON_DEPTH}")
    try:
        return json.loads(text)
    except RecursionError:  # defensive: the scan above already bounds the depth
        raise JSONTooDeep(f"JSON nested too deeply; the limit is {MAX_JSON_DEPTH}") from None


def _unfence(text: str) -> str:
    text = text.strip()
    m = _FENCE.match(text)
    return m.group(1).strip() if m else text.strip("`").strip()


def _action_name(name: Any) -> str | None:
    if not isinstance(name, str):
        return None
    upper = name.strip().upper()
    return upper if upper in ACTIONS else None


def _from_call(name: Any, args: Any) -> Action | ParseError:
    kind = _action_name(name)
    if kind is None:
        return ParseError(f"unknown action {name!r}. {HELP}")
    if isinstance(args, str):
        stripped = args.strip()
        if stripped.startswith("{"):
            try:
                args = loads_bounded(stripped)
            except ValueError:
                pass
    if kind == INSPECT:
        return Action(INSPECT, None)
    if kind == SEARCH:
        if isinstance(args, dict):
            return Action(SEARCH, args)
        return Action(SEARCH, "" if args is None else str(args))
    if isinstance(args, dict):
        value = next((args[k] for k in _ARG_KEYS[kind] if k in args), None)
        if value is None and len(args) == 1:
            value = next(iter(args.values()))
    else:
        value = args
    if not isinstance(value, str) or not value.strip():
        return ParseError(f"{kind} needs a non-empty {_ARG_KEYS[kind][0]}. {HELP}")
    return Action(kind, _unfence(value))


def _from_json(obj: Any) -> Action | ParseError | None:
    if not isinstance(obj, dict):
        return None
    if "name" in obj:
        return _from_call(obj["name"], obj.get("arguments", obj.get("parameters")))
    if "action" in obj:
        args = next((obj[k] for k in ("arguments", "input", "payload", "query", "question") if k in obj), None)
        if _action_name(obj["action"]) == SEARCH and args is None:
            args = {k: obj[k] for k in ("label", "property", "query") if k in obj}
        return _from_call(obj["action"], args)
    return None


def parse_action(text: Any) -> Action | ParseError:
    """Parse one model output into an action (see the module docstring). Never raises."""
    if not isinstance(text, str):
        return ParseError(f"an action must be text, got {type(text).__name__}. {HELP}")
    if len(text) > MAX_ACTION_CHARS:
        return ParseError(f"the response is {len(text)} characters long; the limit is {MAX_ACTION_CHARS}. {HELP}")
    text = _THINK.sub("", text).strip()
    if not text:
        return ParseError(f"the response is empty. {HELP}")
    m = _TOOL_CALL.search(text)
    if m:
        try:
            call = loads_bounded(m.group(1))
        except JSONTooDeep as exc:
            return ParseError(f"the <tool_call> is not a valid call: {exc}. {HELP}")
        except ValueError as exc:
            return ParseError(f"the <tool_call> does not hold valid JSON ({exc.msg} at character {exc.pos}). {HELP}")
        parsed = _from_json(call)
        return parsed if parsed is not None else ParseError(f"a tool call needs \"name\" and \"arguments\". {HELP}")
    if text.startswith("{"):
        try:
            parsed = _from_json(loads_bounded(text))
        except JSONTooDeep as exc:
            return ParseError(f"the JSON action is not valid: {exc}. {HELP}")
        except ValueError:
            parsed = None
        if parsed is not None:
            return parsed
    m = _TAGGED.search(text)
    if m:
        return _from_call(m.group(1), m.group(2).strip())
    m = _LINE.search(text)
    if m:
        return _from_call(m.group(1), text[m.end():].strip())
    m = _ANSWER.search(text)
    if m:
        return _from_call(SUBMIT, m.group(1))
    return ParseError(f"no action found in the response. {HELP}")


def tool_call_text(name: str, arguments: Any) -> str:
    """A tool call as the grammar's first form reads it: ``<tool_call>{"name": …, "arguments": …}</tool_call>``.
    ``<`` is escaped inside the JSON so that an argument containing ``</tool_call>`` or ``<think>``
    cannot break the parse. The environment's canonical text of a call, never shown to a model: SFT
    teaches the chat template's rendering (``training.data.chat_template_tool_call``), read as the same action."""
    payload = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False).replace("<", "\\u003c")
    return f"<tool_call>{payload}</tool_call>"


def action_from_tool_call(name: Any, arguments: Any) -> Action | ParseError:
    """The action of a tool call that is already parsed (a name and its arguments, as TRL hands them over):
    for JSON values exactly ``parse_action(tool_call_text(name, arguments))``, including its bounds on
    size and nesting, without re-reading the text. Never raises."""
    try:
        text = tool_call_text(name, arguments)
    except (TypeError, ValueError):  # not JSON-serialisable: no text form could carry it either
        return ParseError(f"the tool call's arguments are not JSON. {HELP}")
    if len(text) > MAX_ACTION_CHARS:  # the bounds parse_action puts on the same call written as text
        return ParseError(f"the response is {len(text)} characters long; the limit is {MAX_ACTION_CHARS}. {HELP}")
    depth = _json_depth(text[len("<tool_call>"):-len("</tool_call>")])
    if depth > MAX_JSON_DEPTH:
        return ParseError(f"the <tool_call> is not a valid call: JSON nested {depth} levels deep; "
                          f"the limit is {MAX_JSON_DEPTH}. {HELP}")
    return _from_call(name, arguments)


def action_text(action: Action) -> str:
    """The canonical text of an action: its tool call (``tool_call_text``), which ``parse_action`` reads
    back as the same action. The environment records it as the model's output for an action it was
    given already parsed. Raises InputError for an object that is not a well-formed Action."""
    check_action(action)
    if action.type == INSPECT:
        arguments: Any = {}
    elif action.type == SEARCH:
        arguments = action.argument
    else:
        arguments = {_TOOL_ARGUMENT[action.type]: action.argument}
    return tool_call_text(TOOL_NAMES[action.type], arguments)


def check_action(action: Any) -> Action:
    """``action`` if it is a well-formed Action (a known type with the argument that type takes: a
    non-empty string for EXECUTE_CYPHER, ASK_USER and SUBMIT_ANSWER, None for INSPECT_SCHEMA, an
    object or text for SEARCH_VALUES), else InputError naming what is wrong. Unlike model text, a
    malformed Action is the caller's bug, so it raises instead of costing the agent an action."""
    if not isinstance(action, Action):
        raise InputError(f"expected an envs.actions.Action, got {type(action).__name__}")
    if action.type not in ACTIONS:
        raise InputError(f"Action.type must be one of {ACTIONS}, got {action.type!r}")
    arg = action.argument
    if action.type == INSPECT:
        ok, wanted = arg is None, "None"
    elif action.type == SEARCH:
        ok, wanted = isinstance(arg, (dict, str)), "a dict or a string"
    else:
        ok, wanted = isinstance(arg, str) and bool(arg.strip()), "a non-empty string"
    if not ok:
        raise InputError(f"Action({action.type}) needs {wanted} as its argument, got {arg!r:.80}")
    return action
