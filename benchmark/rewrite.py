"""The optional LLM rewrite pass: restyle a template utterance in a persona's voice for naturalness.

Off by default. A backend is anything with ``rewrite(utterance, persona) -> str``: ``OpenAIRewriter``
talks to an OpenAI-compatible ``/v1/chat/completions`` endpoint (a hosted API, vLLM, llama.cpp, ...)
with only the standard library; ``HFRewriter`` runs a local ``transformers`` text-generation pipeline.

``apply_rewrite`` is the gate every rewrite passes: the rewritten text is used only when it keeps every
entity name and value verbatim and looks like a plain request, otherwise the template text is kept.
A backend failure never breaks the build: it is counted and the template text kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol

from benchmark.openai_chat import ChatError, OpenAIChat
from cypherturn.errors import CypherTurnError
from graphs.cypher_syntax import VOCABULARY  # the leak check's words: one in capitals leaks query text

MAX_LENGTH_RATIO = 3  # a rewrite longer than this many times the template has wandered off

_UPPER_TOKEN = re.compile(r"\b[A-Z]{2,}\b")

PERSONA_STYLES = {
    "journalist": "a journalist researching a story: direct, curious, precise",
    "student": "a student working on an assignment: polite, a little tentative",
    "product_manager": "a product manager: businesslike, outcome-focused",
    "novice_user": "someone new to databases: plain everyday words, no jargon",
    "data_analyst": "a data analyst: concise and exact",
    "casual_user": "a casual user: relaxed and informal",
    "impatient_exec": "a busy executive: terse, wants the answer now",
    "adversarial_user": "a blunt, slightly confrontational user",
    "non_native_speaker": "a non-native English speaker: simple grammar, understandable",
    "verbose_user": "a talkative user: wordy, adds a little friendly context",
}

SYSTEM_PROMPT = (
    "You rewrite one request that a user sends to a database assistant so that it sounds natural in "
    "the voice of the given persona. Keep its meaning exactly. Copy every name, number and value "
    "exactly as written. Keep references such as 'those' or 'them' as they are. Do not add facts or "
    "conditions. Do not write any query code. Answer with the rewritten request only, on one line.")


def _user_prompt(utterance: str, persona: str) -> str:
    style = PERSONA_STYLES.get(persona, persona.replace("_", " "))
    return f"Persona: {style}\nRequest: {utterance}\nRewritten request:"


def _messages(utterance: str, persona: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": _user_prompt(utterance, persona)}]


def _clean(text: str) -> str:
    """Strip whitespace and one pair of quotes the model may wrap its answer in."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text


class Rewriter(Protocol):
    def rewrite(self, utterance: str, persona: str) -> str: ...


class RewriteError(CypherTurnError, RuntimeError):
    """A backend could not produce a rewrite (after its retries)."""


class OpenAIRewriter:
    """An OpenAI-compatible chat-completions backend (see ``benchmark.openai_chat.OpenAIChat`` for
    the retry policy: 429, 5xx, timeouts and dropped connections are retried with backoff)."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, temperature: float = 0.7,
                 timeout: float = 30, retries: int = 3, *, backoff: float = 1.0, max_backoff: float = 30.0,
                 max_tokens: int = 200, seed: int | None = None):
        self.chat = OpenAIChat(base_url, model, api_key=api_key, timeout=timeout, retries=retries,
                               backoff=backoff, max_backoff=max_backoff)
        self.url = self.chat.url
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed

    def rewrite(self, utterance: str, persona: str) -> str:
        try:
            text = self.chat.complete(_messages(utterance, persona), temperature=self.temperature,
                                      max_tokens=self.max_tokens, seed=self.seed)
        except ChatError as exc:
            raise RewriteError(str(exc)) from None
        return _clean(text)


class HFRewriter:
    """A local ``transformers`` text-generation pipeline (an optional dependency, imported here)."""

    def __init__(self, model_name_or_path: str, device: str = "cpu", *, max_new_tokens: int = 128,
                 temperature: float = 0.7):
        try:
            from transformers import pipeline
        except ImportError as exc:
            raise ImportError("HFRewriter needs the optional dependency transformers (and torch): "
                              "pip install transformers torch") from exc
        self.pipe = pipeline("text-generation", model=model_name_or_path, device=device)
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        # chat models take messages; plain language models take a prompt
        self.chat = getattr(self.pipe.tokenizer, "chat_template", None) is not None

    def rewrite(self, utterance: str, persona: str) -> str:
        kwargs = {"max_new_tokens": self.max_new_tokens, "return_full_text": False,
                  "do_sample": self.temperature > 0}
        if self.temperature > 0:
            kwargs["temperature"] = self.temperature
        if self.chat:
            out = self.pipe(_messages(utterance, persona), **kwargs)
        else:
            out = self.pipe(SYSTEM_PROMPT + "\n\n" + _user_prompt(utterance, persona), **kwargs)
        text = out[0]["generated_text"]
        if isinstance(text, list):  # some versions return the whole conversation
            text = text[-1]["content"]
        return _clean(text.split("\n", 1)[0] if not self.chat else text)


@dataclass
class RewriteStats:
    attempted: int = 0
    accepted: int = 0
    rejected: int = 0
    errors: int = 0
    reasons: dict[str, int] = field(default_factory=dict)  # why rewrites were rejected

    def as_dict(self) -> dict[str, Any]:
        return {"attempted": self.attempted, "accepted": self.accepted, "rejected": self.rejected,
                "errors": self.errors, "reasons": dict(sorted(self.reasons.items()))}


def must_keep(turn_slots: Iterable[Any]) -> list[str]:
    """The strings a rewrite must keep verbatim: the turn's slot values as text, without blanks and
    repeats, in order."""
    keep: list[str] = []
    for value in turn_slots:
        text = str(value).strip() if value is not None else ""
        if text and text not in keep:
            keep.append(text)
    return keep


def check_rewrite(original: str, rewritten: Any, keep: list[str]) -> str | None:
    """None when ``rewritten`` may replace ``original``, else the reason it may not."""
    if not isinstance(rewritten, str) or not rewritten.strip():
        return "empty"
    text = rewritten.strip()
    if len(text) > MAX_LENGTH_RATIO * max(1, len(original.strip())):
        return "too_long"
    if "\n" in text:
        return "multi_line"  # a preamble or an explanation came with the request
    if "{" in text or "}" in text:
        return "braces"  # an unfilled template slot or a Cypher map
    missing = [k for k in keep if k not in text]
    if missing:
        return "lost_value"
    # a keyword the template itself did not contain means query text leaked into the request
    original_tokens = set(_UPPER_TOKEN.findall(original))
    if any(tok in VOCABULARY and tok not in original_tokens for tok in _UPPER_TOKEN.findall(text)):
        return "cypher_keyword"
    return None


def apply_rewrite(rewriter: Rewriter, utterance: str, persona: str, keep: list[str],
                  stats: RewriteStats | None = None) -> tuple[str, bool]:
    """(rewritten text, True) when the rewrite passes ``check_rewrite``, else (utterance, False).
    Never raises for a backend failure: it counts as an error and the template text is kept."""
    stats = stats if stats is not None else RewriteStats()
    stats.attempted += 1
    try:
        rewritten = rewriter.rewrite(utterance, persona)
    except Exception:  # noqa: BLE001 - any backend failure must leave the build running
        stats.errors += 1
        return utterance, False
    reason = check_rewrite(utterance, rewritten, keep)
    if reason is not None:
        stats.rejected += 1
        stats.reasons[reason] = stats.reasons.get(reason, 0) + 1
        return utterance, False
    stats.accepted += 1
    return rewritten.strip(), True
