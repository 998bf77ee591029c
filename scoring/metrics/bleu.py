"""Google-BLEU (GLEU) between predicted and gold Cypher, computed offline (the GRPO paper's and
Neo4j's Text2Cypher lexical metric).

GLEU (Wu et al., 2016): collect every n-gram of 1 to 4 tokens of the prediction and of the gold;
matches are the n-grams they share, counted with clipping (an n-gram counts at most as often as it
occurs in each); precision = matches / prediction n-grams, recall = matches / gold n-grams, and
GLEU = min(precision, recall). ``sentence_gleu`` scores one pair; ``corpus_gleu`` sums matches and
totals over all pairs before taking the minimum (the corpus form of NLTK's ``corpus_gleu`` and of
Hugging Face ``evaluate``'s google_bleu). A missing prediction (None) has no n-grams: 0 for its
pair, and in the corpus form its gold n-grams still count in the recall denominator. Two texts
without any token score 1.0 against each other.

Tokenization (``cypher_tokens``): the tokens of ``graphs.cypher_guard.tokenize`` (a string literal,
a number, a word, a backtick-quoted name and each punctuation character is one token; whitespace
and comments are dropped), then: words that are Cypher keywords, and words called as functions (a
word followed by ``(``), are upper-cased, since Cypher reads them case-insensitively; a
backtick-quoted name that is a plain identifier loses its backticks. Labels, relationship types,
property keys, variables and string contents keep their case. Pass ``tokenizer`` (text -> list of
tokens) to use another tokenization.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Callable, Iterable, Mapping, Sequence

from scoring.metrics._records import split_scored
from graphs.cypher_guard import tokenize

__all__ = ["cypher_tokens", "sentence_gleu", "corpus_gleu", "gleu_records"]

CYPHER_KEYWORDS = frozenset("""
    MATCH OPTIONAL WHERE RETURN WITH ORDER BY ASC DESC ASCENDING DESCENDING LIMIT SKIP OFFSET DISTINCT AS
    AND OR XOR NOT IN IS NULL TRUE FALSE CASE WHEN THEN ELSE END UNWIND CALL YIELD UNION ALL ANY NONE
    SINGLE EXISTS COUNT COLLECT STARTS ENDS CONTAINS SHORTEST SHORTESTPATH ALLSHORTESTPATHS
""".split())
_PLAIN_NAME = re.compile(r"^[^\W\d]\w*$")


def cypher_tokens(text: str | None) -> list[str]:
    """Cypher-aware tokens (module docstring)."""
    if not text:
        return []
    toks = tokenize(text)
    out = []
    for i, t in enumerate(toks):
        value = t.text
        if t.kind == "word":
            prev = toks[i - 1].text if i else ""
            nxt = toks[i + 1].text if i + 1 < len(toks) else ""
            if prev not in (".", ":", "$") and (value.upper() in CYPHER_KEYWORDS or nxt == "("):
                value = value.upper()
        elif t.kind == "quoted" and len(value) >= 2 and _PLAIN_NAME.match(value[1:-1]):
            value = value[1:-1]
        out.append(value)
    return out


def _ngrams(tokens: Sequence[str], max_n: int) -> Counter:
    grams: Counter = Counter()
    for n in range(1, max_n + 1):
        for i in range(len(tokens) - n + 1):
            grams[tuple(tokens[i:i + n])] += 1
    return grams


def _stats(pred: str | None, gold: str | None, max_n: int, tokenizer: Callable | None) -> tuple[int, int, int, bool]:
    tok = tokenizer or cypher_tokens
    p = tok(pred) if pred is not None else []
    g = tok(gold) if gold is not None else []
    pg, gg = _ngrams(p, max_n), _ngrams(g, max_n)
    matches = sum((pg & gg).values())
    return matches, sum(pg.values()), sum(gg.values()), (not p and not g and pred is not None)


def sentence_gleu(pred: str | None, gold: str, *, max_n: int = 4, tokenizer: Callable | None = None) -> float:
    """GLEU of one prediction against its gold (module docstring)."""
    matches, pt, gt, both_empty = _stats(pred, gold, max_n, tokenizer)
    if both_empty:
        return 1.0
    if not pt or not gt:
        return 0.0
    return min(matches / pt, matches / gt)


def corpus_gleu(preds: Sequence[str | None], golds: Sequence[str], *, max_n: int = 4,
                tokenizer: Callable | None = None) -> float | None:
    """Corpus GLEU: matches and totals summed over the pairs (None for no pairs)."""
    if len(preds) != len(golds):
        raise ValueError("preds and golds must have the same length")
    if not preds:
        return None
    m = pt = gt = 0
    empties = 0
    for pred, gold in zip(preds, golds):
        a, b, c, both_empty = _stats(pred, gold, max_n, tokenizer)
        m, pt, gt, empties = m + a, pt + b, gt + c, empties + both_empty
    if not pt and not gt:
        return 1.0 if empties == len(preds) else 0.0
    if not pt or not gt:
        return 0.0
    return min(m / pt, m / gt)


def gleu_records(records: Iterable[Mapping[str, Any]], *, tokenizer: Callable | None = None) -> dict:
    """{"google_bleu": corpus GLEU of ``prediction`` vs ``gold_cypher`` over the scored turns,
    "sentence_mean": mean sentence GLEU, "turns", "excluded_turns"}."""
    scored, excluded = split_scored(records)
    preds = [r.get("prediction") for r in scored]
    golds = [r.get("gold_cypher") or "" for r in scored]
    sentences = [sentence_gleu(p, g, tokenizer=tokenizer) for p, g in zip(preds, golds)]
    return {"google_bleu": corpus_gleu(preds, golds, tokenizer=tokenizer),
            "sentence_mean": sum(sentences) / len(sentences) if sentences else None,
            "turns": len(scored), "excluded_turns": excluded}
