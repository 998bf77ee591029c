"""Hugging Face export: the sessions as a ``datasets.Dataset`` saved to disk, with a dataset card.

One row per session, ``Session.to_row()`` (``benchmark.session``, the one codec: ``turns`` is a list of
structs, mixed-type values stored as JSON text: ``gold_rows_json``, ``ambiguity_info_json``,
``gold_key_values[].value_json``); ``load_hf_sessions`` reverses it with ``Session.from_row`` (the
session values are JSON values, so the round trip is lossless). This module adds the Arrow types.

``datasets`` is imported lazily: only the export needs it.
"""

from __future__ import annotations

import hashlib
import shutil
from contextlib import contextmanager
from pathlib import Path

from benchmark.session import Session, encode_json
from benchmark.stats import stats_dict

HF_DIRNAME = "hf"


def _features():
    """The Arrow types of ``Session.to_row()``."""
    from datasets import Features, Value

    turn = {
        "index": Value("int32"),
        "utterance": Value("string"),
        "gold_cypher": Value("string"),
        "gold_columns": [Value("string")],
        "gold_rows_json": Value("string"),
        "phenomenon": Value("string"),
        "chain_mode": Value("string"),
        "depends_on": Value("int32"),  # null for the opening turn and topic shifts
        "ambiguity_info_json": Value("string"),  # null when the turn is not ambiguous
        "gold_key_values": [{"label": Value("string"), "property": Value("string"),
                             "value_json": Value("string")}],
        "gold_triples": [Value("string")],
        # names said as users type them (issue 20): every field a string (only string values are typed)
        "typed_names": [{"label": Value("string"), "property": Value("string"), "stored": Value("string"),
                         "typed": Value("string"), "kind": Value("string")}],
    }
    return Features({"id": Value("string"), "world": Value("string"), "persona": Value("string"),
                     "num_turns": Value("int32"), "turns": [turn]})


def _fingerprint(sessions: list[Session], manifest: dict) -> str:
    """A content fingerprint, so the same sessions save to byte-identical files (``datasets`` would
    otherwise put a random fingerprint into ``state.json``)."""
    h = hashlib.sha256()
    for s in sessions:
        h.update(s.to_json().encode("utf-8") + b"\n")
    h.update(encode_json(manifest.get("split")).encode("utf-8"))
    return h.hexdigest()[:32]


@contextmanager
def _quiet_progress():
    """Silence the per-shard progress bars of ``datasets`` (the builder reports its own progress)."""
    from datasets.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    was_disabled = are_progress_bars_disabled()
    disable_progress_bars()
    try:
        yield
    finally:
        if not was_disabled:
            enable_progress_bars()


def save_hf_dataset(sessions: list[Session], out_dir: Path, *, manifest: dict) -> Path:
    """Save the sessions under ``out_dir/hf`` (``datasets.load_from_disk`` reads it) with a card in
    ``out_dir/hf/README.md``; returns that directory. An existing ``out_dir/hf`` is replaced."""
    from datasets import Dataset, NamedSplit

    split = manifest.get("split")
    features = _features()
    rows = [s.to_row() for s in sessions]
    # column-wise, so that an empty session list still yields the declared columns
    staged = Dataset.from_dict({name: [r[name] for r in rows] for name in features}, features=features,
                               split=NamedSplit(split) if split else None)
    dataset = Dataset(staged.data, info=staged.info, split=staged.split,
                      fingerprint=_fingerprint(sessions, manifest))
    target = Path(out_dir) / HF_DIRNAME
    if target.exists():
        shutil.rmtree(target)  # stale shards of an earlier build must not linger
    with _quiet_progress():
        dataset.save_to_disk(str(target), num_shards=1)  # one shard, also when empty
    (target / "README.md").write_text(render_card(sessions, manifest), encoding="utf-8")
    return target


def load_hf_sessions(path: str | Path) -> list[Session]:
    """The sessions of a dataset saved by ``save_hf_dataset`` (``path`` is the build directory or its
    ``hf`` folder), equal to the ones that were saved."""
    from datasets import load_from_disk

    path = Path(path)
    if not (path / "state.json").exists() and (path / HF_DIRNAME / "state.json").exists():
        path = path / HF_DIRNAME
    return [Session.from_row(row) for row in load_from_disk(str(path))]


# -- dataset card ---------------------------------------------------------------------------------

def _size_category(n: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                         (1_000_000, "100K<n<1M")):
        if n < limit:
            return label
    return "1M<n<10M"


def _counts_lines(values: dict, indent: str = "") -> list[str]:
    """Manifest entries as a nested bullet list, whatever shape the builder gives them."""
    lines = []
    for key, value in values.items():
        if isinstance(value, dict):
            lines.append(f"{indent}- {key}:")
            lines += _counts_lines(value, indent + "  ")
        else:
            lines.append(f"{indent}- {key}: `{value}`")
    return lines


FIELDS_DOC = """\
One row per session:

| field | type | meaning |
|---|---|---|
| `id` | string | session id, `<world>-<number>` |
| `world` | string | the synthetic Neo4j world the session queries |
| `persona` | string | the user persona (changes register, not meaning) |
| `num_turns` | int32 | number of turns |
| `turns` | list of structs | the turns, in order |

Each turn:

| field | type | meaning |
|---|---|---|
| `index` | int32 | position in the session, from 0 |
| `utterance` | string | the fully specified user request |
| `gold_cypher` | string | the gold Cypher query |
| `gold_columns` | list of string | column names of the gold result |
| `gold_rows_json` | string (JSON) | the gold result rows, as a JSON list of rows (the safe executor's normalized values) |
| `phenomenon` | string | `OPENING` for turn 0, else one of the 13 conversational phenomena |
| `chain_mode` | string | how the turn builds on the prior result set (one of 9 chain modes) |
| `depends_on` | int32 or null | index of the turn whose result set this turn builds on; null for the opening turn and topic shifts |
| `ambiguity_info_json` | string (JSON) or null | `{"utterance": <the under-specified wording the user says>, "clarification": <scripted answer to a clarifying question>}` |
| `gold_key_values` | list of `{label, property, value_json}` | entity key-values of the gold answer; `value_json` is the JSON-encoded value |
| `gold_triples` | list of string | relationship triples the gold query traverses, e.g. `(:A)-[:R]->(:B)` |
| `typed_names` | list of `{label, property, stored, typed, kind}` | names the utterance says as a user types them (`kind`: `typo`, `partial` or `case`): the utterance has `typed`, the gold has `stored`, and `SEARCH_VALUES` on `label`/`property` with `typed` returns `stored` (verified) |

JSON-encoded fields are text because their values mix types; decode them with `json.loads`, or load
the original objects with `benchmark.hf.load_hf_sessions`. The same sessions ship as `sessions.jsonl`
next to this folder.
"""

GATES_DOC = """\
Every turn passed these gates before it was kept (a turn that failed one was regenerated or dropped,
and counted in `stats.md`):

- the gold query executes on its world through the read-only safe executor;
- the result is deterministic: no ties at a `LIMIT` / `ORDER BY` boundary, stable under reruns;
- the result is non-empty unless the turn is designed to be empty;
- a chain-dependent turn really depends on the prior result set (its query builds on it);
- no template slot or schema identifier leaks into a non-technical persona's utterance;
- every returned column is named by the rule the task prompt states: a property under its own name
  (`p.title AS title`), an aggregate as function_property (`avg_price`, `sum_budget`), a count as `count`;
- a listed result is never a set the session already listed, and a turn that goes back past a topic
  shift never names a set of the same kind as the current one;
- thresholds are round numbers (as people say them) that still split the set; sums run only over
  properties the world spec marks additive, max/min/avg only over comparable ones; a symmetric
  relationship (an alliance) is read in both directions; a contrast never complements a contrast;
- a name said as a user types it (a typo, a partial name, other case) equals no stored value, and
  `SEARCH_VALUES` on its label and property returns the stored value, alone or clearly the nearest.
"""


GENERATION_DOC = """\
Sessions are generated, not collected: a seeded generator builds each synthetic world (its schema, \
entities and values) and loads it into Neo4j; a session builder samples a persona and a chain of \
phenomena, instantiates query and utterance templates from the generator's own intermediate \
representation (so the gold key-values and triples are exact, not parsed from text), and executes every \
gold query through the read-only safe executor to record the gold result. The same seed rebuilds a \
byte-identical dataset. An optional LLM rewrite pass may restyle utterances for naturalness; a rewrite is \
kept only if it preserves every entity name and value verbatim. The `train` and `test` splits draw their \
wordings (lead-ins, phrasings, persona phrases) from disjoint pools, so a model trained on `train` cannot \
score on `test` by recognising phrasings. Phenomenon labels are the paper's 13: a minimum is labelled \
`AGG_MAX`, the extreme-value phenomenon."""

TAGS = ("text-to-cypher", "cypher", "neo4j", "knowledge-graph", "conversational", "multi-turn")


def _front_matter(n_sessions: int, license_id: str) -> list[str]:
    """The card's YAML front matter (the metadata the Hub indexes)."""
    return ["---", f"license: {license_id}", "language:", "- en",
            "task_categories:", "- text-generation", "- question-answering",
            "tags:", *(f"- {t}" for t in TAGS),
            "pretty_name: CypherTurn Gym", "size_categories:", f"- {_size_category(n_sessions)}", "---"]


def _counts_section(st: dict, split: str) -> list[str]:
    """The title, the summary and the counts: sessions, turns, per world and per phenomenon."""
    phen = [f"| {k} | {v['count']} | {v['share'] * 100:.1f}% |" for k, v in st["phenomena"].items()]
    worlds = [f"| {w} | {v['sessions']} | {v['turns']} |" for w, v in st["worlds"].items()]
    return [
        "# CypherTurn Gym",
        "",
        "A conversational Text-to-Cypher benchmark over synthetic Neo4j worlds: multi-turn sessions in "
        "which each user turn builds on the result of an earlier one (expand, pivot, aggregate, filter, "
        "contrast, topic shift), with a verified gold Cypher query and gold result for every turn.",
        "",
        "## Counts",
        "",
        f"- split: `{split}`",
        f"- sessions: {st['sessions']}",
        f"- turns: {st['turns']} (mean {st['turns_per_session']['mean']:.2f} per session, "
        f"min {st['turns_per_session']['min']}, max {st['turns_per_session']['max']})",
        f"- ambiguous turns: {st['ambiguous_turns']['count']}",
        "",
        "| world | sessions | turns |",
        "|---|---:|---:|",
        *worlds,
        "",
        "| phenomenon | turns | share |",
        "|---|---:|---:|",
        *phen,
        "",
    ]


def _method_sections(split: str) -> list[str]:
    """What the fields hold, what the splits are, how the sessions were generated and verified."""
    return [
        "## Fields", "", FIELDS_DOC,
        "## Splits", "",
        f"This folder holds the `{split}` split. Each split is its own build "
        "(`python -m benchmark build --split test|train`): `test` runs over the benchmark worlds, "
        "`train` over training worlds whose schemas are disjoint from them.",
        "",
        "## How it was generated", "", GENERATION_DOC, "",
        "## Verification gates", "", GATES_DOC,
    ]


def _build_section(manifest: dict) -> list[str]:
    """The gate rejections of this build and its manifest (less the stats the tables show)."""
    out = []
    failures = manifest.get("gate_failures")
    if isinstance(failures, dict):
        out += ["Candidate turns rejected by each gate during this build:", "",
                *(_counts_lines(failures) if failures else ["- none"]), ""]
    return out + ["## Build manifest", "",
                  "From `manifest.json` (its `stats` are the tables above and `stats.md`):", "",
                  *_counts_lines({k: v for k, v in manifest.items() if k != "stats"}), ""]


def render_card(sessions: list[Session], manifest: dict) -> str:
    """The dataset card (``README.md`` with YAML front matter) for ``sessions``."""
    st = stats_dict(sessions)
    split = manifest.get("split") or "train"
    return "\n".join(_front_matter(st["sessions"], manifest.get("license", "apache-2.0"))
                     + _counts_section(st, split) + _method_sections(split) + _build_section(manifest))
