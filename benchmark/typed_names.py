"""Names as users type them (issue 20): a share of the entity names and values a user says are typed the
way people type them, and only a value lookup (SEARCH_VALUES, :func:`graphs.search.search_values`) finds
the stored value again. The gold Cypher keeps the exact stored value.

Three kinds of typed form (:data:`KINDS`):

- ``typo``: one slip of the keyboard in a distinctive word of at least :data:`MIN_TYPO_WORD` letters
  (never the first letter): a dropped letter ("Tashrk"), a doubled one ("Tasherrk") or two neighbours
  swapped ("Tasehrk");
- ``partial``: the distinctive part of a multi-word name, without the words the world's names share
  ("Tasherk" for "Quabro Tasherk", "Trequerk" for "Trequerk Reef", "Cakumo" for "Temple of Cakumo");
- ``case``: the name in lower case ("quabro tasherk"). A case-insensitive comparison finds it without a
  lookup, so it is not counted among the names that need one (:data:`LOOKUP_KINDS`).

Codes ("Legion 01", "ED-0042") are never typed: people copy them, and a lookup could not tell "ED-17"
from its neighbours. Categorical values ("temperate") get typos only: a part of "tax relief" would
change the question.

The builder's gate (``typed_name``, :func:`check_typed`) keeps a typed form only when

1. no stored value of that property equals it in a plain Cypher equality test (a query that pastes the
   typed form returns nothing), nor, for a typo or a partial name, in a case-insensitive one (the typed
   form must not be another entity's name);
2. ``search_values(world, label, property, typed)`` returns the stored value, and :func:`resolves` says
   an annotator reading that list would pick it (the rule is in its docstring).

A rejected form is counted under the gate's name and the next candidate is tried; when none passes the
exact name is said. Each turn records what it typed (``Turn.typed_names``: label, property, stored,
typed, kind); the leak gate and the rewrite's ``must_keep`` see the typed form, because it is the slot
value the template fills.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from typing import Any, Callable, Iterable

KINDS = ("typo", "partial", "case")
LOOKUP_KINDS = ("typo", "partial")  # what only a value lookup resolves
RECORD_FIELDS = ("label", "property", "stored", "typed", "kind")
# of the entity names a turn says (the anchor of an opening or a topic shift): typed; of the categorical
# values a filter says: with a typo. High enough that every benchmark world has at least 5% of its turns
# with a name only a lookup resolves (issue 20): codes are never typed, so a world whose anchors are often
# codes (celestial_court's edicts and petitions) gets its share from the other names and the values
NAME_RATE = 0.75
VALUE_RATE = 0.4
KIND_WEIGHTS = {"typo": 0.55, "partial": 0.35, "case": 0.1}  # the first kind tried for an entity name
MIN_TYPO_WORD = 6  # a typo only in a word this long ("not in a short word")
MIN_PARTIAL_WORD = 4  # a part said alone has at least this many letters
MAX_TYPOS_TRIED = 3  # typo candidates checked per name before moving on
PATTERN_SHARE = 3  # a word found in this many of a property's values is a pattern word ("Reef", "Temple")
CLEAR_MARGIN = 2  # rule (b) of resolves(): every other listed value this many more edits away

_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
_LETTERS = re.compile(r"[A-Za-z]+")
_FUNCTION_WORDS = frozenset({"a", "an", "and", "the", "of", "in", "on", "at", "to", "by", "for", "with", "or"})


def is_code(value: str) -> bool:
    """A code or a numbered name ("Legion 01", "SH-004", "Pearl #012"): never typed."""
    return any(ch.isdigit() for ch in value)


def pattern_words(values: Iterable[str]) -> frozenset[str]:
    """Lower-cased words shared by at least :data:`PATTERN_SHARE` of a property's values (the generator's
    name patterns: "reef", "temple", "port"), plus function words: never the distinctive part."""
    counts = Counter(w.lower() for v in set(values) for w in set(_WORD.findall(v)))
    return frozenset(w for w, c in counts.items() if c >= PATTERN_SHARE) | _FUNCTION_WORDS


def _bare(word: str) -> str:
    return word[:-2] if word.endswith("'s") else word


def distinctive_words(name: str, patterns: frozenset[str]) -> list[str]:
    """The words of ``name`` that are not pattern words, in order ("Heze's Fortune" -> ["Heze"])."""
    return [_bare(w) for w in _WORD.findall(name) if _bare(w).lower() not in patterns and w.lower() not in patterns]


def typos(word: str) -> list[str]:
    """Every single-slip typo of ``word`` (a run of letters of at least MIN_TYPO_WORD), first letter kept:
    one letter dropped, one doubled (never three alike in a row), two different neighbours swapped."""
    if len(word) < MIN_TYPO_WORD or not word.isalpha():
        return []
    out: list[str] = []
    for i in range(1, len(word)):
        out.append(word[:i] + word[i + 1:])
        if not (i + 1 < len(word) and word[i + 1] == word[i]) and word[i - 1] != word[i]:
            out.append(word[:i + 1] + word[i] + word[i + 1:])
        if i + 1 < len(word) and word[i] != word[i + 1]:
            out.append(word[:i] + word[i + 1] + word[i] + word[i + 2:])
    return list(dict.fromkeys(w for w in out if w != word))


def typo_forms(name: str, patterns: frozenset[str], rng: random.Random) -> list[str]:
    """``name`` with one typo in one of its distinctive words, in a random order (``rng``)."""
    forms = []
    for m in _LETTERS.finditer(name):
        if m.group(0).lower() in patterns:
            continue
        forms += [name[:m.start()] + t + name[m.end():] for t in typos(m.group(0))]
    forms = list(dict.fromkeys(forms))
    rng.shuffle(forms)
    return forms


def partial_forms(name: str, patterns: frozenset[str]) -> list[str]:
    """The distinctive parts of a multi-word name a user might say alone, the last first (a surname, a
    title's own word): "Quabro Tasherk" -> ["Tasherk", "Quabro"], "Temple of Cakumo" -> ["Cakumo"]."""
    if len(name.split()) < 2:
        return []
    parts = [w for w in distinctive_words(name, patterns) if len(w) >= MIN_PARTIAL_WORD]
    return [w for w in reversed(list(dict.fromkeys(parts))) if w != name]


def case_form(name: str) -> str | None:
    """``name`` in lower case, when that differs from it."""
    return name.lower() if name.lower() != name else None


def edit_distance(a: str, b: str) -> int:
    """Optimal-string-alignment distance: insertions, deletions, substitutions and swaps of neighbours
    each cost one (a typo of :func:`typos` is one edit away)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[len(b)]


def resolves(kind: str, typed: str, stored: str, found: list[Any]) -> bool:
    """Whether an annotator reading the SEARCH_VALUES list ``found`` for ``typed`` picks ``stored``.

    (a) ``stored`` is the only value found; or
    (b) for a typo or other case (the whole name typed): ``stored`` is the one value nearest the typed form
        (case-insensitive edit distance) and every other value found is at least CLEAR_MARGIN more edits
        away: a single slip of the keyboard away from one value, and clearly farther from the rest.
    A partial name must be (a): a part that two names share ("Poquitror") is a question back to the
    user, not a lookup."""
    if stored not in found:
        return False
    if found == [stored]:
        return True
    if kind == "partial":
        return False
    d = {v: edit_distance(typed.lower(), str(v).lower()) for v in found}
    return all(d[v] >= d[stored] + CLEAR_MARGIN for v in found if v != stored)


def sub_rng(*parts: Any) -> random.Random:
    """A random stream of its own for the typing choices, so that typing a name never shifts the session's
    other choices (the rest of a build stays what it was)."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def candidates(name: str, patterns: frozenset[str], rng: random.Random, *, entity: bool) -> list[tuple[str, str]]:
    """(kind, typed form) to try for ``name``, best first: an entity name starts with a kind drawn by
    KIND_WEIGHTS and falls back on the other kinds that need a lookup; a categorical value gets typos."""
    if is_code(name):
        return []
    if not entity:
        return [("typo", t) for t in typo_forms(name, patterns, rng)[:MAX_TYPOS_TRIED]]
    first = rng.choices(KINDS, weights=[KIND_WEIGHTS[k] for k in KINDS])[0]
    order = [first] + [k for k in LOOKUP_KINDS if k != first]
    forms = {"typo": typo_forms(name, patterns, rng)[:MAX_TYPOS_TRIED], "partial": partial_forms(name, patterns),
             "case": [f for f in [case_form(name)] if f]}
    return [(k, f) for k in order for f in forms[k]]


Run = Callable[[str, dict], Any]  # (cypher, params) -> QueryResult
Search = Callable[[str, str, str, str], Any]  # (world, label, property, query) -> SearchResult

EQUALITY_QUERY = ("MATCH (n:`{label}`) WHERE n[$prop] IS NOT NULL "
                  "RETURN count(CASE WHEN n[$prop] = $typed THEN 1 END) AS exact, "
                  "count(CASE WHEN toLower(toString(n[$prop])) = toLower($typed) THEN 1 END) AS folded")


def equal_counts(run: Run, label: str, prop: str, typed: str) -> tuple[int, int] | None:
    """(nodes whose value equals ``typed``, equals it ignoring case), counted by Neo4j; None on an error."""
    r = run(EQUALITY_QUERY.format(label=label.replace("`", "``")), {"prop": prop, "typed": typed})
    if r.error is not None:
        return None
    return int(r.rows[0][0]), int(r.rows[0][1])


def check_typed(world: str, label: str, prop: str, stored: str, typed: str, kind: str, run: Run,
                search: Search) -> str | None:
    """None when ``typed`` passes the gate (module docstring), else why it does not."""
    counts = equal_counts(run, label, prop, typed)
    if counts is None:
        return "the equality test failed"
    exact, folded = counts
    if exact:
        return "equals a stored value"
    if folded and kind != "case":
        return "equals a stored value but for case"
    result = search(world, label, prop, typed)
    if stored not in result.values:
        return f"search_values does not find it ({result.stage})"
    if not resolves(kind, typed, stored, list(result.values)):
        return f"search_values lists {len(result.values)} values, none clearly meant"
    return None


def record(label: str, prop: str, stored: str, typed: str, kind: str) -> dict[str, str]:
    return {"label": label, "property": prop, "stored": stored, "typed": typed, "kind": kind}


def valid_record(r: Any) -> bool:
    """A ``Turn.typed_names`` entry: the five fields as strings, a known kind, a typed form that differs."""
    return (isinstance(r, dict) and sorted(r) == sorted(RECORD_FIELDS) and all(isinstance(r[k], str) for k in r)
            and r["kind"] in KINDS and r["typed"] != r["stored"])
