"""A TCP proxy in front of the real Neo4j for tests that need the network to misbehave: subclasses change
what one direction of a connection does (hold every byte, corrupt a reply); by default it forwards."""

from __future__ import annotations

import socket
import threading

from graphs import connections


class TcpProxy:
    """Listens on ``port`` (127.0.0.1) and forwards each connection to ``upstream``; ``connections``
    counts the connections accepted. ``to_server`` / ``to_client`` move the bytes of one direction of
    connection number ``n`` (from 1)."""

    def __init__(self, upstream: int):
        self.upstream = upstream
        self.connections = 0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def target(self, world: str) -> connections.Target:
        """A connection target for ``world`` that goes through the proxy."""
        return connections.Target(world=world, uri=f"bolt://127.0.0.1:{self.port}", user=None, password=None,
                                  database=None, local=False)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            n = self.connections
            server = socket.create_connection(("127.0.0.1", self.upstream))
            threading.Thread(target=self.to_server, args=(client, server, n), daemon=True).start()
            threading.Thread(target=self.to_client, args=(server, client, n), daemon=True).start()

    def to_server(self, src: socket.socket, dst: socket.socket, n: int) -> None:
        self.forward(src, dst)

    def to_client(self, src: socket.socket, dst: socket.socket, n: int) -> None:
        self.forward(src, dst)

    def forward(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(self.passing(data))
        except OSError:
            pass
        finally:
            self.shut(src, dst)

    def passing(self, data: bytes) -> bytes:
        """What is sent on for ``data`` (a subclass may wait here)."""
        return data

    @staticmethod
    def shut(*socks: socket.socket) -> None:
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self._sock.close()


def upstream_port(world: str) -> int:
    """The port of the real server that holds ``world``."""
    return int(connections.resolve(world).uri.rsplit(":", 1)[1])
