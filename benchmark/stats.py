"""Dataset statistics: the numbers behind ``stats.md`` and the manifest's counts.

``stats_dict`` computes every number once; ``render_stats`` only formats it, so the Markdown report
and the manifest cannot disagree. Both are pure functions of the sessions (and the gate-failure
counts the builder passes in).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Iterable

from benchmark.session import CHAIN_MODES, OPENING, PERSONAS, PHENOMENA, Session

PHENOMENON_ORDER = (OPENING, *PHENOMENA)

# (label, lowest row count, highest row count or None for unbounded)
RESULT_SIZE_BUCKETS: tuple[tuple[str, int, int | None], ...] = (
    ("0", 0, 0), ("1", 1, 1), ("2-5", 2, 5), ("6-20", 6, 20), ("21-100", 21, 100), (">100", 101, None))


def _share(count: int, total: int) -> float:
    return round(count / total, 6) if total else 0.0


def _table(counter: Counter, canonical: Iterable[str], total: int) -> dict[str, dict[str, Any]]:
    """Counts and shares in canonical order, every canonical key present (zero when unseen); any
    other key seen in the data follows, sorted, so the counts always add up to ``total``."""
    keys = list(canonical)
    known = set(keys)
    keys += sorted(k for k in counter if k not in known)
    return {k: {"count": counter.get(k, 0), "share": _share(counter.get(k, 0), total)} for k in keys}


def _size_bucket(n_rows: int) -> str:
    for label, lo, hi in RESULT_SIZE_BUCKETS:
        if n_rows >= lo and (hi is None or n_rows <= hi):
            return label
    raise AssertionError(n_rows)  # the buckets cover every non-negative count


def stats_dict(sessions: list[Session], *, gate_failures: dict[str, int] | None = None) -> dict[str, Any]:
    """Every number of the statistics report, as plain JSON values (see ``render_stats``)."""
    turns = [t for s in sessions for t in s.turns]
    n_sessions, n_turns = len(sessions), len(turns)
    lengths = [len(s.turns) for s in sessions]

    personas = Counter(s.persona for s in sessions)
    uniform = n_sessions / len(PERSONAS) if n_sessions else 0.0
    persona_table = _table(personas, PERSONAS, n_sessions)
    for row in persona_table.values():
        # how far from a perfectly uniform spread, in percent of the uniform count
        row["deviation_pct"] = round((row["count"] - uniform) / uniform * 100, 2) if uniform else 0.0

    worlds = sorted({s.world for s in sessions})
    world_sessions = Counter(s.world for s in sessions)
    world_turns = Counter(s.world for s in sessions for _ in s.turns)
    matrix = {w: {p: 0 for p in PHENOMENON_ORDER} for w in worlds}
    for s in sessions:
        for t in s.turns:
            matrix[s.world][t.phenomenon] = matrix[s.world].get(t.phenomenon, 0) + 1

    ambiguous = sum(1 for t in turns if t.ambiguity_info)
    # a back-reference builds on a turn other than the one just before (e.g. past a topic shift)
    back_refs = sum(1 for t in turns if t.depends_on is not None and t.depends_on != t.index - 1)

    stats = {
        "sessions": n_sessions,
        "turns": n_turns,
        "turns_per_session": {
            "mean": round(n_turns / n_sessions, 4) if n_sessions else 0.0,
            "min": min(lengths, default=0),
            "max": max(lengths, default=0),
            "histogram": {str(k): v for k, v in sorted(Counter(lengths).items())},
        },
        "phenomena": _table(Counter(t.phenomenon for t in turns), PHENOMENON_ORDER, n_turns),
        "chain_modes": _table(Counter(t.chain_mode for t in turns), CHAIN_MODES, n_turns),
        "personas": persona_table,
        "worlds": {w: {"sessions": world_sessions[w], "turns": world_turns[w],
                       "share_of_turns": _share(world_turns[w], n_turns)} for w in worlds},
        "result_sizes": _table(Counter(_size_bucket(len(t.gold_rows)) for t in turns),
                               (b[0] for b in RESULT_SIZE_BUCKETS), n_turns),
        "ambiguous_turns": {"count": ambiguous, "share": _share(ambiguous, n_turns)},
        "back_references": {"count": back_refs, "share": _share(back_refs, n_turns)},
        "world_phenomenon": matrix,
    }
    if gate_failures is not None:  # only the builder knows them; absent rather than a misleading {}
        stats["gate_failures"] = dict(gate_failures)
    return stats


def opening(text: str, words: int = 5) -> str:
    """An utterance's first ``words`` words, lower-cased, punctuation dropped."""
    return " ".join(re.findall(r"[a-z0-9']+", text.lower())[:words])


def wording_overlap(sessions: list[Session], other: list[Session]) -> dict[str, Any]:
    """How much of ``sessions``' wording the ``other`` split also uses (a model fine-tuned on one split
    may recognise the other's wordings): the share of distinct five-word openings of ``sessions`` that
    occur in ``other``, and the share of its utterances whose opening does."""
    mine = Counter(opening(t.shown_utterance) for s in sessions for t in s.turns)
    theirs = {opening(t.shown_utterance) for s in other for t in s.turns}
    shared = [o for o in mine if o in theirs]
    total = sum(mine.values())
    return {"openings": len(mine), "shared_openings": len(shared),
            "share_of_openings": _share(len(shared), len(mine)),
            "share_of_utterances": _share(sum(mine[o] for o in shared), total)}


def render_overlap(name: str, other_name: str, overlap: dict[str, Any]) -> list[str]:
    """The ``stats.md`` section on wording overlap with another split."""
    return [f"## Wording overlap with {other_name}", "",
            f"- distinct five-word openings in {name}: {overlap['openings']}; also in {other_name}: "
            f"{overlap['shared_openings']} ({_pct(overlap['share_of_openings'])})",
            f"- {name} utterances whose five-word opening occurs in {other_name}: "
            f"{_pct(overlap['share_of_utterances'])}", ""]


# -- Markdown ------------------------------------------------------------------------------------

def _pct(share: float) -> str:
    return f"{share * 100:.1f}%"


def _md_table(header: list[str], rows: list[list[Any]], *, align: list[str] | None = None) -> list[str]:
    """A Markdown table; by default the first column is text (left) and the rest numbers (right)."""
    align = align or ["---"] + ["---:"] * (len(header) - 1)
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def _count_share(title: str, key: str, table: dict[str, dict[str, Any]]) -> list[str]:
    rows = [[k, v["count"], _pct(v["share"])] for k, v in table.items()]
    return [f"## {title}", "", *_md_table([key, "count", "share"], rows), ""]


def render_stats(sessions: list[Session], *, gate_failures: dict[str, int], title: str) -> str:
    """The ``stats.md`` report: totals and distributions of the sessions, and the gate failures
    (``python -m benchmark build --compare-with OTHER`` appends :func:`render_overlap`)."""
    st = stats_dict(sessions, gate_failures=gate_failures)
    tps = st["turns_per_session"]
    out = [f"# {title}", "",
           f"- sessions: {st['sessions']}",
           f"- turns: {st['turns']}",
           f"- turns per session: mean {tps['mean']:.2f}, min {tps['min']}, max {tps['max']}",
           f"- ambiguous turns: {st['ambiguous_turns']['count']} ({_pct(st['ambiguous_turns']['share'])})",
           f"- back-references (depends on a turn other than the previous one): "
           f"{st['back_references']['count']} ({_pct(st['back_references']['share'])})", ""]

    out += _count_share("Phenomena", "phenomenon", st["phenomena"])
    out += _count_share("Chain modes", "chain mode", st["chain_modes"])

    rows = [[k, v["count"], _pct(v["share"]), f"{v['deviation_pct']:+.1f}%"] for k, v in st["personas"].items()]
    out += ["## Personas", "", *_md_table(["persona", "sessions", "share", "vs uniform"], rows), ""]

    rows = [[w, v["sessions"], v["turns"], _pct(v["share_of_turns"])] for w, v in st["worlds"].items()]
    out += ["## Worlds", "", *_md_table(["world", "sessions", "turns", "share of turns"], rows), ""]

    hist = tps["histogram"]
    widest = max(hist.values(), default=0)
    rows = [[k, v, _pct(v / st["sessions"]), "#" * max(1, round(v / widest * 40))] for k, v in hist.items()]
    out += ["## Turns per session", "",
            *_md_table(["turns", "sessions", "share", ""], rows, align=["---", "---:", "---:", "---"]), ""]

    out += _count_share("Result sizes (rows per gold result)", "rows", st["result_sizes"])

    matrix = st["world_phenomenon"]
    columns = list(PHENOMENON_ORDER)
    columns += sorted({p for row in matrix.values() for p in row} - set(columns))
    rows = [[w, *(row.get(p, 0) for p in columns)] for w, row in matrix.items()]
    out += ["## Turns per world and phenomenon", "", *_md_table(["world", *columns], rows), ""]

    failures = st["gate_failures"]
    out += ["## Verification gate failures", "",
            "Candidate turns that failed a gate and were regenerated or dropped.", ""]
    if failures:
        rows = [[gate, n] for gate, n in failures.items()] + [["**total**", sum(failures.values())]]
        out += _md_table(["gate", "failures"], rows)
    else:
        out.append("None.")
    return "\n".join(out) + "\n"
