"""Reading a completion: its text, the tagged response format, and the tags' contents.

TRL hands a reward function either plain strings (standard datasets) or conversations (lists of
message dicts: ``[{"role": "assistant", "content": "..."}]``; with tool use, several messages). The
text scored is the content of the **last assistant message** (content given as a list of parts is
joined from its ``text`` parts); a plain string is used as it is.

The tagged response format of the GRPO paper (its Table 3 guideline)::

    <reasoning>
      free reasoning text (optional)
      <key_value> values extracted from the question </key_value>
      free text (optional)
      <relationship> triples used by the query </relationship>
      free text (optional)
    </reasoning>
    <answer> the Cypher query </answer>

A response **follows the format** exactly when all of these hold (``check_format``):

1. it is ``<reasoning>…</reasoning>`` then ``<answer>…</answer>``, with nothing but whitespace
   before, between and after them;
2. each of the eight tags (``<reasoning> </reasoning> <key_value> </key_value> <relationship>
   </relationship> <answer> </answer>``, lower case, no attributes) occurs exactly once;
3. ``<key_value>…</key_value>`` comes before ``<relationship>…</relationship>`` and both lie inside
   ``<reasoning>``; free text around them inside ``<reasoning>`` is allowed;
4. the contents of ``<key_value>``, ``<relationship>`` and ``<answer>`` are not blank (when there is
   nothing to extract, write ``none``: see ``rewards.paper``).

The extractors (``extract_tag``, ``extract_answer``) are lenient and do not require the format: they
take the content of the **last** complete ``<tag>…</tag>`` pair, or ``None`` when there is none, so a
query written outside ``<answer>`` is never found.
"""

from __future__ import annotations

import re
from typing import Any

from cypherturn.errors import InputError

TAGS = ("reasoning", "key_value", "relationship", "answer")

_FORMAT = re.compile(
    r"\A\s*<reasoning>(?P<pre>.*?)<key_value>(?P<kv>.*?)</key_value>(?P<mid>.*?)"
    r"<relationship>(?P<rel>.*?)</relationship>(?P<post>.*?)</reasoning>\s*"
    r"<answer>(?P<answer>.*?)</answer>\s*\Z", re.DOTALL)
_FENCE = re.compile(r"\A```[ \t]*[A-Za-z0-9_+-]*[ \t]*\n?(?P<body>.*?)\n?```\Z", re.DOTALL)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal-style parts
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return str(content)


def completion_text(completion: Any) -> str:
    """The text of one completion: a string as it is, or the last assistant message's content."""
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return _content_text(completion.get("content"))
    if isinstance(completion, (list, tuple)):
        messages = [m for m in completion if isinstance(m, dict)]
        for message in reversed(messages):
            if message.get("role", "assistant") == "assistant":
                return _content_text(message.get("content"))
        return ""
    return str(completion)


def check_format(text: str) -> bool:
    """Whether ``text`` follows the tagged response format (the four rules in the module docstring)."""
    if not isinstance(text, str):
        return False
    for tag in TAGS:
        if text.count(f"<{tag}>") != 1 or text.count(f"</{tag}>") != 1:
            return False
    m = _FORMAT.match(text)
    if m is None:
        return False
    return all(m[g].strip() for g in ("kv", "rel", "answer"))


def extract_tag(text: str, tag: str) -> str | None:
    """The content of the last complete ``<tag>…</tag>`` pair (stripped), or None."""
    if not isinstance(text, str):
        return None
    close = text.rfind(f"</{tag}>")
    if close < 0:
        return None
    open_ = text.rfind(f"<{tag}>", 0, close)
    if open_ < 0:
        return None
    return text[open_ + len(tag) + 2:close].strip()


def strip_code(query: str) -> str:
    """A query without a surrounding Markdown code fence and without a trailing semicolon."""
    text = query.strip()
    m = _FENCE.match(text)
    if m:
        text = m["body"].strip()
    if text.endswith(";"):
        text = text[:-1].rstrip()
    return text


def extract_answer(text: str) -> str | None:
    """The Cypher inside the last ``<answer>…</answer>`` (code fence and trailing ';' removed), or None
    when there is no answer tag or it is blank."""
    content = extract_tag(text, "answer")
    if content is None:
        return None
    query = strip_code(content)
    return query or None


# the environment's plain action form (envs.actions): a line that starts with the action's name, the query after it
_ACTION = re.compile(r"^[ \t>*`#-]*(?:action\s*:\s*)?(EXECUTE_CYPHER|INSPECT_SCHEMA|SEARCH_VALUES|ASK_USER|SUBMIT_ANSWER)"
                     r"\b[:\s]*", re.M | re.I)


def extract_action_query(text: str) -> str | None:
    """The query of a response written as the environment's plain action: when its first action line is
    ``SUBMIT_ANSWER <query>`` or ``EXECUTE_CYPHER <query>``, everything after the name (another action
    first: None); with no action line, the ``<answer>`` tag's query, else None. A guided turn's response
    is scored as the environment scores it alone."""
    m = _ACTION.search(text or "")
    if m:
        if m.group(1).upper() not in ("SUBMIT_ANSWER", "EXECUTE_CYPHER"):
            return None
        return strip_code(text[m.end():]) or None
    return extract_answer(text or "")


def extract_query(text: str, mode: str = "answer") -> str | None:
    """The query of a completion. ``mode="answer"``: only the ``<answer>`` tag; ``"action"``: the plain
    action form, else the answer tag (``extract_action_query``); ``"auto"``: the answer tag, else the last
    fenced code block, else the whole text; ``"raw"``: the whole text."""
    if mode == "answer":
        return extract_answer(text)
    if mode == "action":
        return extract_action_query(text)
    if mode == "raw":
        return strip_code(text) or None
    if mode != "auto":
        raise InputError(f"unknown query extraction mode {mode!r}; use 'answer', 'action', 'auto' or 'raw'")
    found = extract_answer(text)
    if found is not None:
        return found
    blocks = re.findall(r"```[ \t]*[A-Za-z0-9_+-]*[ \t]*\n(.*?)```", text or "", re.DOTALL)
    if blocks:
        return strip_code(blocks[-1]) or None
    return strip_code(text or "") or None


def kwargs_column(kwargs: dict, name: str, n: int) -> list | None:
    """A dataset column TRL passed to a reward function, checked to have one entry per completion."""
    col = kwargs.get(name)
    if col is None:
        return None
    col = list(col)
    if len(col) != n:
        raise InputError(f"reward kwargs column {name!r} has {len(col)} entries for {n} completions")
    return col
