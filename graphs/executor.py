"""The safe executor: the only way model-written Cypher reaches a database.

Contract of ``SafeExecutor.run(query)`` (and of ``execute(world, query)``): it never raises for
anything about the query or the database; it returns a ``QueryResult`` whose ``error`` is ``None``
or a ``QueryError`` with one of these kinds:

- ``syntax``      the text is not a Cypher query Neo4j accepts (also: empty, malformed unicode, NUL);
- ``refused``     the query is not a plain read (any of the three guards below said no);
- ``timeout``     it ran past its time limit (server-side transaction timeout, and a client deadline);
- ``memory``      Neo4j stopped it at the per-transaction memory cap;
- ``too_large``   the query text, one value or the whole result is over its size cap;
- ``runtime``     Neo4j raised an error while running it (type errors, division by zero, …), or the result
                  holds a value the client cannot decode (a date outside years 1-9999, lists nested
                  more than ``graphs.values.MAX_DEPTH`` deep): not retried, it would come back;
- ``unavailable`` the database could not be reached after retries: infrastructure, not the model.

When the local server's watchdog has to halt the JVM for a query it cannot stop, it records which
(``graphs.server.halt_record``): that query gets its own ``timeout`` or ``memory`` error and is not
retried; the other queries the halt cut off are ``unavailable`` and retried like any outage.

Read-only by independent guards: a lexical deny list (``graphs.cypher_guard``, which lexes as Neo4j
does); the ``EXPLAIN`` plan, which must report query type ``r`` and hold only operators on
``READ_OPERATORS`` (no Show*/Terminate*/LoadCSV operators, procedure calls only to the schema
allow-list), a check that does not depend on the lexer; and a READ-access-mode auto-commit transaction,
in which the server itself refuses any write (a test switches the first two off and the write is still
refused). The plan verdict is cached per query text. Rows are capped by fetching at most ``max_rows + 1`` records (the query text is
never rewritten) and ``truncated`` says whether more existed. Values are normalized by
``graphs.values.normalize``. Each attempt runs on the caller's thread; one watchdog thread for all of
them (``graphs.deadlines``) kills the connection of an attempt still waiting ``CLIENT_GRACE_S`` after its
server-side timeout (a frozen server, a result stuck in sending), which ends it as a ``timeout``. The
deadline is one per call: retries get what is left of it, and it covers discarding the rows past the cap
and the reset on handing the connection back; a result given up mid-stream has its connection closed. A
call returns within ``timeout + RETURN_GRACE_S``, waiting for a connection included: taking one from a
full pool (every connection of the process to that server busy) or opening one counts against the same
deadline, and a call whose deadline passes before it gets one is ``unavailable`` (the client's
infrastructure; the query never ran). Only infrastructure failures (connection refused or dropped, transient
server errors, a reply the driver cannot decode) are retried, with exponential backoff, on a new connection.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import neo4j
from neo4j.exceptions import (BrokenRecordError, ClientError, ConnectionAcquisitionTimeoutError, DatabaseError,
                              DriverError, Neo4jError, ServiceUnavailable, SessionExpired, TransientError)

from cypherturn.errors import CypherTurnError, InputError
from cypherturn.lru import LRUCache
from graphs import connections, server
from graphs.cypher_guard import ALLOWED_PROCEDURES, GuardRefusal, check_read_only
from graphs.cypher_syntax import InvalidEscape
from graphs.deadlines import WATCHDOG
from graphs.spec import get_spec
from graphs.values import MAX_DEPTH, BrokenHydrationObject, UndecodableValue, normalize, undecodable

try:  # the driver's own deadline type: one absolute bound for every pool wait of a session (see _pool_deadline)
    from neo4j._deadline import Deadline as _DriverDeadline
except ImportError:  # pragma: no cover - a driver that moved it: each wait gets the time left at the start
    _DriverDeadline = None

ERROR_KINDS = ("syntax", "refused", "timeout", "memory", "too_large", "runtime", "unavailable")

DEFAULT_TIMEOUT_S = 120.0  # the paper's per-query limit; training uses far less
DEFAULT_MAX_ROWS = 1000
DEFAULT_MAX_VALUE_BYTES = 1 << 20
DEFAULT_MAX_RESULT_BYTES = 16 << 20
DEFAULT_MAX_QUERY_CHARS = 100_000
CLIENT_GRACE_S = 0.5  # the client deadline trails the server-side timeout by this much
# A call returns within its timeout plus this: the client deadline (CLIENT_GRACE_S) and the "does the server
# still answer?" probe after a dropped connection (PROBE_GRACE_S), which may run past it
RETURN_GRACE_S = 1.0
_CHECKED_MAX_CHARS = 4_096  # longer texts are checked every time (the input cache holds at most 8,192 of these)


@dataclass(frozen=True)
class QueryError:
    kind: str
    message: str


@dataclass
class QueryResult:
    columns: list[str] = field(default_factory=list)
    rows: list[list[Any]] = field(default_factory=list)
    truncated: bool = False
    elapsed_ms: float = 0.0
    error: QueryError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["error"] = asdict(self.error) if self.error else None
        return d


class _Failure(CypherTurnError):
    """Internal: a classified failure of one attempt."""

    def __init__(self, kind: str, message: str, retry: bool = False):
        super().__init__(message)
        self.kind, self.message, self.retry = kind, message, retry


def _undecodable(exc: BaseException) -> _Failure:
    """The query's own error for a result value the client cannot decode (not retried: it comes back)."""
    if isinstance(exc, RecursionError):
        message = "the result holds a value nested too deep for the client to decode"
    elif isinstance(exc, UndecodableValue):
        message = str(exc)
    else:
        message = str(undecodable(exc))
    return _Failure("runtime", message)


def _pool_deadline(deadline: float):
    """The session's ``connection_acquisition_timeout`` for a call ending at ``deadline``
    (``time.monotonic()``). A session takes a connection from the pool for EXPLAIN and again for the
    query (it hands the first back in between): a number would bound each wait from its own start, so
    both together could last twice the time left; the driver's ``Deadline`` bounds them both by the
    call's deadline (``tests/test_executor_pool.py`` checks the second wait)."""
    left = max(deadline - time.monotonic(), 0.0)
    return left if _DriverDeadline is None else _DriverDeadline(left)


def _approx_size(value: Any, limit: float = math.inf, depth: int = 0) -> int:
    """Rough serialized size in bytes of a normalized value (cheaper than json.dumps). Counting stops once
    it is past ``limit``, and a value below ``MAX_DEPTH`` levels counts 8: for a driver's value before
    ``normalize`` (nodes, temporal values ... count 8) it is a lower bound of the normalized value's size.
    Raises ``UndecodableValue`` at a value the driver could not decode."""
    if isinstance(value, str):
        return len(value) + 2
    if depth >= MAX_DEPTH or not isinstance(value, (list, dict)):
        if isinstance(value, BrokenHydrationObject):  # met before the limit: the query's first fault, as
            raise undecodable(value.error)            # normalize would report it
        return 8
    total = 2
    if isinstance(value, list):
        for v in value:
            total += _approx_size(v, limit - total, depth + 1) + 1
            if total > limit:
                break
    else:
        for k, v in value.items():
            total += len(k) + 4 + _approx_size(v, limit - total, depth + 1)
            if total > limit:
                break
    return total


def _value_too_large(columns: list[str], values: list, row_index: int, cap: int) -> "_Failure":
    """The verdict on a row holding a value over ``cap`` (the first such column is named)."""
    col = next(c for c, v in zip(columns, values) if _approx_size(v, cap) > cap)
    return _Failure("too_large", f"the value of column {col!r} in row {row_index + 1} is over {cap} bytes "
                                 "(the cap on one value)")


# Plan operators a read may use (base names: "@database" and "(All)"-style modes stripped). Scans and
# seeks are matched by _READ_SCAN; anything else (ShowTransactions, TerminateTransactions, LoadCSV,
# writes, TransactionApply, …) is refused, and ProcedureCall only for ALLOWED_PROCEDURES.
READ_OPERATORS = frozenset("""
    Anti AntiConditionalApply AntiSemiApply Apply Argument ArgumentTracker AssertSameNode AssertSameRelationship
    BidirectionalRepeat CacheProperties CartesianProduct ConditionalApply Distinct Eager EagerAggregation
    EmptyResult ExhaustiveLimit Expand Filter Input LetAntiSemiApply LetSelectOrAntiSemiApply
    LetSelectOrSemiApply LetSemiApply Limit NodeCountFromCountStore NodeHashJoin NodeLeftOuterHashJoin
    NodeRightOuterHashJoin NullifyMetadata Optional OptionalExpand OrderedAggregation OrderedDistinct
    OrderedUnion PartialSort PartialTop PartitionedUnwind PathPropagatingBFS PreserveOrder ProduceResults
    ProjectEndpoints Projection RelationshipCountFromCountStore Repeat RollUpApply SelectOrAntiSemiApply
    SelectOrSemiApply SemiApply ShortestPath Skip Sort StatefulShortestPath Top TriadicBuild TriadicFilter
    TriadicSelection Union Unwind ValueHashJoin VarLengthExpand BFSPruningVarLengthExpand ProcedureCall
""".split())
_READ_SCAN = re.compile(r"^(?:Partitioned)?(?:Directed|Undirected)?(?:Asserting)?\w*(?:Scan|Seek|SeekByRange)$")
_ALLOWED_PROCS = frozenset(p.lower() for p in ALLOWED_PROCEDURES)


def plan_refusal(plan: dict | None) -> str | None:
    """Why an EXPLAIN plan is not a plain read (an operator off the allow-list), or None."""
    stack = [plan] if plan else []
    while stack:
        op = stack.pop()
        stack.extend(op.get("children") or [])
        name = str(op.get("operatorType", "")).split("@")[0]
        base = name.split("(")[0]
        if base.startswith(("Show", "Terminate")) or (base not in READ_OPERATORS and not _READ_SCAN.match(base)):
            return f"the query plan uses operator {name}, which is not allowed for a read-only query"
        if base == "ProcedureCall":
            details = str((op.get("args") or {}).get("Details", ""))
            proc = details.split("(")[0].strip()
            if proc.lower() not in _ALLOWED_PROCS:
                return (f"procedure {proc or '?'} is not allowed; allowed procedures: "
                        f"{', '.join(ALLOWED_PROCEDURES)}")
    return None


_EXPLAIN = "EXPLAIN "
_POSITION = re.compile(r"line (\d+), column (\d+) \(offset: (\d+)\)")


class _CompileError(str):
    """A cached EXPLAIN verdict that is Neo4j's compile error (its message), not a plan verdict."""


def _unprefixed(message: str) -> str:
    """Neo4j's syntax message for ``EXPLAIN q`` rewritten to point into ``q`` itself."""
    n = len(_EXPLAIN)

    def shift(m: re.Match) -> str:
        line, column, offset = (int(g) for g in m.groups())
        column = max(1, column - n) if line == 1 else column
        return f"line {line}, column {column} (offset: {max(0, offset - n)})"

    lines = message.split("\n")
    for i, line in enumerate(lines):
        if line.startswith('"' + _EXPLAIN):
            lines[i] = '"' + line[1 + n:]
            if i + 1 < len(lines) and lines[i + 1].strip() == "^":
                lines[i + 1] = lines[i + 1][n:]
    return _POSITION.sub(shift, "\n".join(lines), count=1)


def _classify(exc: Neo4jError, timeout: float) -> _Failure:
    code = exc.code or ""
    message = exc.message or str(exc)
    if "SyntaxError" in code:
        return _Failure("syntax", message)
    if "TimedOut" in code or ("Terminated" in code and "timeout" in message.lower()):
        return _Failure("timeout", f"the query ran past its {timeout:g} s time limit")
    if "OutOfMemoryError" in code and not code.endswith("TransactionOutOfMemoryError"):
        # an allocation the server's heap could not hold (the JVM lives on: graphs/server.py)
        return _Failure("memory", f"the query needed more memory than the server has ({message})")
    if "Memory" in code:
        return _Failure("memory", message)
    if "exceeds maxCapacity" in message:  # the server's ceiling on one result record (graphs/jvm CappedAllocator)
        return _Failure("too_large", "a result record is over the server's limit of "
                                     f"{server.BOLT_MAX_BUFFER_BYTES >> 20} MiB")
    if code.endswith(("Statement.AccessMode", "Security.Forbidden", "Statement.ExternalResourceFailed",
                      "Procedure.ProcedureNotFound")) or "Security" in code:
        return _Failure("refused", message)
    if isinstance(exc, TransientError):
        return _Failure("unavailable", f"transient server error: {message}", retry=True)
    if isinstance(exc, (ClientError, DatabaseError)):
        return _Failure("runtime", message)
    return _Failure("runtime", message)


_DRIVER_DIR = os.path.dirname(neo4j.__file__) + os.sep


def _raised_in_driver(exc: BaseException) -> bool:
    """Whether ``exc`` was raised inside the neo4j driver (a plain ValueError from its decoder, say)
    rather than by this module's own code."""
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    return last is not None and last.tb_frame.f_code.co_filename.startswith(_DRIVER_DIR)


def _kill_connection(session) -> bool:
    """Kill the connection ``session`` holds now, waking a read blocked on it; whether there was one.

    Called by the deadline watchdog on its own thread. It reaches into the driver (``Session._connection``,
    ``Bolt.kill()``: shutdown and close of the socket, the connection marked closed so the pool drops it),
    which has no public way to abort a running query from another thread; a test freezes the server
    behind a proxy and checks that an attempt ends at its deadline, so a driver that moves these fails it."""
    conn = getattr(session, "_connection", None)
    if conn is None or conn.closed():
        return False
    conn.kill()
    return True


SERVER_CHECK_S = 5.0  # the deadline of the "does the server still answer?" probe after a dropped connection
PROBE_GRACE_S = 0.5  # ... which may run this long past the query's own deadline
_MIN_ATTEMPT_S = 0.05  # a retry needs at least this much of the time limit left
_KILL_WINDOW_S = 1.0  # a connection error this soon after the watchdog killed a connection may be its doing


@dataclass(frozen=True)
class ExecutorLimits:
    """The bounds of one ``SafeExecutor``.

    ``timeout``: seconds a query may run (the server's transaction timeout; the client gives up
    ``CLIENT_GRACE_S`` later); ``max_rows``: rows returned (``max_rows + 1`` are fetched, to flag
    truncation); ``max_value_bytes`` / ``max_result_bytes``: the approximate JSON size of one value / of
    the whole result; ``max_query_chars``: the longest query text accepted; ``retries`` and ``backoff``:
    how often and how long apart (``backoff * 2**n`` seconds) an infrastructure failure is retried, within
    the call's one deadline (``timeout + CLIENT_GRACE_S`` from the start: a retry that would not fit is
    not made)."""

    timeout: float = DEFAULT_TIMEOUT_S
    max_rows: int = DEFAULT_MAX_ROWS
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    max_query_chars: int = DEFAULT_MAX_QUERY_CHARS
    retries: int = 3
    backoff: float = 0.25

    def __post_init__(self):
        if not (self.timeout > 0 and math.isfinite(self.timeout)) or self.max_rows < 0:
            raise InputError("timeout must be positive and max_rows non-negative")
        if min(self.max_value_bytes, self.max_result_bytes, self.max_query_chars) <= 0:
            raise InputError("the size caps must be positive")
        if self.retries < 0 or self.backoff < 0:
            raise InputError("retries and backoff must not be negative")


class SafeExecutor:
    """Runs read-only Cypher on one world with timeouts, caps and retries (see module docstring)."""

    # (uri, database, query) -> "" (a read), why it is not, or the compile error (a ``_CompileError``)
    _verdicts: LRUCache[str] = LRUCache(20_000)
    _checked: LRUCache[tuple] = LRUCache(8_192)  # query text -> (text to run, None) or (None, (kind, message))

    def __init__(self, world: str, limits: ExecutorLimits | None = None, *,
                 target: connections.Target | None = None, **overrides: Any):
        """``limits`` (default ``ExecutorLimits()``) with any of its fields overridden by keyword, e.g.
        ``SafeExecutor(world, timeout=4.0)``; ``target`` pins the server (default: resolved from the world)."""
        self.world = world
        self.limits = replace(limits or ExecutorLimits(), **overrides)
        self._target = target

    @property
    def target(self) -> connections.Target:
        if self._target is None:
            self._target = connections.resolve(self.world)
        return self._target

    # -- input checks -------------------------------------------------------------------------
    def _check_input(self, query: Any) -> str:
        if not isinstance(query, str):
            raise _Failure("syntax", f"the query must be text, got {type(query).__name__}")
        if len(query) > self.limits.max_query_chars:
            raise _Failure("too_large", f"the query is {len(query)} characters long; the limit is "
                                        f"{self.limits.max_query_chars}")
        if len(query) > _CHECKED_MAX_CHARS:
            return self._check_text(query)
        # The checks below depend on the text alone, and a scorer or a GRPO batch sends the same texts
        # again and again: the verdict is cached (the lexer costs about as much as a third of a one-hop
        # query's round trip).
        checked = self._checked.get(query)
        if checked is None:
            try:
                checked = (self._check_text(query), None)
            except _Failure as f:
                checked = (None, (f.kind, f.message))
            self._checked.put(query, checked)
        text, failure = checked
        if failure is not None:
            raise _Failure(*failure)
        return text

    @staticmethod
    def _check_text(query: str) -> str:
        """The query without a final semicolon, if its text is a well-formed read (else a _Failure)."""
        try:
            query.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _Failure("syntax", f"the query is not valid unicode text (unpaired surrogate at "
                                     f"position {exc.start})") from None
        if "\x00" in query:
            raise _Failure("syntax", "the query contains a NUL character")
        text = query.strip()
        if text.endswith(";"):
            text = text[:-1].rstrip()
        if not text:
            raise _Failure("syntax", "the query is empty")
        try:
            check_read_only(text)
        except GuardRefusal as exc:
            raise _Failure("refused", str(exc)) from None
        except InvalidEscape as exc:
            raise _Failure("syntax", str(exc)) from None
        return text

    # -- one attempt ----------------------------------------------------------------------------
    def _plan_verdict(self, session, target, query: str, params: dict, timeout: float) -> str:
        """"" when EXPLAIN shows a plain read (query type r, allowed operators only), else the reason.
        Raises a ``_Failure`` when EXPLAIN fails; a compile error of a query without parameters is cached
        like a verdict (it depends on the text and the graph's schema only: a model's broken query that
        comes back costs no round trip)."""
        key = (target.uri, target.database, query)
        verdict = self._verdicts.get(key)
        if verdict is None:
            try:
                summary = session.run(neo4j.Query("EXPLAIN " + query, timeout=timeout), params).consume()
            except Neo4jError as exc:
                failure = _classify(exc, timeout)
                if failure.kind != "syntax":
                    raise failure from None
                verdict = _CompileError(_unprefixed(failure.message))
                if params:
                    raise _Failure("syntax", str(verdict)) from None
            else:
                verdict = plan_refusal(summary.plan) or ""
                if not verdict and summary.query_type != "r":
                    verdict = (f"the query is not read-only (Neo4j reports query type {summary.query_type!r}); "
                               "only reads are allowed")
            self._verdicts.put(key, verdict)
        if isinstance(verdict, _CompileError):
            raise _Failure("syntax", str(verdict))
        return verdict

    def _attempt(self, query: str, params: dict, timeout: float, max_rows: int, deadline: float) -> QueryResult:
        """One attempt on the caller's thread. Everything it does with its connection (the query, the rows,
        discarding the rest, the reset on release) is under the watchdog, which kills the connection at
        ``deadline`` (``time.monotonic()``): a frozen server, a result stuck in sending, a second batch
        that never finishes; that ends it as a timeout."""
        target = self.target
        drv = connections.driver(target)
        watch = None
        streaming = False
        rows: list[list[Any]] = []
        t0 = time.perf_counter()
        started = time.monotonic()
        # the server's limit: a retry runs under what is left of the caller's time (``timeout`` is for messages)
        tx_timeout = max(min(timeout, deadline - CLIENT_GRACE_S - started), _MIN_ATTEMPT_S)
        try:
            # An auto-commit transaction in READ access mode: the server refuses any write in it, so it needs
            # no rollback (one round trip less than BEGIN ... ROLLBACK).
            # waiting for a free connection (a full pool) or opening one is part of the call's time
            session = drv.session(database=target.database, default_access_mode=neo4j.READ_ACCESS,
                                  fetch_size=max_rows + 1,
                                  connection_acquisition_timeout=_pool_deadline(deadline))
            watch = WATCHDOG.watch(lambda: _kill_connection(session), deadline - started)
            result = None
            try:
                verdict = self._plan_verdict(session, target, query, params, tx_timeout)
                if verdict:
                    raise _Failure("refused", verdict)
                result = session.run(neo4j.Query(query, timeout=tx_timeout), params)
                columns = list(result.keys())
                total = 0
                truncated = False
                for record in result:
                    streaming = True
                    if len(rows) == max_rows:
                        truncated = True
                        break
                    cap = self.limits.max_value_bytes
                    raw = record.values()
                    try:
                        # the driver's values first (a lower bound, cut at the cap): a list of millions is
                        # refused in milliseconds instead of being copied by normalize and counted whole
                        if any(_approx_size(v, cap) > cap for v in raw):
                            raise _value_too_large(columns, raw, len(rows), cap)
                        row = [normalize(v) for v in raw]
                    except (UndecodableValue, RecursionError) as exc:
                        raise _undecodable(exc) from None
                    for value in row:
                        size = _approx_size(value, cap)
                        if size > cap:
                            raise _value_too_large(columns, row, len(rows), cap)
                        total += size
                    if total > self.limits.max_result_bytes:
                        raise _Failure("too_large", f"the result is over {self.limits.max_result_bytes} bytes "
                                                    f"after {len(rows)} rows")
                    rows.append(row)
                if truncated:
                    try:  # the rows past the cap are discarded (the server may still be computing them)
                        result.consume()
                    except Exception:  # noqa: BLE001 - the rows are complete; a dropped connection is not an error
                        if not watch.expired:
                            _kill_connection(session)
            except BaseException as exc:
                if result is not None and not isinstance(exc, Neo4jError):
                    # given up on a result still streaming (a value too large or undecodable): the rest is
                    # not wanted, and waiting for it can take as long as the query runs
                    _kill_connection(session)
                    try:
                        result.consume()
                    except Exception:  # noqa: BLE001 - the connection is gone: it fails at once
                        pass
                raise
            finally:
                try:
                    session.close()  # hands the connection back (a reset when it is not clean): still watched
                finally:
                    watch.finish()
        except Exception as exc:  # noqa: BLE001 - classified below, re-raised when not the driver's
            if isinstance(exc, ConnectionAcquisitionTimeoutError):
                # the query never reached the server: every connection of this process to it stayed busy
                # until the call's deadline; the client's infrastructure, not the query's doing
                raise _Failure("unavailable", f"no connection to {target.describe()} within the {timeout:g} s "
                                              f"time limit: all {connections.MAX_POOL_SIZE} of this process's "
                                              "connections to it were in use", retry=True) from None
            if watch is not None and watch.expired:
                if isinstance(exc, _Failure) and not exc.retry:
                    raise  # the query's own verdict came first (then the watchdog cut the clean-up)
                raise _Failure("timeout", f"the query ran past its {timeout:g} s time limit (no answer)") from None
            raise self._failure(exc, target, query, timeout, started, watch is not None, streaming, deadline) from None
        return QueryResult(columns=columns, rows=rows, truncated=truncated,
                           elapsed_ms=(time.perf_counter() - t0) * 1000.0)

    def _failure(self, exc: Exception, target, query: str, timeout: float, started: float, begun: bool,
                 streaming: bool, deadline: float) -> Exception:
        """What a failed attempt reports: a ``_Failure``, or ``exc`` itself when it is a bug of ours."""
        if isinstance(exc, _Failure):
            return exc
        if isinstance(exc, BrokenRecordError):  # a value the driver could not hydrate: the query's doing
            return _undecodable(exc.__cause__ or exc)
        if isinstance(exc, RecursionError):  # the driver's decoder, on a value nested too deep
            return _undecodable(exc)
        if isinstance(exc, (ServiceUnavailable, SessionExpired, OSError)):
            if begun and self._server_answers(target, deadline):  # the server is fine: it dropped this query
                if WATCHDOG.stopped_since(started - _KILL_WINDOW_S):
                    # or the watchdog just killed this connection: handed back to the pool by an attempt
                    # that ended at its deadline, and taken by this one; not the query's doing, try again
                    return _Failure("unavailable", f"the connection to {target.describe()} was closed "
                                                   f"under this query: {exc}", retry=True)
                if streaming:
                    return _Failure("too_large", "the server dropped the connection while sending the result "
                                                 "(usually a result too large to transmit)")
                # before the first row: the server's watchdog stopped it (graphs/server.py), for time or memory
                if time.monotonic() - started >= timeout:
                    return _Failure("timeout", f"the query ran past its {timeout:g} s time limit and was "
                                               "stopped by the server")
                return _Failure("memory", "the server stopped the query because it was filling the server's "
                                          "memory")
            # the server is gone: because of this very query (its halt record names it), or of another one
            halted = self._halted_for(target, query, started) if begun else None
            return halted or _Failure("unavailable", f"Neo4j at {target.describe()} is unreachable: {exc}",
                                      retry=True)
        if isinstance(exc, Neo4jError):
            return _classify(exc, timeout)
        if isinstance(exc, DriverError):
            return _Failure("unavailable", f"driver error talking to {target.describe()}: {exc}", retry=True)
        if not _raised_in_driver(exc):
            return exc
        # bytes the driver cannot decode (a message cut in the middle): it has dropped the connection
        return _Failure("unavailable", f"the connection to {target.describe()} broke: the driver could not "
                                       f"read the server's reply ({type(exc).__name__}: {exc})", retry=True)

    def _halted_for(self, target, query: str, started: float) -> _Failure | None:
        """The query's own error when the local server's watchdog halted the JVM for this query (its text, on
        this world) since the attempt began (``started``, ``time.monotonic()``): retrying it would take every
        world down again. Any other query cut off by the halt (another text, another world, or a halt older
        than the attempt) stays ``unavailable`` and is retried. Only read once the server has stopped
        answering, so it costs the normal path nothing."""
        if not target.local:
            return None
        record = server.halt_record()
        # the JVM stamps the record with the same wall clock, in milliseconds: 0.1 s of slack
        since = time.time() - (time.monotonic() - started) - 0.1
        # the planner evaluates constant expressions: a query can be stuck in its EXPLAIN
        if record is None or record.world != self.world or record.query not in (query, _EXPLAIN + query) \
                or record.time < since:
            return None
        kind = record.kind if record.kind in ("timeout", "memory") else "runtime"
        return _Failure(kind, f"the server halted because of this query, which it could not stop "
                              f"({record.reason}); it restarts for the other queries, and this one is not retried")

    def _server_answers(self, target, deadline: float) -> bool:
        """Whether the server answers ``RETURN 1`` within ``SERVER_CHECK_S``, and before ``deadline`` plus
        ``PROBE_GRACE_S`` (a frozen one does not)."""
        seconds = min(SERVER_CHECK_S, max(deadline - time.monotonic(), 0.0) + PROBE_GRACE_S)
        try:
            s = connections.driver(target).session(database=target.database, connection_acquisition_timeout=seconds)
            watch = WATCHDOG.watch(lambda: _kill_connection(s), seconds)
            try:
                try:
                    s.run("RETURN 1").consume()
                finally:
                    s.close()
            finally:
                watch.finish()
            return not watch.expired
        except Exception:  # noqa: BLE001 - any failure means "does not answer"
            return False

    # -- public -----------------------------------------------------------------------------------
    def run(self, query: Any, *, timeout: float | None = None, max_rows: int | None = None,
            params: dict | None = None) -> QueryResult:
        """Run one read-only query; never raises for query or database problems (see module doc)."""
        timeout = self.limits.timeout if timeout is None else float(timeout)
        max_rows = self.limits.max_rows if max_rows is None else int(max_rows)
        if not (timeout > 0 and math.isfinite(timeout)) or max_rows < 0:
            return QueryResult(error=QueryError("runtime", "timeout must be positive and max_rows >= 0"))
        t0 = time.perf_counter()
        # one deadline for the whole call: every attempt, the backoff between them, the clean-up
        deadline = time.monotonic() + timeout + CLIENT_GRACE_S
        try:
            text = self._check_input(query)
        except _Failure as f:
            return QueryResult(error=QueryError(f.kind, f.message), elapsed_ms=(time.perf_counter() - t0) * 1e3)
        failure: _Failure | None = None
        for attempt in range(self.limits.retries + 1):
            if attempt:
                pause = self.limits.backoff * 2 ** (attempt - 1)
                if time.monotonic() + pause + _MIN_ATTEMPT_S > deadline:
                    break  # no time left for another attempt: report the last failure
                time.sleep(pause)
                self._refresh_target()
            try:
                return self._attempt(text, params or {}, timeout, max_rows, deadline)
            except _Failure as f:
                failure = f
            except connections.ConfigError as exc:
                failure = _Failure("unavailable", str(exc), retry=True)
            if not failure.retry:
                break
        assert failure is not None
        return QueryResult(error=QueryError(failure.kind, failure.message),
                           elapsed_ms=(time.perf_counter() - t0) * 1000.0)

    def _refresh_target(self) -> None:
        """After an infrastructure failure, pick up a local server restarted on other ports."""
        if self._target is not None and self._target.local:
            try:
                self._target = connections.resolve(self.world, autostart=False)
            except connections.ConfigError:
                pass  # still down: keep the old target and let the retry report it


_executors: dict[str, SafeExecutor] = {}
_executors_lock = threading.Lock()


def executor(world: str) -> SafeExecutor:
    """The process-wide executor of ``world`` (default limits; pooled connections).

    Raises ``SpecError`` for a world that is neither shipped nor externally configured.
    """
    with _executors_lock:
        ex = _executors.get(world)
    if ex is not None:  # the hot path: no spec or config reading per query
        return ex
    if connections.external_config() is None:
        get_spec(world)  # a clear error for an unknown world before anything is started
    with _executors_lock:
        return _executors.setdefault(world, SafeExecutor(world))


def execute(world: str, query: Any, *, timeout: float | None = None, max_rows: int | None = None,
            params: dict | None = None) -> QueryResult:
    """Run ``query`` on ``world`` through its shared safe executor."""
    return executor(world).run(query, timeout=timeout, max_rows=max_rows, params=params)
