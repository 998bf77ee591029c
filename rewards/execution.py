"""Execution-backed rewards: EX (strict or relaxed) and partial credit (row-level F1), on the real Neo4j.

Both take TRL's reward signature ``fn(prompts, completions, **kwargs) -> list[float | None]`` and read
the dataset columns ``world`` (the world each row's query runs on) and ``gold_cypher``, plus, when the
dataset has them, the gold result ``gold_columns`` and ``gold_rows`` (or the Hugging Face export's
``gold_rows_json``), which are then used as they are and the gold query is not run.

How a batch is scored (``make_execution_reward`` / ``make_partial_reward``):

1. The query of each completion is the content of its ``<answer>`` tag (``extract="answer"``; or
   ``"auto"``: the answer tag, else the last fenced code block, else the whole text; ``"raw"``: the
   whole text). See ``rewards.completions``.
2. Every distinct (world, query) of the batch, predictions and the gold queries without a stored
   result alike, is executed once, in parallel on a thread pool (``max_workers``), through the pooled
   safe executor (``graphs.executor.SafeExecutor``: read-only, ``timeout`` seconds, ``max_rows`` rows).
   GRPO groups repeat queries often; each runs once. A query that timed out in the parallel pass is
   run once more on its own (``retry_timeouts``), so that the batch's own crowding of the server is
   not charged to the model. ``max_workers`` defaults to 8: on a small machine more threads only
   lengthen each query's wait (and risk spurious timeouts) without adding throughput.
3. Gold results are cached per (world, gold query) in an LRU of ``gold_cache_size`` entries shared by
   every call of the function (``gold_cache_size=0`` turns the cache off).
4. Scores. EX: ``1.0`` when the prediction's result equals the gold's (``benchmark.metrics.ex.ex_strict``
   or ``benchmark.metrics.ex_relaxed.ex_relaxed``, rows ordered when the gold's final RETURN has ORDER
   BY); ``exec_credit`` (default 0.0; e.g. 0.1 for "it at least runs") when it ran and differs;
   ``failure_score`` (default 0.0) when there is no query or the executor refused it or it failed
   (syntax, refused, timeout, memory, too_large, runtime): a model failure. A prediction whose result
   was cut at ``max_rows`` rows does not match a gold that was not cut; when both were cut (a gold
   query with more than ``max_rows`` rows, which the benchmark's gates do not produce) their first
   ``max_rows`` rows are compared. Partial: row-level F1 in [0, 1] (``row_f1``), ``failure_score`` for a failed query.
5. Infrastructure: when a query comes back with error kind ``unavailable`` (the database could not be
   reached after the executor's retries) the function **raises** ``RewardInfrastructureError``, so the
   training step fails loudly instead of teaching the model that its queries are wrong. A gold query
   that fails for any other reason is a dataset bug: that row scores ``None`` (TRL leaves it out) and a
   warning names the query.

PSJS (``make_partial_reward("psjs")``, built-in ``partial_psjs``): the provenance subgraph Jaccard
similarity of ``benchmark.metrics.psjs`` (the element ids the two queries' patterns bind), with the same
batching, gold caching (of the gold's provenance), failure and infrastructure rules; it always runs the
gold query (a stored gold result has no provenance).

Row-level F1 (``row_f1``): columns are aligned by name when the predicted columns include every gold
column name, otherwise each gold column takes the unused predicted column whose values overlap it most
(ties to the leftmost); a gold column left without a partner makes every row differ. Rows are then
compared as multisets of canonical values (``benchmark.metrics.ex.canonical``; floats rounded to 12
significant digits): precision = common / predicted rows, recall = common / gold rows, F1 their
harmonic mean; both empty -> 1.0, one empty -> 0.0. Order is ignored.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

from graphs.executor import QueryResult, SafeExecutor
from graphs.lru import LRUCache
from rewards.completions import completion_text, extract_query
from rewards.completions import kwargs_column as _column

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MAX_ROWS = 1000
DEFAULT_MAX_WORKERS = 8
DEFAULT_GOLD_CACHE = 4096


class RewardInfrastructureError(RuntimeError):
    """The database behind an execution reward is unreachable: not the model's fault, so not a score."""


# -- row-level F1 -----------------------------------------------------------------------------------------

def _round(value: tuple) -> tuple:
    tag = value[0]
    if tag == "num" and isinstance(value[1], float):
        x = value[1]
        return ("num", float(f"{x:.12g}")) if math.isfinite(x) else value
    if tag in ("list", "path"):
        return (tag, tuple(_round(v) for v in value[1]))
    if tag == "map":
        return ("map", tuple((k, _round(v)) for k, v in value[1]))
    if tag in ("node", "rel"):
        return (tag, value[1], _round(value[2]))
    return value


def _canon(value: Any) -> tuple:
    from benchmark.metrics.ex import canonical

    return _round(canonical(value))


def _align(gold_columns: Sequence[str], gold_rows, pred_columns: Sequence[str], pred_rows) -> list[int | None]:
    """For each gold column, the index of its predicted partner column (or None)."""
    if set(gold_columns) <= set(pred_columns):
        position = {c: i for i, c in enumerate(pred_columns)}
        return [position[c] for c in gold_columns]
    gold_vals = [Counter(_canon(r[i]) for r in gold_rows) for i in range(len(gold_columns))]
    pred_vals = [Counter(_canon(r[j]) for r in pred_rows) for j in range(len(pred_columns))]
    used: set[int] = set()
    out: list[int | None] = []
    for gv in gold_vals:
        best, best_overlap = None, -1
        for j, pv in enumerate(pred_vals):
            if j in used:
                continue
            overlap = sum((gv & pv).values())
            if overlap > best_overlap:
                best, best_overlap = j, overlap
        if best is not None:
            used.add(best)
        out.append(best)
    return out


def row_f1(gold_columns: Sequence[str], gold_rows: Sequence[Sequence[Any]], pred_columns: Sequence[str],
           pred_rows: Sequence[Sequence[Any]], *, pred_row_count: int | None = None) -> float:
    """Row-level F1 in [0, 1] of a predicted result against the gold (module docstring).
    ``pred_row_count``: the predicted row count when more rows exist than were fetched."""
    n_pred = max(len(pred_rows), pred_row_count or 0)
    if not gold_rows and not n_pred:
        return 1.0
    if not gold_rows or not n_pred:
        return 0.0
    align = _align(gold_columns, gold_rows, pred_columns, pred_rows)
    if any(j is None for j in align):
        return 0.0
    gold = Counter(tuple(_canon(v) for v in row) for row in gold_rows)
    pred = Counter(tuple(_canon(row[j]) for j in align) for row in pred_rows)
    common = sum((gold & pred).values())
    if not common:
        return 0.0
    precision, recall = common / n_pred, common / len(gold_rows)
    return 2 * precision * recall / (precision + recall)


# -- the shared batch machinery -----------------------------------------------------------------------------

class _Scorer:
    """Runs a batch's queries once each, in parallel, and hands (gold, prediction) pairs to ``score``."""

    def __init__(self, name: str, score: Callable[[dict, QueryResult, bool], float], *, timeout: float,
                 max_rows: int, max_workers: int, gold_cache_size: int, failure_score: float, extract: str,
                 world: str | None, executor_options: dict | None, retry_timeouts: bool = True):
        if timeout <= 0 or max_rows < 1 or max_workers < 1:
            raise ValueError("timeout must be positive, max_rows and max_workers at least 1")
        extract_query("", extract)  # validates the mode
        self.name = name
        self.score = score
        self.timeout = timeout
        self.max_rows = max_rows
        self.max_workers = max_workers
        self.failure_score = failure_score
        self.extract = extract
        self.default_world = world
        self.executor_options = dict(executor_options or {})
        self.retry_timeouts = retry_timeouts
        self.gold_cache = LRUCache(gold_cache_size)
        self._executors: dict[str, SafeExecutor] = {}
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._warned: set = set()

    def executor(self, world: str) -> SafeExecutor:
        with self._lock:
            ex = self._executors.get(world)
            if ex is None:
                ex = self._executors[world] = SafeExecutor(world, timeout=self.timeout, max_rows=self.max_rows,
                                                           **self.executor_options)
            return ex

    def pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix=f"reward-{self.name}")
            return self._pool

    def run_all(self, jobs: list[tuple[str, str]]) -> dict[tuple[str, str], QueryResult]:
        if not jobs:
            return {}
        if len(jobs) == 1:
            world, query = jobs[0]
            results = {jobs[0]: self.executor(world).run(query)}
        else:
            futures = {job: self.pool().submit(self.executor(job[0]).run, job[1]) for job in jobs}
            results = {job: f.result() for job, f in futures.items()}
        if self.retry_timeouts and len(jobs) > 1:
            # a query that timed out while the batch crowded the server gets one more run on its own,
            # so contention is not charged to the model; a truly slow query times out again
            for job, r in results.items():
                if r.error is not None and r.error.kind == "timeout":
                    results[job] = self.executor(job[0]).run(job[1])
        return results

    def __call__(self, prompts, completions, **kwargs) -> list[float | None]:
        from benchmark.metrics.ex import is_ordered

        n = len(completions)
        worlds = _column(kwargs, "world", n)
        if worlds is None:
            if self.default_world is None:
                raise ValueError(f"{self.name}: needs the dataset column 'world' (or a default world)")
            worlds = [self.default_world] * n
        golds = _column(kwargs, "gold_cypher", n)
        gold_columns = _column(kwargs, "gold_columns", n)
        gold_rows = _column(kwargs, "gold_rows", n)
        if gold_rows is None and kwargs.get("gold_rows_json") is not None:
            gold_rows = [None if r is None else json.loads(r) for r in _column(kwargs, "gold_rows_json", n)]
        if golds is None and (gold_rows is None or gold_columns is None):
            raise ValueError(f"{self.name}: needs the dataset column 'gold_cypher' (or 'gold_columns' and 'gold_rows')")

        # the gold result of each row: given, cached, or to be run
        gold_results: list[dict | None] = [None] * n
        to_run: dict[tuple[str, str], None] = {}
        for i in range(n):
            world = worlds[i] or self.default_world
            if world is None:
                raise ValueError(f"{self.name}: row {i} has no world")
            worlds[i] = world
            if gold_rows is not None and gold_columns is not None and gold_rows[i] is not None \
                    and gold_columns[i] is not None:
                gold_results[i] = {"columns": list(gold_columns[i]), "rows": list(gold_rows[i]), "truncated": False}
                continue
            if golds is None or golds[i] is None:
                raise ValueError(f"{self.name}: row {i} has neither a gold result nor a gold query")
            key = (world, golds[i])
            cached = self.gold_cache.get(key)
            if cached is not None:
                gold_results[i] = cached
            else:
                to_run[key] = None
        queries = [extract_query(completion_text(c), self.extract) for c in completions]
        for i, query in enumerate(queries):
            if query is not None:
                to_run[(worlds[i], query)] = None
        results = self.run_all(list(to_run))

        down = [r.error for r in results.values() if r.error is not None and r.error.kind == "unavailable"]
        if down:
            raise RewardInfrastructureError(
                f"{self.name}: the database is unavailable ({down[0].message}); not scoring this batch")

        scores: list[float | None] = []
        for i in range(n):
            gold = gold_results[i]
            if gold is None:
                key = (worlds[i], golds[i])
                r = results[key]
                if r.error is not None:
                    if key not in self._warned:
                        self._warned.add(key)
                        log.warning("%s: the gold query fails on %s (%s: %s); its rows score None: %s",
                                    self.name, worlds[i], r.error.kind, r.error.message, golds[i])
                    scores.append(None)
                    continue
                gold = {"columns": r.columns, "rows": r.rows, "truncated": r.truncated}
                self.gold_cache.put(key, gold)
            gold["ordered"] = gold.get("ordered", is_ordered(golds[i]) if golds is not None and golds[i] else False)
            if queries[i] is None:
                scores.append(self.failure_score)
                continue
            pred = results[(worlds[i], queries[i])]
            if pred.error is not None:
                scores.append(self.failure_score)
                continue
            scores.append(float(self.score(gold, pred, gold["ordered"])))
        return scores

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False)
                self._pool = None


def _reward_function(scorer: _Scorer, doc: str) -> Callable:
    """A plain reward function (named ``scorer.name``, as TRL logs it) over ``scorer``, which it carries
    as ``.scorer`` and ``.gold_cache``."""

    def reward(prompts, completions, **kwargs) -> list[float | None]:
        return scorer(prompts, completions, **kwargs)

    reward.__name__ = reward.__qualname__ = scorer.name
    reward.__doc__ = doc
    reward.scorer = scorer  # type: ignore[attr-defined]
    reward.gold_cache = scorer.gold_cache  # type: ignore[attr-defined]
    return reward


def make_execution_reward(mode: str = "strict", *, exec_credit: float = 0.0, failure_score: float = 0.0,
                          timeout: float = DEFAULT_TIMEOUT_S, max_rows: int = DEFAULT_MAX_ROWS,
                          max_workers: int = DEFAULT_MAX_WORKERS, gold_cache_size: int = DEFAULT_GOLD_CACHE,
                          extract: str = "answer", world: str | None = None, allow_extra_columns: bool = True,
                          executor_options: dict | None = None, retry_timeouts: bool = True,
                          name: str | None = None) -> Callable:
    """An EX reward: ``mode`` ``"strict"`` (the paper's EX) or ``"relaxed"`` (column names ignored,
    extra columns allowed unless ``allow_extra_columns=False``, float tolerance). Scores: 1.0 match,
    ``exec_credit`` ran but differs, ``failure_score`` no query / failed. ``executor_options`` go to
    ``SafeExecutor`` (e.g. ``retries``). See the module docstring for the rest."""
    if mode not in ("strict", "relaxed"):
        raise ValueError(f"execution reward mode must be 'strict' or 'relaxed', got {mode!r}")
    from benchmark.metrics.ex import ex_strict
    from benchmark.metrics.ex_relaxed import ex_relaxed

    def score(gold: dict, pred: QueryResult, ordered: bool) -> float:
        if mode == "strict":
            hit = ex_strict(gold["columns"], gold["rows"], pred.columns, pred.rows, ordered=ordered)
        else:
            hit = ex_relaxed(gold["columns"], gold["rows"], pred.columns, pred.rows, ordered=ordered,
                             allow_extra_columns=allow_extra_columns)
        if hit and pred.truncated and not gold.get("truncated"):
            hit = 0
        return 1.0 if hit else exec_credit

    fname = name or ("execution_reward" if mode == "strict" else "execution_relaxed_reward")
    scorer = _Scorer(fname, score, timeout=timeout, max_rows=max_rows, max_workers=max_workers,
                     gold_cache_size=gold_cache_size, failure_score=failure_score, extract=extract, world=world,
                     executor_options=executor_options, retry_timeouts=retry_timeouts)
    return _reward_function(scorer, f"EX ({mode}) of the <answer> query against the gold result, on the real Neo4j.")


class _PSJSScorer(_Scorer):
    """PSJS partial credit: the Jaccard similarity of the provenance subgraphs (``benchmark.metrics.psjs``);
    gold provenances cached per (world, gold query), each distinct query's provenance computed once."""

    def __call__(self, prompts, completions, **kwargs) -> list[float | None]:
        from benchmark.metrics.psjs import InfrastructureError, jaccard, provenance

        n = len(completions)
        worlds = _column(kwargs, "world", n) or [self.default_world] * n
        golds = _column(kwargs, "gold_cypher", n)
        if golds is None:
            raise ValueError(f"{self.name}: needs the dataset column 'gold_cypher'")
        worlds = [w or self.default_world for w in worlds]
        if any(w is None for w in worlds):
            raise ValueError(f"{self.name}: needs the dataset column 'world' (or a default world)")
        queries = [extract_query(completion_text(c), self.extract) for c in completions]
        gold_prov: dict[tuple[str, str], Any] = {}
        jobs: dict[tuple[str, str], None] = {}
        for world, gold in zip(worlds, golds):
            if gold is None:
                raise ValueError(f"{self.name}: a row has no gold query")
            cached = self.gold_cache.get((world, gold))
            if cached is not None:
                gold_prov[(world, gold)] = cached
            else:
                jobs[(world, gold)] = None
        for world, query in zip(worlds, queries):
            if query is not None:
                jobs[(world, query)] = None

        def run(job):
            return provenance(job[0], job[1], timeout=self.timeout)

        try:
            if len(jobs) <= 1:
                done = {job: run(job) for job in jobs}
            else:
                futures = {job: self.pool().submit(run, job) for job in jobs}
                done = {job: f.result() for job, f in futures.items()}
        except InfrastructureError as exc:
            raise RewardInfrastructureError(f"{self.name}: the database is unavailable ({exc}); "
                                            "not scoring this batch") from None
        scores: list[float | None] = []
        for world, gold, query in zip(worlds, golds, queries):
            key = (world, gold)
            if key not in gold_prov:
                gold_prov[key] = done[key]
                if done[key].ids is not None:
                    self.gold_cache.put(key, done[key])
            g = gold_prov[key]
            if g.ids is None:
                if key not in self._warned:
                    self._warned.add(key)
                    log.warning("%s: no provenance for the gold query on %s (%s): %s", self.name, world, g.reason, gold)
                scores.append(None)
                continue
            p = done.get((world, query)) if query is not None else None
            scores.append(self.failure_score if p is None or p.ids is None else jaccard(g.ids, p.ids))
        return scores


def make_partial_reward(metric: str = "f1", *, failure_score: float = 0.0, timeout: float = DEFAULT_TIMEOUT_S,
                        max_rows: int = DEFAULT_MAX_ROWS, max_workers: int = DEFAULT_MAX_WORKERS,
                        gold_cache_size: int = DEFAULT_GOLD_CACHE, extract: str = "answer",
                        world: str | None = None, executor_options: dict | None = None,
                        retry_timeouts: bool = True, name: str | None = None) -> Callable:
    """Partial credit in [0, 1]: ``metric="f1"``, row-level F1 of the ``<answer>`` query's result
    against the gold's (``row_f1``); ``metric="psjs"``, the provenance subgraph Jaccard similarity
    (``benchmark.metrics.psjs``: the graph elements the two queries' patterns bind). A failed or
    missing query scores ``failure_score``; an unreachable database raises."""
    if metric not in ("f1", "psjs"):
        raise ValueError(f"partial reward metric must be 'f1' or 'psjs', got {metric!r}")
    name = name or ("partial_reward" if metric == "f1" else "partial_psjs_reward")

    def score(gold: dict, pred: QueryResult, ordered: bool) -> float:
        return row_f1(gold["columns"], gold["rows"], pred.columns, pred.rows,
                      pred_row_count=len(pred.rows) + 1 if pred.truncated else None)

    cls = _Scorer if metric == "f1" else _PSJSScorer
    scorer = cls(name, score, timeout=timeout, max_rows=max_rows, max_workers=max_workers,
                 gold_cache_size=gold_cache_size, failure_score=failure_score, extract=extract, world=world,
                 executor_options=executor_options, retry_timeouts=retry_timeouts)
    return _reward_function(scorer, f"Partial credit ({metric}) in [0, 1] of the <answer> query against the gold.")


execution_reward = make_execution_reward("strict")
execution_relaxed_reward = make_execution_reward("relaxed")
partial_reward = make_partial_reward("f1")
partial_psjs_reward = make_partial_reward("psjs")
