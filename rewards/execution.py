"""Execution-backed rewards: EX (strict or relaxed) and partial credit (row-level F1), on the real Neo4j.

Both take TRL's reward signature ``fn(prompts, completions, **kwargs) -> list[float | None]`` and read
the dataset columns ``world`` (the world each row's query runs on) and ``gold_cypher``, plus, when the
dataset has them, the gold result ``gold_columns`` and ``gold_rows`` (or the session rows'
``gold_rows_json``, decoded by the session codec, ``benchmark.session``), which are then used as they
are and the gold query is not run.

How a batch is scored: every reward is an ``ExecutionReward`` (a picklable callable class, named as
TRL logs it) configured by one ``ExecutionRewardOptions``, and judged by ``scoring.Judge`` — the same
judge as the environment's turn reward and ``python -m scoring score``, so for equal limits the
three give the same verdict (the judge's docstring has the rules).

1. The query of each completion is the content of its ``<answer>`` tag (``extract="answer"``; or
   ``"auto"``: the answer tag, else the last fenced code block, else the whole text; ``"raw"``: the
   whole text). See ``rewards.completions``.
2. Every distinct (world, query) of the batch, predictions and the gold queries without a stored
   result alike, is executed once, concurrently on the judge's pool (``limits.workers``, default 8:
   on a small machine more threads only lengthen each query's wait), through its safe executors
   (read-only, ``limits.timeout`` seconds — 5 by default for rewards —, ``limits.max_rows`` rows). A
   query that timed out among others is run once more on its own (``limits.retry_timeouts``).
3. Gold results are cached per (world, gold query) in an LRU of ``limits.gold_cache_size`` entries
   shared by every call of the reward (0 turns the cache off).
4. Scores. EX: ``1.0`` when the judge's verdict is a match (strict, or relaxed); ``exec_credit``
   (default 0.0; e.g. 0.1 for "it at least runs") when it ran and differs — including a result cut at
   the row cap, which never matches (the judge's truncation rule); ``failure_score`` (default 0.0)
   when there is no query or it failed (syntax, refused, timeout, memory, too_large, runtime).
   Partial: row-level F1 in [0, 1] (``row_f1``), ``failure_score`` for a failed query.
5. Infrastructure: when a query comes back with error kind ``unavailable`` (the database could not be
   reached after the executor's retries) the reward **raises** ``RewardInfrastructureError`` (an
   ``InfrastructureError``), so the training step fails loudly instead of teaching the model that its
   queries are wrong. A gold query that fails for any other reason is a dataset bug: that row scores
   ``None`` (TRL leaves it out) and a warning names the query.

Options as keyword arguments (``make_execution_reward(exec_credit=0.1, timeout=3)``, or a YAML
``options:`` mapping) are the fields of ``ExecutionRewardOptions`` plus the judge limits ``timeout``,
``max_rows``, ``max_workers``, ``gold_cache_size``, ``retry_timeouts`` and ``executor_options``
(``retries``, ``backoff``).

PSJS (``make_partial_reward("psjs")``, built-in ``partial_psjs``): the provenance subgraph Jaccard
similarity of ``scoring.metrics.psjs`` (the element ids the two queries' patterns bind), with the same
batching, gold caching (of the gold's provenance), failure and infrastructure rules
(``Judge.psjs_batch``: provenance queries only); it needs the gold query (a stored result has no
provenance).

Row-level F1 (``row_f1``): the judge's EX relaxed rules, with partial credit. Column names are ignored:
the gold columns are aligned to distinct predicted columns by ``scoring.metrics.ex_relaxed.align_columns``
(the assignment under which the most gold rows find an equal predicted row; extra predicted columns
allowed), and values are equal under the same float tolerance (``scoring.metrics.ex_relaxed.close``).
Then precision = common / predicted rows, recall = common / gold rows, F1 their harmonic mean; both
empty -> 1.0, one empty, fewer predicted columns than gold ones, or no row in common -> 0.0. Order is
ignored. So a prediction scores F1 1.0 exactly when EX relaxed would score it 1 (unordered).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from benchmark.session import decode_json
from cypherturn.errors import InfrastructureError, InputError
from rewards.completions import completion_text, extract_query
from rewards.completions import kwargs_column as _column
from scoring.judge import Judge, JudgeLimits, Pair, Verdict, compare
from scoring.metrics.ex_relaxed import align_columns

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 5.0  # the rewards' per-query limit: a training step waits for its slowest query


class RewardInfrastructureError(InfrastructureError):
    """The database behind an execution reward is unreachable: not the model's fault, so not a score."""


# -- row-level F1 -----------------------------------------------------------------------------------------

def row_f1(gold_columns: Sequence[str], gold_rows: Sequence[Sequence[Any]], pred_columns: Sequence[str],
           pred_rows: Sequence[Sequence[Any]], *, pred_row_count: int | None = None) -> float:
    """Row-level F1 in [0, 1] of a predicted result against the gold (module docstring).
    ``pred_row_count``: the predicted row count when more rows exist than were fetched."""
    n_pred = max(len(pred_rows), pred_row_count or 0)
    if not gold_rows and not n_pred:
        return 1.0
    if not gold_rows or not n_pred:
        return 0.0
    alignment = align_columns(gold_columns, gold_rows, pred_columns, pred_rows)
    if alignment is None:
        return 0.0
    precision, recall = alignment.common / n_pred, alignment.common / len(gold_rows)
    return 2 * precision * recall / (precision + recall)


# -- the rewards ------------------------------------------------------------------------------------------

_LIMIT_KEYS = {"timeout", "max_rows", "gold_cache_size", "retry_timeouts"}
_EXECUTOR_KEYS = {"retries", "backoff"}


@dataclass(frozen=True)
class ExecutionRewardOptions:
    """Everything an execution reward is configured with.

    ``kind``: ``"strict"`` / ``"relaxed"`` (EX) or ``"f1"`` / ``"psjs"`` (partial credit);
    ``exec_credit``: the EX score of a query that ran but differs; ``failure_score``: the score of no
    query or a failed one; ``allow_extra_columns``: relaxed EX forgives extra predicted columns;
    ``extract``: how the query is taken from a completion (``rewards.completions``); ``world``: the
    world of rows without a ``world`` column; ``name``: the function name TRL logs; ``limits``: the
    judge's (``scoring.JudgeLimits``: row cap, timeout, workers, gold cache, retries)."""

    kind: str = "strict"
    exec_credit: float = 0.0
    failure_score: float = 0.0
    allow_extra_columns: bool = True
    extract: str = "answer"
    world: str | None = None
    name: str | None = None
    limits: JudgeLimits = field(default_factory=lambda: JudgeLimits(timeout=DEFAULT_TIMEOUT_S))

    def __post_init__(self):
        if self.kind not in KINDS:
            raise InputError(f"execution reward kind must be one of {sorted(KINDS)}, got {self.kind!r}")
        extract_query("", self.extract)  # validates the mode

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> "ExecutionRewardOptions":
        """Options from flat keyword arguments, as configs give them: the fields above, plus the judge
        limits ``timeout``, ``max_rows``, ``max_workers``, ``gold_cache_size``, ``retry_timeouts`` and
        ``executor_options`` (``{"retries": ..., "backoff": ...}``)."""
        limits: dict[str, Any] = {}
        for key in list(kwargs):
            if key in _LIMIT_KEYS:
                limits[key] = kwargs.pop(key)
            elif key == "max_workers":
                limits["workers"] = kwargs.pop(key)
        executor_options = kwargs.pop("executor_options", None) or {}
        unknown = set(executor_options) - _EXECUTOR_KEYS
        if unknown:
            raise TypeError(f"executor_options takes {sorted(_EXECUTOR_KEYS)}, got {sorted(unknown)}")
        limits.update(executor_options)
        base = kwargs.pop("limits", None) or JudgeLimits(timeout=DEFAULT_TIMEOUT_S)
        return cls(**kwargs, limits=replace(base, **limits))


KINDS = {"strict": "execution_reward", "relaxed": "execution_relaxed_reward", "f1": "partial_reward",
         "psjs": "partial_psjs_reward"}


class ExecutionReward:
    """A TRL reward ``fn(prompts, completions, **kwargs) -> list[float | None]`` judged by
    ``scoring.Judge`` (module docstring). A picklable callable: what it carries across processes is
    its options; the judge (executors, pool, gold cache) is made on first use in each process.
    ``__name__`` is what TRL logs (``options.name`` or the built-in name of the kind)."""

    def __init__(self, options: ExecutionRewardOptions | None = None):
        self.options = options or ExecutionRewardOptions()
        self.__name__ = self.__qualname__ = self.options.name or KINDS[self.options.kind]
        self._judge: Judge | None = None
        self._lock = threading.Lock()
        self._warned: set = set()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.options!r})"

    def __getstate__(self) -> dict:
        return {"options": self.options}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["options"])

    @property
    def judge(self) -> Judge:
        with self._lock:
            if self._judge is None:
                self._judge = Judge(self.options.limits)
            return self._judge

    @property
    def gold_cache(self):
        return self.judge.gold_cache

    def close(self) -> None:
        if self._judge is not None:
            self._judge.close()

    def _down(self, message: str) -> RewardInfrastructureError:
        return RewardInfrastructureError(f"{self.__name__}: the database is unavailable ({message}); "
                                         "not scoring this batch")

    def _warn_gold(self, key, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning("%s: %s; its rows score None: %s", self.__name__, message, key[1])

    def _columns(self, n: int, kwargs: dict) -> tuple[list[str], list | None, list | None, list | None]:
        worlds = _column(kwargs, "world", n)
        default = self.options.world
        worlds = [default] * n if worlds is None else [w or default for w in worlds]
        if any(w is None for w in worlds):
            raise InputError(f"{self.__name__}: needs the dataset column 'world' (or a default world)")
        golds = _column(kwargs, "gold_cypher", n)
        gold_columns = _column(kwargs, "gold_columns", n)
        gold_rows = _column(kwargs, "gold_rows", n)
        if gold_rows is None and kwargs.get("gold_rows_json") is not None:
            gold_rows = [None if r is None else decode_json(r) for r in _column(kwargs, "gold_rows_json", n)]
        return worlds, golds, gold_columns, gold_rows

    def __call__(self, prompts, completions, **kwargs) -> list[float | None]:
        o = self.options
        n = len(completions)
        worlds, golds, gold_columns, gold_rows = self._columns(n, kwargs)
        queries = [extract_query(completion_text(c), o.extract) for c in completions]
        if o.kind == "psjs":
            return self._psjs(worlds, golds, queries)
        if golds is None and (gold_rows is None or gold_columns is None):
            raise InputError(f"{self.__name__}: needs the dataset column 'gold_cypher' "
                             "(or 'gold_columns' and 'gold_rows')")
        pairs = []
        for i in range(n):
            stored = gold_rows is not None and gold_columns is not None and gold_rows[i] is not None \
                and gold_columns[i] is not None
            gold = golds[i] if golds is not None else None
            if not stored and gold is None:
                raise InputError(f"{self.__name__}: row {i} has neither a gold result nor a gold query")
            pairs.append(Pair(worlds[i], gold, queries[i], gold_columns[i] if stored else None,
                              gold_rows[i] if stored else None))
        verdicts = self.judge.judge_batch(pairs)
        down = next((v.infra_error for v in verdicts if v.infra_error is not None), None)
        if down is not None:
            raise self._down(down)
        scores: list[float | None] = []
        for p, v in zip(pairs, verdicts):
            if v.gold_error is not None:
                self._warn_gold((p.world, p.gold), v.gold_error)
                scores.append(None)
            elif not v.ran:
                scores.append(o.failure_score)
            else:
                scores.append(self._score(v))
        return scores

    def _score(self, v: Verdict) -> float:
        o = self.options
        if o.kind == "f1":
            return row_f1(v.gold.columns, v.gold.rows, v.pred.columns, v.pred.rows,
                          pred_row_count=len(v.pred.rows) + 1 if v.pred.truncated else None)
        if o.kind == "strict":
            hit = v.ex
        elif o.allow_extra_columns or v.same_text:
            hit = v.ex_relaxed
        else:
            hit = compare(v.gold, v.pred, ordered=v.ordered, relaxed=True, allow_extra_columns=False)
        return 1.0 if hit else o.exec_credit

    def _psjs(self, worlds: list[str], golds: list | None, queries: list[str | None]) -> list[float | None]:
        if golds is None or any(g is None for g in golds):
            raise InputError(f"{self.__name__}: needs the dataset column 'gold_cypher' (a gold query per row)")
        try:
            results = self.judge.psjs_batch(list(zip(worlds, golds, queries)))
        except InfrastructureError as exc:
            raise self._down(str(exc)) from None
        scores: list[float | None] = []
        for world, gold, res in zip(worlds, golds, results):
            if res.gold_size is None:
                self._warn_gold((world, gold), f"no provenance for the gold query on {world} ({res.reason})")
                scores.append(None)
            else:
                scores.append(self.options.failure_score if res.pred_size is None else res.score)
        return scores


def make_execution_reward(mode: str = "strict", **kwargs: Any) -> ExecutionReward:
    """An EX reward: ``mode`` ``"strict"`` (the paper's EX) or ``"relaxed"`` (column names ignored,
    extra columns allowed unless ``allow_extra_columns=False``, float tolerance). Scores: 1.0 match,
    ``exec_credit`` ran but differs, ``failure_score`` no query / failed. Keyword arguments: the fields
    of ``ExecutionRewardOptions`` and the judge limits (``ExecutionRewardOptions.from_kwargs``); or build
    ``ExecutionReward(ExecutionRewardOptions(...))`` directly."""
    if mode not in ("strict", "relaxed"):
        raise InputError(f"execution reward mode must be 'strict' or 'relaxed', got {mode!r}")
    return ExecutionReward(ExecutionRewardOptions.from_kwargs(kind=mode, **kwargs))


def make_partial_reward(metric: str = "f1", **kwargs: Any) -> ExecutionReward:
    """Partial credit in [0, 1]: ``metric="f1"``, row-level F1 of the ``<answer>`` query's result
    against the gold's (``row_f1``); ``metric="psjs"``, the provenance subgraph Jaccard similarity
    (``scoring.metrics.psjs``: the graph elements the two queries' patterns bind). A failed or
    missing query scores ``failure_score``; an unreachable database raises. Options as for
    ``make_execution_reward``."""
    if metric not in ("f1", "psjs"):
        raise InputError(f"partial reward metric must be 'f1' or 'psjs', got {metric!r}")
    return ExecutionReward(ExecutionRewardOptions.from_kwargs(kind=metric, **kwargs))


execution_reward = make_execution_reward("strict")
execution_relaxed_reward = make_execution_reward("relaxed")
partial_reward = make_partial_reward("f1")
partial_psjs_reward = make_partial_reward("psjs")
