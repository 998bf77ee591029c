"""Human review round trip, as the paper did: export sessions to a review sheet, import two
annotators' decisions, measure their agreement, and build the revised dataset.

Sheet (CSV when the path ends in ``.csv``, else JSONL), one row per turn: the context a reviewer needs
(``SHEET_COLUMNS``) and three columns they fill in: ``decision`` (accept | revise | reject),
``revised_cypher`` (required for revise) and ``comment``.

Merging two sheets:

- agreement is Cohen's kappa on the binary keep (accept or revise) vs reject decision;
- a turn is rejected only when both annotators reject it, and a session with a rejected turn is
  dropped whole (the paper rejected candidate sessions, not single turns);
- a revised turn takes annotator A's ``revised_cypher`` (B's when only B revised), which is re-executed
  through the safe executor to produce the new gold result; a revision that fails (error or
  truncated result) is reported and the original gold kept. The gold key-values and triples come from
  the generator's representation and are kept as they are.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from benchmark.session import Session, Turn
from cypherturn.errors import InputError
from graphs import executor as _executor

DECISIONS = ("accept", "revise", "reject")
REVIEW_COLUMNS = ("decision", "revised_cypher", "comment")
SHEET_COLUMNS = ("session_id", "world", "persona", "turn_index", "phenomenon", "chain_mode", "utterance",
                 "clarification", "previous_utterance", "gold_cypher", "gold_result_preview", *REVIEW_COLUMNS)
PREVIEW_ROWS = 5


class ReviewError(InputError):
    """A review sheet that cannot be merged; the message names the file and row."""


# -- export ---------------------------------------------------------------------------------------

def _preview(turn: Turn) -> str:
    return json.dumps({"columns": turn.gold_columns, "rows": turn.gold_rows[:PREVIEW_ROWS],
                       "total_rows": len(turn.gold_rows)}, ensure_ascii=False)


def _sheet_rows(sessions: list[Session]) -> list[dict[str, Any]]:
    rows = []
    for s in sessions:
        for i, t in enumerate(s.turns):
            rows.append({
                "session_id": s.id, "world": s.world, "persona": s.persona, "turn_index": t.index,
                "phenomenon": t.phenomenon, "chain_mode": t.chain_mode,
                "utterance": t.shown_utterance,
                # the gold answers the clarified request, so the reviewer must see the clarification
                "clarification": t.ambiguity_info["clarification"] if t.ambiguity_info else "",
                "previous_utterance": s.turns[i - 1].shown_utterance if i else "",
                "gold_cypher": t.gold_cypher, "gold_result_preview": _preview(t),
                "decision": "", "revised_cypher": "", "comment": "",
            })
    return rows


def export_review(sessions: list[Session], path: str | Path) -> None:
    """Write the review sheet for ``sessions`` (CSV for ``*.csv``, else JSONL)."""
    path = Path(path)
    rows = _sheet_rows(sessions)
    if path.suffix.lower() == ".csv":
        with open(path, "w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=SHEET_COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
    else:
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")


# -- reading sheets -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Review:
    decision: str
    revised_cypher: str
    comment: str


def _read_records(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(where, record) pairs; ``where`` names the file and the row as a person would find it."""
    if path.suffix.lower() == ".csv":
        # utf-8-sig: spreadsheet programs often add a byte-order mark when saving CSV
        with open(path, encoding="utf-8-sig", newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in ("session_id", "turn_index", *REVIEW_COLUMNS) if c not in (reader.fieldnames or [])]
            if missing:
                raise ReviewError(f"{path}: missing column(s) {', '.join(missing)}")
            # spreadsheet numbering: the header is row 1
            return [(f"{path}, row {n}", rec) for n, rec in enumerate(reader, 2)]
    records = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError as exc:
                raise ReviewError(f"{path}, line {n}: not JSON ({exc})") from None
            if not isinstance(rec, dict):
                raise ReviewError(f"{path}, line {n}: expected a JSON object")
            records.append((f"{path}, line {n}", rec))
    return records


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _turn_index(value: Any) -> int | None:
    """The turn index of a sheet cell; spreadsheets may turn 3 into "3.0"."""
    try:
        number = float(_text(value))
    except ValueError:
        return None
    return int(number) if number.is_integer() else None


def read_review_sheet(path: str | Path, sessions: list[Session]) -> dict[tuple[str, int], Review]:
    """One annotator's decisions keyed by (session id, turn index), validated against ``sessions``:
    every turn reviewed exactly once, a known decision on each, and revised Cypher for each revise."""
    path = Path(path)
    turns = {(s.id, t.index) for s in sessions for t in s.turns}
    reviews: dict[tuple[str, int], Review] = {}
    for where, rec in _read_records(path):
        sid = _text(rec.get("session_id"))
        index = _turn_index(rec.get("turn_index"))
        if index is None:
            raise ReviewError(f"{where}: turn_index {rec.get('turn_index')!r} is not a whole number")
        key = (sid, index)
        if key not in turns:
            raise ReviewError(f"{where}: unknown turn (session {sid!r}, turn {index})")
        if key in reviews:
            raise ReviewError(f"{where}: session {sid!r} turn {index} is reviewed twice")
        decision = _text(rec.get("decision")).lower()
        if decision not in DECISIONS:
            shown = repr(decision) if decision else "empty"
            raise ReviewError(f"{where}: decision is {shown}; expected one of {', '.join(DECISIONS)}")
        revised = _text(rec.get("revised_cypher"))
        if decision == "revise" and not revised:
            raise ReviewError(f"{where}: decision is revise but revised_cypher is empty")
        reviews[key] = Review(decision, revised if decision == "revise" else "", _text(rec.get("comment")))
    missing = sorted(turns - reviews.keys())
    if missing:
        listed = ", ".join(f"{sid} turn {i}" for sid, i in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise ReviewError(f"{path}: no decision for {len(missing)} turn(s): {listed}{more}")
    return reviews


# -- agreement ------------------------------------------------------------------------------------

def _tallies(a: list[str], b: list[str]) -> tuple[int, int, int]:
    """(items, items agreed on, chance agreement * items^2) as integers, for exact comparisons."""
    if len(a) != len(b):
        raise ReviewError(f"the raters labelled different numbers of items ({len(a)} vs {len(b)})")
    if not a:
        raise ReviewError("agreement needs at least one item")
    ca, cb = Counter(a), Counter(b)
    return len(a), sum(x == y for x, y in zip(a, b)), sum(ca[label] * cb[label] for label in ca)


def agreement(a: list[str], b: list[str]) -> tuple[float, float]:
    """(observed, expected-by-chance) agreement of two raters' labels on the same items."""
    n, agreed, chance = _tallies(a, b)
    return agreed / n, chance / (n * n)


def cohens_kappa(a: list[str], b: list[str]) -> float:
    """Cohen's kappa, (p_o - p_e) / (1 - p_e), of two raters' labels on the same items.

    Degenerate case: p_e = 1 exactly when both raters gave every item the same single label, so they
    agree on everything but chance explains it all and the formula is 0/0. We define kappa = 1.0 there
    (perfect agreement; nothing to disagree about), and the review report flags it.
    """
    n, agreed, chance = _tallies(a, b)
    if chance == n * n:
        return 1.0
    observed, expected = agreed / n, chance / (n * n)
    return (observed - expected) / (1 - expected)


def _binary(decision: str) -> str:
    return "reject" if decision == "reject" else "keep"


# -- merging --------------------------------------------------------------------------------------

@dataclass
class Disagreement:
    session_id: str
    turn_index: int
    decision_a: str
    decision_b: str
    comment_a: str = ""
    comment_b: str = ""


@dataclass
class ReviewOutcome:
    sessions: list[Session]                  # the revised dataset
    kappa: float                             # Cohen's kappa on keep vs reject
    n_turns: int                             # turns reviewed (by both annotators)
    n_revised: int                           # revisions applied (re-executed successfully)
    n_rejected_turns: int                    # turns both annotators rejected
    n_dropped_sessions: int                  # sessions dropped for a rejected turn
    revision_errors: list[tuple[str, int, str]] = field(default_factory=list)
    disagreements: list[Disagreement] = field(default_factory=list)  # the three-way decisions differ
    n_sessions: int = 0                      # sessions reviewed
    observed_agreement: float = 0.0          # keep vs reject
    expected_agreement: float = 0.0          # keep vs reject, by chance
    kappa_degenerate: bool = False           # expected agreement was 1 (see cohens_kappa)
    decision_agreement: float = 0.0          # agreement on the three-way decision
    confusion: dict[str, dict[str, int]] = field(default_factory=dict)  # decision A -> decision B -> turns
    sheet_a: str = ""
    sheet_b: str = ""


Execute = Callable[..., "_executor.QueryResult"]


def _revise(world: str, turn: Turn, cypher: str, execute: Execute) -> tuple[Turn | None, str | None]:
    """The turn with ``cypher`` as its gold and the re-executed result, or None and why not."""
    try:
        result = execute(world, cypher)
    except Exception as exc:  # noqa: BLE001 - the real executor never raises; a stand-in might
        return None, f"execution raised {type(exc).__name__}: {exc}"
    if result.error is not None:
        return None, f"{result.error.kind}: {result.error.message}"
    if result.truncated:
        return None, f"the result was truncated at {len(result.rows)} rows; a gold result must be complete"
    return replace(turn, gold_cypher=cypher, gold_columns=list(result.columns),
                   gold_rows=[list(r) for r in result.rows]), None


def _agreement(keys: list[tuple[str, int]], rev_a: dict, rev_b: dict) -> dict:
    """How the two annotators agree over ``keys``: the decision confusion matrix, the disagreements,
    Cohen's kappa on keep / reject with its observed and expected agreement, and the agreement on the
    decisions themselves (ReviewOutcome's fields)."""
    dec_a = [rev_a[k].decision for k in keys]
    dec_b = [rev_b[k].decision for k in keys]
    confusion = {x: {y: 0 for y in DECISIONS} for x in DECISIONS}
    for x, y in zip(dec_a, dec_b):
        confusion[x][y] += 1
    disagreements = [Disagreement(sid, i, rev_a[(sid, i)].decision, rev_b[(sid, i)].decision,
                                  rev_a[(sid, i)].comment, rev_b[(sid, i)].comment)
                     for sid, i in keys if rev_a[(sid, i)].decision != rev_b[(sid, i)].decision]
    bin_a, bin_b = [_binary(d) for d in dec_a], [_binary(d) for d in dec_b]
    if keys:
        observed, expected = agreement(bin_a, bin_b)
        kappa = cohens_kappa(bin_a, bin_b)
        decision_agreement = agreement(dec_a, dec_b)[0]
    else:
        observed = expected = kappa = decision_agreement = 1.0  # nothing reviewed, nothing disputed
    return dict(kappa=kappa, disagreements=disagreements, observed_agreement=observed,
                expected_agreement=expected, kappa_degenerate=len(set(bin_a) | set(bin_b)) == 1,
                decision_agreement=decision_agreement, confusion=confusion)


def _merge(sessions: list[Session], rev_a: dict, rev_b: dict, execute: Execute) -> dict:
    """The sessions kept (none of whose turns both annotators rejected), each turn with its revised gold
    where one was given and runs (A's when both revised); the counts and the revisions that failed."""
    kept: list[Session] = []
    n_revised = n_rejected = n_dropped = 0
    errors: list[tuple[str, int, str]] = []
    for s in sessions:
        rejected = [t.index for t in s.turns
                    if rev_a[(s.id, t.index)].decision == rev_b[(s.id, t.index)].decision == "reject"]
        n_rejected += len(rejected)
        if rejected:
            n_dropped += 1
            continue  # a dropped session's revisions are not executed
        turns = []
        for t in s.turns:
            a, b = rev_a[(s.id, t.index)], rev_b[(s.id, t.index)]
            cypher = a.revised_cypher or b.revised_cypher  # A's revision wins when both revised
            if not cypher:
                turns.append(replace(t))
                continue
            revised, error = _revise(s.world, t, cypher, execute)
            if error is not None:
                errors.append((s.id, t.index, error))
                turns.append(replace(t))
            else:
                n_revised += 1
                turns.append(revised)
        kept.append(replace(s, turns=turns))
    return dict(sessions=kept, n_revised=n_revised, n_rejected_turns=n_rejected, n_dropped_sessions=n_dropped,
                revision_errors=errors)


def import_reviews(sessions: list[Session], sheet_a: str | Path, sheet_b: str | Path, *,
                   execute: Execute = _executor.execute) -> ReviewOutcome:
    """Merge two annotators' sheets over ``sessions`` into a ``ReviewOutcome`` (see the module doc).
    ``sessions`` is not modified."""
    rev_a = read_review_sheet(sheet_a, sessions)
    rev_b = read_review_sheet(sheet_b, sessions)
    keys = [(s.id, t.index) for s in sessions for t in s.turns]
    return ReviewOutcome(n_turns=len(keys), n_sessions=len(sessions), sheet_a=str(sheet_a), sheet_b=str(sheet_b),
                         **_agreement(keys, rev_a, rev_b), **_merge(sessions, rev_a, rev_b, execute))


# -- report ---------------------------------------------------------------------------------------

def _kappa_band(kappa: float) -> str:
    """Landis & Koch's descriptive bands."""
    if kappa < 0:
        return "poor"
    for bound, label in ((0.2, "slight"), (0.4, "fair"), (0.6, "moderate"), (0.8, "substantial")):
        if kappa <= bound:
            return label
    return "almost perfect"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def write_review_report(outcome: ReviewOutcome, path: str | Path) -> None:
    """A Markdown report of the merge: agreement, what changed, and every disagreement and error."""
    o = outcome
    kappa_note = (" (degenerate: both annotators gave every turn the same keep/reject label, so chance "
                  "agreement is 1 and kappa is defined as 1.0)") if o.kappa_degenerate else ""
    lines = [
        "# Review report", "",
        f"- annotator A: `{o.sheet_a}`",
        f"- annotator B: `{o.sheet_b}`",
        f"- sessions reviewed: {o.n_sessions}; turns reviewed: {o.n_turns}",
        f"- Cohen's kappa (keep vs reject): **{o.kappa:.3f}** ({_kappa_band(o.kappa)}){kappa_note}",
        f"- observed agreement (keep vs reject): {o.observed_agreement * 100:.1f}%; "
        f"expected by chance: {o.expected_agreement * 100:.1f}%",
        f"- agreement on the three-way decision: {o.decision_agreement * 100:.1f}%",
        f"- turns rejected by both: {o.n_rejected_turns}; sessions dropped: {o.n_dropped_sessions}; "
        f"sessions kept: {len(o.sessions)}",
        f"- revisions applied: {o.n_revised}; revisions that failed (original gold kept): "
        f"{len(o.revision_errors)}",
        "",
        "## Decisions (rows: A, columns: B)", "",
        "| A \\ B | " + " | ".join(DECISIONS) + " |",
        "|---|" + "---:|" * len(DECISIONS),
    ]
    for x in DECISIONS:
        lines.append(f"| {x} | " + " | ".join(str(o.confusion.get(x, {}).get(y, 0)) for y in DECISIONS) + " |")
    lines += ["", "## Failed revisions", ""]
    if o.revision_errors:
        lines += ["| session | turn | error |", "|---|---:|---|"]
        lines += [f"| {sid} | {i} | {_cell(msg)} |" for sid, i, msg in o.revision_errors]
    else:
        lines.append("None.")
    lines += ["", "## Disagreements", ""]
    if o.disagreements:
        lines += ["| session | turn | A | B | comment A | comment B |", "|---|---:|---|---|---|---|"]
        lines += [f"| {d.session_id} | {d.turn_index} | {d.decision_a} | {d.decision_b} | {_cell(d.comment_a)} | "
                  f"{_cell(d.comment_b)} |" for d in o.disagreements]
    else:
        lines.append("None.")
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
