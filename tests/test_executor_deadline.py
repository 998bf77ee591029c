"""The client deadline when the server stops answering: the real Neo4j sits behind a TCP proxy that can
freeze (hold every byte, keep every socket open: a server stopped with SIGSTOP, a dead network path). An
attempt on a frozen server ends as a timeout shortly after its deadline, on the caller's own thread, and
the connection it was stuck on is not handed out again."""

from __future__ import annotations

import threading
import time

import pytest

from bolt_proxy import TcpProxy, upstream_port
from graphs.executor import CLIENT_GRACE_S, SafeExecutor, execute

pytestmark = pytest.mark.neo4j

WORLD = "ancient_empire"
QUERY = "MATCH (p:Province) RETURN count(p) AS n"


class FreezingProxy(TcpProxy):
    """Forwards to the real server until ``frozen`` is set; then holds whatever it receives."""

    def __init__(self, upstream: int):
        self.frozen = threading.Event()
        self.thawed = threading.Event()
        super().__init__(upstream)

    def passing(self, data: bytes) -> bytes:
        if self.frozen.is_set():
            self.thawed.wait()
        return data

    def close(self) -> None:
        self.thawed.set()
        super().close()


@pytest.fixture
def proxy():
    p = FreezingProxy(upstream_port(WORLD))
    yield p
    p.close()


def test_a_frozen_server_gives_a_timeout_at_the_deadline_and_the_stuck_connection_is_dropped(proxy):
    ex = SafeExecutor(WORLD, timeout=1.0, retries=0, target=proxy.target(WORLD))
    expected = execute(WORLD, QUERY).rows
    assert ex.run(QUERY).rows == expected  # a pooled connection to the proxy now exists
    before = proxy.connections
    proxy.frozen.set()
    t0 = time.perf_counter()
    r = ex.run(QUERY)
    elapsed = time.perf_counter() - t0
    assert r.error is not None and r.error.kind == "timeout" and "no answer" in r.error.message
    assert 1.0 + CLIENT_GRACE_S <= elapsed < 1.0 + CLIENT_GRACE_S + 2.0
    proxy.frozen.clear()
    proxy.thawed.set()
    assert ex.run(QUERY).rows == expected
    assert proxy.connections > before  # the killed connection was not reused
