"""A reply the driver cannot decode is an infrastructure failure, retried on a new connection: never a
traceback out of the executor (the judge's thread pool would take the whole evaluation down with it)
and never a model error. The real Neo4j sits behind a small TCP proxy that, on its first connection,
replaces one server reply with a chunk holding a message that is not a Bolt structure (what the driver
saw in CI when a stray ThreadDeath cut a result message in the middle)."""

from __future__ import annotations

import socket
import threading

import pytest

from graphs import connections
from graphs.executor import SafeExecutor, execute

pytestmark = pytest.mark.neo4j

WORLD = "ancient_empire"
QUERY = "MATCH (p:Province) RETURN count(p) AS n"
NOT_A_STRUCTURE = b"\x00\x02\x70\x70\x00\x00"  # one chunk of two bytes, then the end-of-message marker


class CorruptingProxy:
    """Forwards to the real server; on the first connection the server's ``nth`` reply after the version
    handshake (``nth`` = 3: the first one after HELLO and LOGON) is replaced by ``NOT_A_STRUCTURE``."""

    def __init__(self, upstream: int, nth: int = 3):
        self.upstream, self.nth = upstream, nth
        self.connections = self.corrupted = 0
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
            threading.Thread(target=self._pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, self.connections == 1), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, corrupt: bool) -> None:
        n = -1  # reply -1 is the 4-byte version handshake
        try:
            while data := src.recv(65536):
                n += 1
                if corrupt and n == self.nth:
                    self.corrupted += 1
                    data = NOT_A_STRUCTURE
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
        self._sock.close()


@pytest.fixture
def proxy():
    real = connections.resolve(WORLD)
    p = CorruptingProxy(int(real.uri.rsplit(":", 1)[1]))
    yield p
    p.close()


def _target(port: int) -> connections.Target:
    return connections.Target(world=WORLD, uri=f"bolt://127.0.0.1:{port}", user=None, password=None,
                              database=None, local=False)


def test_an_undecodable_reply_is_retried_on_a_new_connection(proxy):
    r = SafeExecutor(WORLD, timeout=10, target=_target(proxy.port)).run(QUERY)
    assert proxy.corrupted == 1 and proxy.connections == 2  # the broken connection was not reused
    assert r.ok and r.rows == execute(WORLD, QUERY).rows


def test_without_retries_it_is_reported_as_unavailable_not_raised(proxy):
    r = SafeExecutor(WORLD, timeout=10, retries=0, target=_target(proxy.port)).run(QUERY)
    assert proxy.corrupted == 1
    assert r.error is not None and r.error.kind == "unavailable"
    assert "could not read the server's reply" in r.error.message and "Expected structure" in r.error.message
