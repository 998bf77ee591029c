"""Issue 14, resources: no single read query keeps the local Neo4j busy or takes it down. Queries that
Neo4j's cooperative termination cannot end (a reduce() building a string, a list comprehension over a
huge range, a planner blow-up) are ended by the server's watchdog (graphs/jvm Watchdog), which reports
what it did in the server log; if it must exit, `serve` restarts the server on the same ports with the
same data. Destructive (may restart the server), hence the file name that sorts near the end."""

from __future__ import annotations

import time

import pytest

from graphs import connections, server
from graphs.executor import SafeExecutor
from graphs.loader import read_summary
from graphs.spec import all_specs

pytestmark = [pytest.mark.neo4j, pytest.mark.destructive]

WORLD = "ancient_empire"
ATTACKS = [
    "RETURN reduce(s = '', x IN range(1, 2000000) | s + 'xxxxxxxxxx') AS s",
    "WITH [x IN range(1, 60000000) | toString(x) + 'padpadpadpad'] AS l RETURN size(l)",
    "MATCH " + "--".join(f"(n{i})" for i in range(121)) + " RETURN count(*)",
]


def _checksums() -> dict[str, str]:
    return {s.world: read_summary(connections.resolve(s.world)).checksum for s in all_specs()}


def _other_transactions() -> list:
    with connections.driver(connections.resolve(WORLD)).session() as s:
        return s.run("SHOW TRANSACTIONS YIELD currentQuery WHERE NOT currentQuery STARTS WITH 'SHOW' "
                     "RETURN currentQuery").values()


def test_runaway_queries_are_ended_and_the_server_keeps_its_ports_and_data():
    before_state = server.serve(progress=lambda *_: None)
    before = _checksums()
    log_start = server.log_path().stat().st_size
    for query in ATTACKS:
        r = SafeExecutor(WORLD, timeout=2.0, retries=0).run(query)
        assert r.error is not None and r.error.kind in ("timeout", "memory", "unavailable"), (query[:60], r.error)
    # within timeout + two grace periods (+ slack) nothing of theirs runs any more
    deadline = time.monotonic() + 2.0 + 3 * server.WATCHDOG_GRACE_S + 15
    while True:
        state = server.serve(progress=lambda *_: None)  # a no-op, or a restart after the watchdog's exit
        try:
            left = _other_transactions()
        except Exception:  # noqa: BLE001 - restarting
            left = ["(restarting)"]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    assert left == [], left
    assert state.ports == before_state.ports
    assert _checksums() == before  # every world unchanged after the whole attack suite
    log = server.log_path().read_bytes()[log_start:].decode(errors="replace")
    assert "WATCHDOG" in log and "reduce(" in log  # it reported what it did
    assert SafeExecutor(WORLD).run("RETURN 1 AS one").rows == [[1]]


def test_a_planner_blow_up_is_refused_before_the_server():
    t0 = time.perf_counter()
    r = SafeExecutor(WORLD, timeout=2.0).run("RETURN " + "(" * 20000 + "1" + ")" * 20000 + " AS x")
    assert r.error is not None and r.error.kind == "refused" and "nests brackets" in r.error.message
    assert time.perf_counter() - t0 < 1.0


def test_a_huge_result_fails_fast_and_leaves_the_same_server_up():
    # ~900 MB of packstream in one record. Neo4j serializes a record into one buffer before sending it,
    # with no check for termination; the worker used to write for minutes while the watchdog could only
    # close its connection (a ThreadDeath there once landed in the JDK's buffer cleaner, which called
    # System.exit from the worker: a JVM alive with every port closed). Bolt's buffers now have a ceiling
    # (graphs/jvm CappedAllocator, 32 MiB): the query fails as too_large at once, with the same process.
    # (At 128 MiB, writing the cap's worth took 2.5-3 s on a 2-core machine: past a 2 s limit, a timeout.)
    before = server.serve(progress=lambda *_: None)
    log_start = server.log_path().stat().st_size
    timeout = 5.0
    r = SafeExecutor(WORLD, timeout=timeout, retries=0).run("RETURN range(1, 100000000) AS xs")
    assert r.error is not None and r.error.kind == "too_large", r.error
    assert "server's limit" in r.error.message, r.error  # the server's cap, not the client's
    deadline = time.monotonic() + timeout + 2 * server.WATCHDOG_GRACE_S
    while True:
        state = server.running_state()
        assert state is not None and state.pid == before.pid, "the server went down"
        assert all(server.port_open(p) for p in state.ports.values()), "a port closed"
        left = _other_transactions()
        if not left or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    assert left == [], left
    log = server.log_path().read_bytes()[log_start:].decode(errors="replace")
    assert "Cleaner terminated abnormally" not in log and "exiting" not in log
    assert SafeExecutor(WORLD).run("RETURN 1 AS one").rows == [[1]]
