"""A reply the driver cannot decode is an infrastructure failure, retried on a new connection: never a
traceback out of the executor (the judge's thread pool would take the whole evaluation down with it)
and never a model error. The real Neo4j sits behind a small TCP proxy that, on its first connection,
replaces one server reply with a chunk holding a message that is not a Bolt structure (what the driver
saw in CI when a stray ThreadDeath cut a result message in the middle)."""

from __future__ import annotations

import socket

import pytest

from bolt_proxy import TcpProxy, upstream_port
from graphs.executor import SafeExecutor, execute

pytestmark = pytest.mark.neo4j

WORLD = "ancient_empire"
QUERY = "MATCH (p:Province) RETURN count(p) AS n"
NOT_A_STRUCTURE = b"\x00\x02\x70\x70\x00\x00"  # one chunk of two bytes, then the end-of-message marker


def _varint(buf: bytes, at: int) -> tuple[int, int] | None:
    value = shift = 0
    while at < len(buf):
        byte = buf[at]
        value, shift, at = value | (byte & 0x7F) << shift, shift + 7, at + 1
        if not byte & 0x80:
            return value, at
    return None


def _handshake_length(buf: bytes) -> int:
    """Bytes of the server's handshake reply at the start of ``buf`` (0: not all there yet): four bytes of
    a chosen version, or Bolt's manifest (0x000001FF, a varint count of 4-byte versions, varint
    capabilities) that drivers since 5.7 negotiate."""
    if len(buf) < 4:
        return 0
    if buf[:4] != b"\x00\x00\x01\xff":
        return 4
    count = _varint(buf, 4)
    if count is None or len(buf) < count[1] + 4 * count[0]:
        return 0
    caps = _varint(buf, count[1] + 4 * count[0])
    return 0 if caps is None else caps[1]


class CorruptingProxy(TcpProxy):
    """Forwards to the real server; on the first connection the server's message number ``nth`` (counted
    from 0 after the version handshake; 0 and 1 answer HELLO and LOGON, so 2 is the first one of the
    query) is replaced by ``NOT_A_STRUCTURE``. Messages are counted by Bolt's chunking (a two-byte size
    before each chunk, a zero size ending a message), so TCP segmentation cannot move the corruption."""

    def __init__(self, upstream: int, nth: int = 2):
        self.nth = nth
        self.corrupted = 0
        super().__init__(upstream)

    def to_client(self, src: socket.socket, dst: socket.socket, n: int) -> None:
        if n != 1:
            return self.forward(src, dst)
        buf, message, index, handshake = b"", b"", 0, True
        try:
            while data := src.recv(65536):
                buf += data
                out = b""
                if handshake and (k := _handshake_length(buf)):
                    out, buf, handshake = buf[:k], buf[k:], False
                while not handshake and len(buf) >= 2:
                    size = int.from_bytes(buf[:2], "big")
                    if len(buf) < 2 + size:
                        break
                    message, buf = message + buf[:2 + size], buf[2 + size:]
                    if size == 0:  # end of one message
                        if index == self.nth:
                            self.corrupted += 1
                            message = NOT_A_STRUCTURE
                        out, message, index = out + message, b"", index + 1
                if out:
                    dst.sendall(out)
        except OSError:
            pass
        finally:
            self.shut(src, dst)


@pytest.fixture
def proxy():
    p = CorruptingProxy(upstream_port(WORLD))
    yield p
    p.close()


def test_an_undecodable_reply_is_retried_on_a_new_connection(proxy):
    r = SafeExecutor(WORLD, timeout=10, target=proxy.target(WORLD)).run(QUERY)
    assert proxy.corrupted == 1 and proxy.connections == 2  # the broken connection was not reused
    assert r.ok and r.rows == execute(WORLD, QUERY).rows


def test_without_retries_it_is_reported_as_unavailable_not_raised(proxy):
    r = SafeExecutor(WORLD, timeout=10, retries=0, target=proxy.target(WORLD)).run(QUERY)
    assert proxy.corrupted == 1
    assert r.error is not None and r.error.kind == "unavailable"
    assert "could not read the server's reply" in r.error.message and "Expected structure" in r.error.message
