"""The user simulator behind ASK_USER in the agentic protocol (DESIGN §6).

Two phases, as in the paper:

1. classify the question:
   - ``reject``: it probes the schema or the technology (labels, relationships, properties, Cypher,
     the database, or names an identifier-shaped schema term such as GOVERNS, reign_start or
     StarSystem): a canned reply from a rotating pool of four;
   - ``disambiguate``: the turn is ambiguous (``ambiguity_info``) and the question seeks clarification:
     the scripted clarification;
   - ``general``: anything else: a reply from the backend (rule-based by default; an LLM through
     ``LLMReplyBackend`` at temperature 0.5), aware of the session's persona;
2. scan a generated reply for schema terms (labels, relationship types, property names) and replace a
   leaking reply by a safe fallback.

After three or more asks in one turn an impatience signal is added (to the LLM's context, and to the
rule-based reply). The guided protocol does not use this class: its ASK_USER is scripted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from benchmark.session import Turn

REJECTIONS = (
    "I don't know about the database schema. I just want to find the information I asked about.",
    "I'm not familiar with how the data is stored. Could you work with my question as I asked it?",
    "Sorry, I can't help with technical details like that. I only know what I'm looking for.",
    "That's a technical question I can't answer. Please just use what I told you.",
)
FALLBACK = "I'm not sure how to say more than I already did. Please go with my question as it stands."
IMPATIENCE = "I've answered a few questions already; please just give me the result now."
GUIDED_DISCOURAGE = "I think my question was clear enough. Please try to answer it directly."

# words and phrases that mark a question as probing the schema or the technology
_PROBE = re.compile(
    r"\b(schemas?|labels?|relationships?|relations?|rel(?:ationship)?[ -]?types?|propert(?:y|ies)|"
    r"attributes?|fields?|columns?|tables?|keys?|nodes?|edges?|cypher|quer(?:y|ies)|database|db|"
    r"data ?model|data ?structure|graph|neo4j|identifiers?|data ?types?|indexe?s?|constraints?|"
    r"(?:match|return|where|with|order by) clauses?|stored|spelled|spelling|exact (?:name|value|string)|"
    r"case[- ]sensitive)\b",
    re.I)
# Cypher written as code: clause keywords in capitals (unless the whole question is shouted) or a
# pattern such as (p:Province) or -[:GOVERNS]->. "Which ones do you want me to return?" is plain English.
_CODE_KEYWORD = re.compile(r"\b(?:MATCH|RETURN|WHERE|OPTIONAL MATCH|UNWIND|ORDER BY|DISTINCT|COUNT\()")
_CODE_PATTERN = re.compile(r"\(\s*\w*\s*:\s*`?\w+|-\s*\[|\]\s*-|<-|->")
_CLARIFY = re.compile(
    r"\b(do|did) you mean\b|\bwhich (one|ones|measure|metric|criterion|criteria|way|aspect|kind)\b|"
    r"\bwhat do you mean\b|\bmean by\b|\bclarify\b|\bspecify\b|\bby what\b|\bin terms of\b|"
    r"\bwhat exactly\b|\bbased on what\b|\bwhich (?:\w+ ){0,2}(?:do you|should i|would you)\b|"
    r"\bhow (?:do|should) (?:i|we) (?:rank|measure|judge|decide)\b|\bwhat counts as\b|\bwhat (?:\w+ )?threshold\b",
    re.I)

PERSONA_TONE = {
    "journalist": "I'm checking facts for a story, so I need exactly what I asked.",
    "student": "I'm just trying to understand the data for my assignment.",
    "product_manager": "I need this for a decision, so the plain answer is what matters.",
    "novice_user": "Sorry, I'm not sure how else to explain it.",
    "data_analyst": "The request stands as written.",
    "casual_user": "Nothing fancy, just what I asked.",
    "impatient_exec": "Just get me the answer.",
    "adversarial_user": "I asked a clear question. Answer it.",
    "non_native_speaker": "Sorry for my English, I mean what I wrote.",
    "verbose_user": "I know I tend to ramble, but the question itself is what I'm after.",
}


@dataclass(frozen=True)
class SimulatorReply:
    intent: str  # reject | disambiguate | general
    reply: str
    leak_replaced: bool

    def to_dict(self) -> dict:
        return {"intent": self.intent, "reply": self.reply, "leak_replaced": self.leak_replaced}


class ReplyBackend(Protocol):
    """Writes the reply to a general question. ``impatient`` is the paper's impatience signal."""

    def reply(self, question: str, utterance: str, persona: str, impatient: bool) -> str: ...


class RuleBasedBackend:
    """The default backend: a persona-aware restatement of the request (no model needed)."""

    def reply(self, question: str, utterance: str, persona: str, impatient: bool) -> str:
        tone = PERSONA_TONE.get(persona, "")
        text = f"{tone} What I want is: {utterance}".strip()
        return f"{text} {IMPATIENCE}" if impatient else text


class LLMReplyBackend:
    """A general reply written by an LLM (OpenAI-compatible endpoint) at temperature 0.5."""

    def __init__(self, chat, temperature: float = 0.5):
        self.chat = chat  # benchmark.openai_chat.OpenAIChat or anything with .complete(messages, ...)
        self.temperature = temperature

    def reply(self, question: str, utterance: str, persona: str, impatient: bool) -> str:
        system = (f"You are a user ({persona.replace('_', ' ')}) talking to a data assistant. Your request was: "
                  f"\"{utterance}\". Answer the assistant's question briefly in your own voice. You know nothing "
                  "about databases, schemas, labels, properties or query languages; never mention them.")
        if impatient:
            system += " You are getting impatient: you have answered several questions already."
        return self.chat.complete([{"role": "system", "content": system}, {"role": "user", "content": question}],
                                  temperature=self.temperature, max_tokens=120).strip()


def _term_pattern(terms: set[str], *, spaced: bool = True) -> re.Pattern | None:
    words = sorted({t for t in terms if t}, key=len, reverse=True)
    if not words:
        return None
    # identifiers as written, and property names with underscores also as spaced words
    alts = [re.escape(w) for w in words]
    if spaced:
        alts += [re.escape(w.replace("_", " ")) for w in words if "_" in w]
    if not alts:
        return None
    return re.compile(r"(?<![\w])(" + "|".join(alts) + r")(?![\w])")


class UserSimulator:
    """One simulator per session: it keeps the rotation of the rejection pool."""

    def __init__(self, schema_terms: set[str], backend: ReplyBackend | None = None):
        self.schema_terms = set(schema_terms)
        self.backend = backend or RuleBasedBackend()
        self._terms = _term_pattern(self.schema_terms)
        # identifier-shaped terms (GOVERNS, reign_start, StarSystem) in a question mark a schema probe;
        # plain words that happen to be property names ("population") do not
        self._identifiers = _term_pattern({t for t in self.schema_terms
                                           if "_" in t or t.isupper() or re.search(r"[a-z][A-Z]", t)},
                                          spaced=False)
        self._rejections = 0

    def contains_schema_term(self, text: str) -> bool:
        return bool(self._terms and self._terms.search(text))

    def classify(self, question: str, turn: Turn) -> str:
        if (_PROBE.search(question) or _CODE_PATTERN.search(question)
                or (_CODE_KEYWORD.search(question) and not question.isupper())
                or (self._identifiers and self._identifiers.search(question))):
            return "reject"
        if turn.ambiguity_info and _CLARIFY.search(question):
            return "disambiguate"
        if turn.ambiguity_info and question.strip().endswith("?") and re.search(r"\b(which|what|how)\b", question, re.I):
            return "disambiguate"  # a short "which?" on an ambiguous turn is a clarification request
        return "general"

    def reply(self, question: str, turn: Turn, persona: str, asks_this_turn: int) -> SimulatorReply:
        """``asks_this_turn`` counts this question too (3 or more: impatient)."""
        intent = self.classify(question, turn)
        if intent == "reject":
            text = REJECTIONS[self._rejections % len(REJECTIONS)]
            self._rejections += 1
            return SimulatorReply("reject", text, False)
        if intent == "disambiguate":
            return SimulatorReply("disambiguate", turn.ambiguity_info["clarification"], False)
        impatient = asks_this_turn >= 3
        try:
            text = self.backend.reply(question, turn.shown_utterance, persona, impatient)
        except Exception:  # noqa: BLE001 - a failing LLM backend must not break the episode
            text = FALLBACK
        if not text or self.contains_schema_term(text):
            return SimulatorReply("general", FALLBACK + (f" {IMPATIENCE}" if impatient else ""), bool(text))
        return SimulatorReply("general", text, False)
