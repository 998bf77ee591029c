"""The client deadline when the server stops answering: the real Neo4j sits behind a TCP proxy that can
freeze (hold every byte, keep every socket open: a server stopped with SIGSTOP, a dead network path). An
attempt on a frozen server ends as a timeout shortly after its deadline, on the caller's own thread, and
the connection it was stuck on is not handed out again."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from graphs import connections
from graphs.executor import CLIENT_GRACE_S, SafeExecutor, execute

pytestmark = pytest.mark.neo4j

WORLD = "ancient_empire"
QUERY = "MATCH (p:Province) RETURN count(p) AS n"


class FreezingProxy:
    """Forwards to the real server until ``frozen`` is set; then holds whatever it receives."""

    def __init__(self, upstream: int):
        self.upstream = upstream
        self.connections = 0
        self.frozen = threading.Event()
        self.thawed = threading.Event()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            server = socket.create_connection(("127.0.0.1", self.upstream))
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._forward, args=(src, dst), daemon=True).start()

    def _forward(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                if self.frozen.is_set():
                    self.thawed.wait()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.thawed.set()
        self._sock.close()


@pytest.fixture
def proxy():
    real = connections.resolve(WORLD)
    p = FreezingProxy(int(real.uri.rsplit(":", 1)[1]))
    yield p
    p.close()


def test_a_frozen_server_gives_a_timeout_at_the_deadline_and_the_stuck_connection_is_dropped(proxy):
    target = connections.Target(world=WORLD, uri=f"bolt://127.0.0.1:{proxy.port}", user=None, password=None,
                                database=None, local=False)
    ex = SafeExecutor(WORLD, timeout=1.0, retries=0, target=target)
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
