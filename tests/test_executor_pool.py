"""Issue 22: waiting for a free connection is part of a call's one deadline. The project's own driver
(``connections.driver``, its settings) gets a pool of one connection to the real server, held by another
caller's open transaction: a call that cannot get a connection comes back within its timeout plus
``RETURN_GRACE_S`` as ``unavailable`` (the client's infrastructure: the query never reached the server),
not after the driver's 30 s acquisition timeout, and not as the query's own ``timeout``."""

from __future__ import annotations

import threading
import time
import uuid

import neo4j
import pytest

from graphs import connections
from graphs.executor import RETURN_GRACE_S, SafeExecutor

pytestmark = pytest.mark.neo4j

WORLD = "ancient_empire"
QUERY = "MATCH (p:Province) RETURN count(p) AS n"


@pytest.fixture
def one_connection(monkeypatch):
    """Every driver ``connections.driver`` builds during the test has a pool of one connection."""
    real = neo4j.GraphDatabase.driver
    monkeypatch.setattr(connections, "_drivers", {})
    monkeypatch.setattr(neo4j.GraphDatabase, "driver",
                        lambda *a, **kw: real(*a, **{**kw, "max_connection_pool_size": 1}))
    yield
    connections.close_all()  # the pool-of-one drivers (the process's own come back with the undo)


def _hold():
    """Another caller holding the pool's only connection (an open transaction), and its release."""
    target = connections.resolve(WORLD)
    session = connections.driver(target).session(database=target.database)
    tx = session.begin_transaction()

    def release():
        tx.rollback()
        session.close()
    return tx, release


def test_a_full_pool_is_unavailable_within_the_calls_deadline(one_connection):
    ex = SafeExecutor(WORLD, timeout=1.0)
    expected = ex.run(QUERY).rows
    assert expected
    tx, release = _hold()
    try:
        t0 = time.perf_counter()
        r = ex.run(QUERY)
        elapsed = time.perf_counter() - t0
        assert elapsed < 1.0 + RETURN_GRACE_S, elapsed  # was the driver's 30 s
        assert r.error is not None and r.error.kind == "unavailable", r.error
        assert "in use" in r.error.message and r.rows == []
        assert elapsed >= 1.0  # it waited its time for a connection first
        assert tx.run("RETURN 1 AS one").single()["one"] == 1  # the holder's connection is untouched
    finally:
        release()
    assert ex.run(QUERY).rows == expected  # the freed connection serves the next call


def test_a_connection_freed_during_the_wait_serves_the_call(one_connection):
    ex = SafeExecutor(WORLD, timeout=5.0)
    expected = ex.run(QUERY).rows
    _, release = _hold()
    timer = threading.Timer(0.5, release)
    timer.start()
    try:
        t0 = time.perf_counter()
        r = ex.run(QUERY)
        assert r.error is None and r.rows == expected, r.error
        assert 0.4 < time.perf_counter() - t0 < 5.0
    finally:
        timer.join()


def test_the_second_wait_after_explain_is_bounded_by_the_same_deadline(one_connection, monkeypatch):
    # A session hands its connection back between EXPLAIN and the query and takes one again: here
    # another caller takes it in between (after a slow plan), so the query's own wait starts 1.5 s into
    # a 2 s call; it must end at the call's deadline, not 2.5 s after its own start.
    ex = SafeExecutor(WORLD, timeout=2.0)
    held = []
    real_verdict = SafeExecutor._plan_verdict

    def slow_plan_then_taken(self, *args, **kwargs):
        verdict = real_verdict(self, *args, **kwargs)
        time.sleep(1.5)
        held.append(_hold())
        return verdict

    monkeypatch.setattr(SafeExecutor, "_plan_verdict", slow_plan_then_taken)
    query = f"MATCH (p:Province) RETURN count(p) AS n_{uuid.uuid4().hex}"  # a text whose plan is not cached
    try:
        t0 = time.perf_counter()
        r = ex.run(query)
        elapsed = time.perf_counter() - t0
        assert len(held) == 1
        assert elapsed < 2.0 + RETURN_GRACE_S, elapsed
        assert r.error is not None and r.error.kind == "unavailable", r.error
    finally:
        for _, release in held:
            release()
