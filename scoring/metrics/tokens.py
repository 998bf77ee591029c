"""Tok/S: mean clean output tokens per session (the paper's Table 2 / 18 column).

``clean_output`` removes reasoning: every ``<think> ... </think>`` block; text before a lone
``</think>`` (chat templates that open the block in the prompt, as Qwen3's do); and an unclosed
``<think>`` through the end of the output. Tags match case-insensitively. The clean tokens of a
session are the sum over its scored turns (``output_text`` None counts 0); Tok/S is the mean over
sessions with at least one scored turn.

Tokens: by default whitespace-separated words (``str.split``). Pass ``tokenizer`` to count otherwise:
an object with ``encode`` (a Hugging Face tokenizer: ``len(encode(text, add_special_tokens=False))``)
or a callable returning an int or a sequence of tokens.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Mapping

from scoring.records import by_session, is_scored, mean

__all__ = ["clean_output", "count_tokens", "tokens_per_session"]

_BLOCK = re.compile(r"<think\b[^>]*>.*?</think\s*>", re.S | re.I)
_OPEN = re.compile(r"<think\b[^>]*>", re.I)
_CLOSE = re.compile(r"</think\s*>", re.I)


def clean_output(text: str | None) -> str:
    """The output without its reasoning blocks (module docstring)."""
    if not text:
        return ""
    close = _CLOSE.search(text)
    if close is not None:
        opening = _OPEN.search(text, 0, close.start())
        if opening is None:  # the block was opened by the prompt
            text = text[close.end():]
    text = _BLOCK.sub("", text)
    opening = _OPEN.search(text)
    if opening is not None:  # never closed: reasoning through the end
        text = text[:opening.start()]
    return text


def count_tokens(text: str | None, tokenizer: Any = None) -> int:
    """Tokens in ``text`` (already cleaned) by ``tokenizer`` (module docstring)."""
    if not text:
        return 0
    if tokenizer is None:
        return len(text.split())
    encode: Callable | None = getattr(tokenizer, "encode", None)
    if callable(encode):
        try:
            return len(encode(text, add_special_tokens=False))
        except TypeError:
            return len(encode(text))
    out = tokenizer(text)
    return out if isinstance(out, int) else len(out)


def tokens_per_session(records: Iterable[Mapping[str, Any]], tokenizer: Any = None) -> dict:
    """{"tok_s": mean clean tokens per session (None if no session), "sessions",
    "per_session": {session_id: tokens}, "excluded_turns"}."""
    per_session: dict[str, int] = {}
    excluded = 0
    for sid, turns in by_session(records).items():
        scored = [r for r in turns if is_scored(r)]
        excluded += len(turns) - len(scored)
        if scored:
            per_session[sid] = sum(count_tokens(clean_output(r.get("output_text")), tokenizer) for r in scored)
    return {"tok_s": mean(list(per_session.values())), "sessions": len(per_session),
            "per_session": per_session, "excluded_turns": excluded}
