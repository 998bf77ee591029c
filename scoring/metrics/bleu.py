"""Google-BLEU (GLEU) between predicted and gold Cypher, computed offline (the GRPO paper's and
Neo4j's Text2Cypher lexical metric).

GLEU (Wu et al., 2016): collect every n-gram of 1 to 4 tokens of the prediction and of the gold;
matches are the n-grams they share, counted with clipping (an n-gram counts at most as often as it
occurs in each); precision = matches / prediction n-grams, recall = matches / gold n-grams, and
GLEU = min(precision, recall). ``sentence_gleu`` scores one pair (the same value as NLTK's
``nltk.translate.gleu_score.sentence_gleu``, cross-checked by a test). ``corpus_gleu`` sums matches,
prediction n-grams and gold n-grams over all pairs and then takes min(precision, recall) of the sums.
That is *not* NLTK's ``corpus_gleu`` (nor Hugging Face ``evaluate``'s google_bleu, which calls it):
NLTK sums, per pair, matches and max(prediction n-grams, gold n-grams), so the two agree when every
prediction is at most as long as its gold (or every one at least as long) and differ on a corpus
that mixes both (preds ``RETURN n`` and ``MATCH (n) RETURN n LIMIT 1`` against golds
``RETURN n LIMIT 1`` and ``MATCH (n) RETURN n``: 0.724 here, 0.583 in NLTK). It is kept so that
reported figures stay comparable with earlier runs. A missing prediction (None) has no n-grams: 0 for
its pair, and in the corpus form its gold n-grams still count in the recall denominator. Two texts
without any token score 1.0 against each other (NLTK: 0.0).

Tokenization (``cypher_tokens``): the tokens of the Cypher toolkit (``graphs.cypher_syntax.tokenize``:
a string literal, a number, a word, a backtick-quoted name and each punctuation character is one
token; whitespace and comments are dropped), then: words that are Cypher keywords (the toolkit's
``KEYWORDS``), and words called as functions (a word followed by ``(``), are upper-cased where the
toolkit's keyword rule reads them as keywords, since Cypher reads them case-insensitively; a
backtick-quoted name that is a plain identifier loses its backticks (``plain_name``). Labels,
relationship types, property keys, map keys, variables and string contents keep their case. Pass
``tokenizer`` (text -> list of tokens) to use another tokenization.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Iterable, Mapping, Sequence

from cypherturn.errors import InputError
from graphs.cypher_syntax import KEYWORDS, is_keyword, plain_name, tokenize
from scoring.records import split_scored

__all__ = ["cypher_tokens", "sentence_gleu", "corpus_gleu", "gleu_records"]


def cypher_tokens(text: str | None) -> list[str]:
    """Cypher-aware tokens (module docstring)."""
    if not text:
        return []
    toks = tokenize(text)
    out = []
    for i, t in enumerate(toks):
        value = t.text
        if t.kind == "word":
            called = i + 1 < len(toks) and toks[i + 1].text == "("
            if is_keyword(toks, i) and (value.upper() in KEYWORDS or called):
                value = value.upper()
        elif t.kind == "quoted":
            value = plain_name(t) or value
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
        raise InputError("preds and golds must have the same length")
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
