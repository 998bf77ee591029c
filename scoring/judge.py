"""The one judge of a (gold, prediction) pair: EX strict, EX relaxed and PSJS on the real Neo4j.

Every place that decides whether a turn was answered calls this module: the environment's turn
reward (``envs.env.CypherTurnEnv``), ``python -m scoring score`` (``scoring.score.score_pair``),
the execution rewards (``rewards.execution``) and the run summary's PSJS (``scoring.summary``).
So the reward that training optimises and the EX that the evaluator reports are the same number.

``Judge(limits)`` owns, for its ``JudgeLimits``: one ``SafeExecutor`` per world (and one with room
for provenance lists, for PSJS), a thread pool that runs a batch's distinct queries once each
concurrently, the gold cache (``GoldCache``, an LRU keyed by (world, gold cypher) holding the gold's
result, its ordering flag and, once computed, its provenance) and PSJS.

API::

    judge = shared_judge(JudgeLimits(timeout=5))          # or Judge(limits); one per limits is plenty
    v = judge.judge(world, gold, pred, psjs=True)         # one Verdict
    vs = judge.judge_batch([Pair(world, gold, pred), ...])  # a batch: distinct queries run once each
    rs = judge.psjs_batch([(world, gold, pred), ...])     # PSJS only (provenance queries only)

A ``Pair`` may carry the gold *result* (``gold_columns``, ``gold_rows``: a dataset's stored result);
it is then used as it is and the gold query is not run (the text still gives the ordering flag and
the same-text rule).

Rules (the same for every caller):

- **Row cap and truncation.** Results are fetched up to ``limits.max_rows`` rows (the executor fetches
  one more to know whether it was cut; a stored gold with more rows counts as cut at the cap). A
  result cut at the cap is never declared equal to another result: when either side was cut the pair
  scores EX 0 (strict and relaxed) and ``truncated`` is true. This is exact when only one side was
  cut (the row counts differ) and conservative when both were (the rows past the cap are unknown).
  The one exception is the next rule.
- **Same text.** A prediction whose text is the gold's (up to surrounding whitespace and a final
  ``;``) is not run: it gets the gold's result and provenance and scores 1 (gold queries are
  verified deterministic), also when that result was cut.
- **Failures.** A missing prediction (None) scores 0 (``error="missing"``) without running anything;
  a prediction that fails (syntax, refused, timeout, memory, too_large, runtime) scores 0 with
  ``error`` its kind, and PSJS 0 without rewriting it (its provenance rewrite, the same query with
  one more column, fails the same way).
- **Infrastructure** (error kind ``unavailable``, of any query a pair needs) is no verdict: the
  verdict's ``infra_error`` is set and ``ex`` / ``ex_relaxed`` / ``psjs`` are None
  (``Verdict.raise_for_error()`` raises ``InfrastructureError``). ``psjs_batch`` raises it.
- **A failing gold** (any other error kind) cannot be scored against: ``gold_error`` is set, the
  scores are None (``raise_for_error()`` raises ``GoldQueryError``).
- **Timeouts in a batch.** When several queries ran concurrently, one that timed out is run once more
  on its own (``limits.retry_timeouts``), so that the batch's own crowding of the server is not
  charged to the model; a truly slow query times out again.
- **Ordering.** Rows are compared in order when the gold's final RETURN has ORDER BY
  (``scoring.metrics.ex.is_ordered``), else as multisets.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Sequence

from cypherturn.errors import InfrastructureError, InputError
from cypherturn.lru import LRUCache
from graphs import connections
from graphs.executor import QueryResult, SafeExecutor
from graphs.spec import get_spec
from scoring.metrics.ex import ex_strict, is_ordered
from scoring.metrics.ex_relaxed import ex_relaxed
from scoring.metrics.psjs import PROVENANCE_MAX_ROWS, Provenance, PSJSResult, provenance, psjs_from_provenance

__all__ = ["Judge", "JudgeLimits", "Pair", "Verdict", "GoldCache", "GoldEntry", "GoldQueryError", "compare",
           "same_text", "shared_judge", "TRUNCATION_RULE"]

TRUNCATION_RULE = ("a result cut at the row cap is never equal to another result: either side cut -> EX 0, "
                   "unless the prediction's text is the gold's (then EX 1, not run)")


class GoldQueryError(InputError):
    """The gold query itself failed (not an infrastructure error): the pair cannot be scored."""


@dataclass(frozen=True)
class JudgeLimits:
    """Every limit of a judge, in one place. The truncation rule is not a setting: ``TRUNCATION_RULE``.

    ``max_rows``: rows fetched per result (more: the result is cut, see the module docstring; 1,000
    is far above any benchmark gold's row count and keeps a wrong query's long result cheap);
    ``timeout``: seconds per query; ``workers``: threads that run a batch's queries (on a small
    machine more only lengthen each query's wait); ``gold_cache_size``: gold results kept (0: none);
    ``retry_timeouts``: rerun a query that timed out in a concurrent batch once on its own;
    ``retries`` / ``backoff``: the executor's retries of infrastructure failures."""

    max_rows: int = 1000
    timeout: float = 120.0
    workers: int = 8
    gold_cache_size: int = 4096
    retry_timeouts: bool = True
    retries: int = 3
    backoff: float = 0.25

    def __post_init__(self):
        if not self.timeout > 0 or self.max_rows < 1 or self.workers < 1 or self.retries < 0 or self.backoff < 0:
            raise InputError(f"bad judge limits {self}: timeout must be positive, max_rows and workers at "
                             "least 1, retries and backoff non-negative")


@dataclass
class GoldEntry:
    result: QueryResult | None
    ordered: bool
    provenance: Provenance | None = None


class GoldCache(LRUCache[GoldEntry]):
    """The project's one gold cache: a thread-safe LRU of gold results (and provenances) keyed by (world,
    gold cypher). Every judge owns one (``limits.gold_cache_size`` entries), so the process-wide default
    is the shared judge's (``shared_judge(limits).gold_cache``); a call may pass its own or None."""

    def __init__(self, maxsize: int = JudgeLimits.gold_cache_size):
        super().__init__(maxsize)


@dataclass(frozen=True)
class Pair:
    """One thing to judge: ``pred`` (None: no prediction) against ``gold`` on ``world``. ``gold_columns``
    and ``gold_rows``, when both given, are the gold's result (then ``gold`` may be None).
    ``pred_result``: the result ``pred`` already gave on ``world`` through an executor with the judge's
    limits (the environment's, when the agent submits the query it just ran): used instead of running
    the prediction again, unless it is an infrastructure failure."""

    world: str
    gold: str | None
    pred: str | None
    gold_columns: Sequence[str] | None = field(default=None, compare=False)
    gold_rows: Sequence[Sequence[Any]] | None = field(default=None, compare=False)
    pred_result: QueryResult | None = field(default=None, compare=False)

    @property
    def stored(self) -> bool:
        return self.gold_columns is not None and self.gold_rows is not None

    @property
    def pred_known(self) -> bool:
        """Whether ``pred_result`` stands for running the prediction (an infrastructure failure does not)."""
        r = self.pred_result
        return r is not None and not (r.error is not None and r.error.kind == "unavailable")


@dataclass
class Verdict:
    """The judgement of one pair. ``ex`` / ``ex_relaxed``: 0 or 1, None when not scored (``infra_error``
    or ``gold_error``); ``psjs``: in [0, 1], None when not computed or not scored; ``error``: the
    prediction's error kind, ``"missing"`` for no prediction, None when it ran; ``truncated``: a result
    was cut at the row cap; ``same_text``: the prediction is the gold's text (not run); ``db_ms``: the
    executor time of the queries this pair needed (a query shared in a batch counts for each pair)."""

    ex: int | None = 0
    ex_relaxed: int | None = 0
    psjs: float | None = None
    psjs_reason: str | None = None
    error: str | None = None
    error_message: str | None = None
    infra_error: str | None = None
    gold_error: str | None = None
    truncated: bool = False
    ordered: bool = False
    same_text: bool = False
    gold_cached: bool = False
    db_ms: float = 0.0
    gold: QueryResult | None = None
    pred: QueryResult | None = None

    @property
    def scored(self) -> bool:
        return self.infra_error is None and self.gold_error is None

    @property
    def ran(self) -> bool:
        """The prediction produced a result (it may still differ from the gold)."""
        return self.scored and self.error is None

    def raise_for_error(self) -> "Verdict":
        """``InfrastructureError`` / ``GoldQueryError`` when the pair was not scored; else self."""
        if self.infra_error is not None:
            raise InfrastructureError(self.infra_error)
        if self.gold_error is not None:
            raise GoldQueryError(self.gold_error)
        return self


def same_text(a: str | None, b: str | None) -> bool:
    """Whether two query texts are the same up to surrounding whitespace and a final ``;``."""
    if not isinstance(a, str) or not isinstance(b, str):
        return False
    return a.strip().rstrip(";").strip() == b.strip().rstrip(";").strip()


def compare(gold: QueryResult, pred: QueryResult, *, ordered: bool, relaxed: bool = False,
            allow_extra_columns: bool = True) -> int:
    """EX (strict, or relaxed) of two results under the truncation rule: 0 when either was cut."""
    if gold.truncated or pred.truncated:
        return 0
    if relaxed:
        return ex_relaxed(gold.columns, gold.rows, pred.columns, pred.rows, ordered=ordered,
                          allow_extra_columns=allow_extra_columns)
    return ex_strict(gold.columns, gold.rows, pred.columns, pred.rows, ordered=ordered)


_DEFAULT: Any = object()


class Judge:
    """Judges (gold, prediction) pairs under one ``JudgeLimits`` (module docstring). Thread-safe."""

    def __init__(self, limits: JudgeLimits | None = None):
        self.limits = limits or JudgeLimits()
        self.gold_cache = GoldCache(self.limits.gold_cache_size)
        self._executors: dict[tuple[str, bool], SafeExecutor] = {}
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    # -- resources -----------------------------------------------------------------------------
    def executor(self, world: str, *, for_provenance: bool = False) -> SafeExecutor:
        """The judge's executor of ``world`` (``for_provenance``: with room for provenance id lists).
        Raises ``SpecError`` for a world that is neither shipped nor externally configured."""
        key = (world, for_provenance)
        ex = self._executors.get(key)
        if ex is not None:
            return ex

        if connections.external_config() is None:
            get_spec(world)  # a clear error for an unknown world before anything is started
        lim = self.limits
        big = {"max_value_bytes": 16 << 20, "max_result_bytes": 64 << 20} if for_provenance else {}
        with self._lock:
            return self._executors.setdefault(key, SafeExecutor(
                world, timeout=lim.timeout, max_rows=lim.max_rows, retries=lim.retries, backoff=lim.backoff, **big))

    def _map(self, fn, jobs: list) -> list:
        """``[fn(job) ...]``, concurrently on the judge's pool when there is more than one job and worker."""
        if len(jobs) <= 1 or self.limits.workers <= 1:
            return [fn(job) for job in jobs]
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.limits.workers, thread_name_prefix="judge")
            pool = self._pool
        return list(pool.map(fn, jobs))

    def run_queries(self, jobs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], QueryResult]:
        """Run each distinct (world, query) once, concurrently; a query that timed out among others
        is run once more on its own (``limits.retry_timeouts``)."""
        jobs = list(dict.fromkeys(jobs))
        results = dict(zip(jobs, self._map(lambda job: self.executor(job[0]).run(job[1]), jobs)))
        if self.limits.retry_timeouts and len(jobs) > 1:
            for job, r in results.items():
                if r.error is not None and r.error.kind == "timeout":
                    results[job] = self.executor(job[0]).run(job[1])
        return results

    def provenance_runner(self, world: str, query: str, timeout: float) -> QueryResult:
        """Runs a provenance query (``scoring.metrics.psjs``'s ``runner``) on the judge's executor with room
        for id lists."""
        return self.executor(world, for_provenance=True).run(query, timeout=timeout, max_rows=PROVENANCE_MAX_ROWS)

    def _provenance(self, job: tuple[str, str]) -> Provenance | InfrastructureError:
        try:
            return provenance(job[0], job[1], timeout=self.limits.timeout, runner=self.provenance_runner)
        except InfrastructureError as exc:
            return exc

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False)
                self._pool = None

    # -- judging -----------------------------------------------------------------------------------
    def judge(self, world: str, gold: str | None, pred: str | None, *, psjs: bool = False,
              gold_columns: Sequence[str] | None = None, gold_rows: Sequence[Sequence[Any]] | None = None,
              pred_result: QueryResult | None = None, cache: GoldCache | None = _DEFAULT) -> Verdict:
        """The verdict of one pair (``judge_batch`` of one)."""
        return self.judge_batch([Pair(world, gold, pred, gold_columns, gold_rows, pred_result)], psjs=psjs,
                                cache=cache)[0]

    def judge_batch(self, pairs: Sequence[Pair], *, psjs: bool = False, cache: GoldCache | None = _DEFAULT
                    ) -> list[Verdict]:
        """One verdict per pair. Every distinct query of the batch (golds without a stored or cached
        result, predictions) runs once, concurrently; with ``psjs`` the provenance queries too.
        ``cache``: the gold cache to use (default the judge's own; None: none)."""
        cache = self.gold_cache if cache is _DEFAULT else cache
        cap = self.limits.max_rows
        entries: list[GoldEntry | None] = []
        cached: list[bool] = []
        partial: dict[tuple[str, str], GoldEntry] = {}  # cached provenance-only entries, to complete
        jobs: dict[tuple[str, str], None] = {}
        for p in pairs:
            if p.stored:
                rows = [list(r) for r in p.gold_rows]
                result = QueryResult(columns=list(p.gold_columns), rows=rows[:cap], truncated=len(rows) > cap)
                entries.append(GoldEntry(result, bool(p.gold) and is_ordered(p.gold)))
                cached.append(False)
                continue
            if p.gold is None:
                raise InputError(f"pair on {p.world}: neither a gold result nor a gold query")
            entry = cache.get((p.world, p.gold)) if cache is not None else None
            hit = entry is not None and entry.result is not None
            entries.append(entry if hit else None)
            cached.append(hit)
            if entry is not None and not hit:
                partial[(p.world, p.gold)] = entry
            if not hit:
                jobs[(p.world, p.gold)] = None
        for p in pairs:
            if p.pred is not None and not same_text(p.pred, p.gold) and not p.pred_known:
                jobs[(p.world, p.pred)] = None
        results = self.run_queries(jobs)

        verdicts: list[Verdict] = []
        resolved: list[GoldEntry | None] = []  # the gold entry of each pair that has one
        for p, entry, hit in zip(pairs, entries, cached):
            v = Verdict(gold_cached=hit)
            verdicts.append(v)
            if entry is None:  # the gold ran in this batch
                g = results[(p.world, p.gold)]
                v.db_ms += g.elapsed_ms
                if g.error is not None:
                    if g.error.kind == "unavailable":
                        v.infra_error = f"gold query on {p.world}: {g.error.message}"
                    else:
                        v.gold_error = f"the gold query failed on {p.world} ({g.error.kind}): {g.error.message}"
                    v.ex = v.ex_relaxed = None
                    resolved.append(None)
                    continue
                entry = partial.get((p.world, p.gold))
                if entry is not None:  # a provenance-only entry (from ``psjs_batch``): complete it
                    entry.result = g
                else:
                    entry = GoldEntry(g, is_ordered(p.gold))
                    if cache is not None:
                        cache.put((p.world, p.gold), entry)
            resolved.append(entry)
            v.gold, v.ordered, v.truncated = entry.result, entry.ordered, entry.result.truncated
            if p.pred is None:
                v.error = "missing"
                continue
            if same_text(p.pred, p.gold):
                v.pred, v.same_text, v.ex, v.ex_relaxed = entry.result, True, 1, 1
                continue
            if p.pred_known:  # already run by the caller (its time is the caller's)
                r = p.pred_result
            else:
                r = results[(p.world, p.pred)]
                v.db_ms += r.elapsed_ms
            v.pred = r
            if r.error is not None:
                if r.error.kind == "unavailable":
                    v.infra_error = f"predicted query on {p.world}: {r.error.message}"
                    v.ex = v.ex_relaxed = None
                else:
                    v.error, v.error_message = r.error.kind, r.error.message
                continue
            v.truncated = v.truncated or r.truncated
            v.ex = compare(entry.result, r, ordered=entry.ordered)
            # strict implies relaxed (the name-for-name assignment matches), so the search runs only on a miss
            v.ex_relaxed = 1 if v.ex == 1 else compare(entry.result, r, ordered=entry.ordered, relaxed=True)
        if psjs:
            self._fill_psjs(pairs, verdicts, resolved)
        return verdicts

    def _fill_psjs(self, pairs: Sequence[Pair], verdicts: list[Verdict], entries: list[GoldEntry | None]) -> None:
        jobs: dict[tuple[str, str], None] = {}
        for p, v, entry in zip(pairs, verdicts, entries):
            if not v.scored:
                continue
            if v.error is not None:
                v.psjs, v.psjs_reason = 0.0, ("no prediction" if v.error == "missing"
                                              else f"prediction failed ({v.error})")
            elif p.gold is None:
                v.psjs, v.psjs_reason = 0.0, "no gold query (a stored result has no provenance)"
            else:
                if entry.provenance is None:
                    jobs[(p.world, p.gold)] = None
                if not v.same_text:
                    jobs[(p.world, p.pred)] = None
        done = dict(zip(jobs, self._map(self._provenance, list(jobs))))
        for p, v, entry in zip(pairs, verdicts, entries):
            if not v.ran or p.gold is None:
                continue
            if entry.provenance is None:
                gp = done[(p.world, p.gold)]
                if isinstance(gp, InfrastructureError):
                    v.infra_error, v.ex, v.ex_relaxed = f"gold provenance on {p.world}: {gp}", None, None
                    continue
                entry.provenance = gp
                v.db_ms += gp.elapsed_ms
            pp = entry.provenance if v.same_text else done[(p.world, p.pred)]
            if isinstance(pp, InfrastructureError):
                v.infra_error, v.ex, v.ex_relaxed = f"predicted provenance on {p.world}: {pp}", None, None
                continue
            if not v.same_text:
                v.db_ms += pp.elapsed_ms
            res = psjs_from_provenance(entry.provenance, pp)
            v.psjs, v.psjs_reason = res.score, res.reason

    def psjs_batch(self, items: Sequence[tuple[str, str, str | None]], *, cache: GoldCache | None = _DEFAULT
                   ) -> list[PSJSResult]:
        """PSJS of each (world, gold, prediction) from provenance queries alone (no plain runs): each
        distinct query's provenance once, concurrently; gold provenances cached. ``gold_size`` is None
        when the gold's provenance could not be computed, ``pred_size`` when the prediction's could not
        (or there is none). Raises ``InfrastructureError`` when the database is unavailable."""
        cache = self.gold_cache if cache is _DEFAULT else cache
        entries: dict[tuple[str, str], GoldEntry | None] = {}
        jobs: dict[tuple[str, str], None] = {}
        for world, gold, pred in items:
            key = (world, gold)
            if key not in entries:
                entries[key] = cache.get(key) if cache is not None else None
                if entries[key] is None or entries[key].provenance is None:
                    jobs[key] = None
            if pred is not None and not same_text(pred, gold):
                jobs[(world, pred)] = None
        done = dict(zip(jobs, self._map(self._provenance, list(jobs))))
        down = next((x for x in done.values() if isinstance(x, InfrastructureError)), None)
        if down is not None:
            raise down
        for key in jobs:
            if key in entries and done[key].ids is not None and cache is not None:
                if entries[key] is None:
                    entries[key] = GoldEntry(None, is_ordered(key[1]))
                    cache.put(key, entries[key])
                entries[key].provenance = done[key]
        out = []
        for world, gold, pred in items:
            entry = entries[(world, gold)]
            g = entry.provenance if entry is not None and entry.provenance is not None else done[(world, gold)]
            p = None if pred is None else g if same_text(pred, gold) else done[(world, pred)]
            out.append(psjs_from_provenance(g, p))
        return out

_SHARED: dict[JudgeLimits, Judge] = {}
_SHARED_LOCK = threading.Lock()


def shared_judge(limits: JudgeLimits | None = None, **changes: Any) -> Judge:
    """The process-wide judge of ``limits`` (default ``JudgeLimits()``, with ``changes`` applied):
    one set of executors, one pool and one gold cache per distinct limits."""
    limits = replace(limits or JudgeLimits(), **changes)
    with _SHARED_LOCK:
        judge = _SHARED.get(limits)
        if judge is None:
            judge = _SHARED[limits] = Judge(limits)
        return judge

