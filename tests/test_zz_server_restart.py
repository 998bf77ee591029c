"""Killing the local Neo4j mid-run: queries report `unavailable` (no crash, no wrong answer), and
`python -m graphs serve` brings it back with the same data. Runs last (file name) because it stops
the server the other tests use."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from graphs import connections, server
from graphs.executor import SafeExecutor
from graphs.loader import read_summary

pytestmark = [pytest.mark.neo4j, pytest.mark.destructive]

WORLD = "arcane_archive"


def test_killing_neo4j_mid_run_gives_unavailable_and_serve_restores_it():
    before = read_summary(connections.resolve(WORLD)).checksum
    ex = SafeExecutor(WORLD, timeout=10, retries=2, backoff=0.2)
    expected = ex.run("MATCH (n) RETURN count(n) AS n").rows
    results = []

    def worker():  # queries until the kill shows up as an error (bounded by a deadline)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            results.append(ex.run("MATCH (n)-[r]->(m) RETURN count(r) AS n"))
            if results[-1].error is not None:
                break

    thread = threading.Thread(target=worker)
    thread.start()
    time.sleep(0.5)
    os.kill(server.running_state().pid, signal.SIGKILL)
    thread.join(timeout=90)
    assert not thread.is_alive()
    assert results[0].error is None and len(results) > 1  # it was answering before the kill
    errors = [r.error for r in results if r.error is not None]
    assert errors and all(e.kind == "unavailable" for e in errors), errors
    after_kill = ex.run("MATCH (n) RETURN count(n) AS n")
    assert after_kill.error is not None and after_kill.error.kind == "unavailable"
    assert after_kill.rows == []  # never a (wrong) empty answer dressed as success

    out = subprocess.run([sys.executable, "-m", "graphs", "serve"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    again = SafeExecutor(WORLD).run("MATCH (n) RETURN count(n) AS n")
    assert again.error is None and again.rows == expected
    assert read_summary(connections.resolve(WORLD)).checksum == before


def test_a_server_alive_with_its_ports_closed_is_replaced_by_the_next_client(tmp_path):
    # A JVM hung on its way out keeps its pid but no port (CI once saw it). Stand-in: a live process
    # whose command line names the server's main class, recorded as the server, listening on nothing.
    before = server.serve(progress=lambda *_: None)
    expected = SafeExecutor(WORLD).run("MATCH (n) RETURN count(n) AS n").rows
    os.kill(before.pid, signal.SIGKILL)
    while server.running_state() is not None or any(server.port_open(p) for p in before.ports.values()):
        time.sleep(0.05)  # (a dying process loses its command line before its sockets)
    hung = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", server.MAIN_CLASS])
    try:
        state_file = server.neo4j_dir() / "server.json"
        state_file.write_text(json.dumps({**before.__dict__, "pid": hung.pid}))
        assert server.running_state().pid == hung.pid  # it passes for the server
        target = connections.resolve(WORLD)  # the next client finds the port closed and replaces it
        after = server.running_state()
        assert after.pid not in (hung.pid, before.pid) and after.ports == before.ports
        assert target.uri == before.uri(WORLD)
        assert hung.wait(timeout=30) is not None  # stopped, not left behind
        assert SafeExecutor(WORLD).run("MATCH (n) RETURN count(n) AS n").rows == expected
    finally:
        hung.kill()


def _listening() -> socket.socket:
    return socket.create_server(("127.0.0.1", 0))


def test_a_restart_waits_for_the_previous_ports_a_dying_server_still_holds():
    held = [_listening(), _listening()]
    previous = {"a": held[0].getsockname()[1], "b": held[1].getsockname()[1]}
    threading.Timer(0.6, lambda: [s.close() for s in held]).start()  # the old JVM's sockets close late
    t0 = time.monotonic()
    assert server._allocate_ports(["a", "b"], previous, wait=10.0) == previous
    assert 0.5 < time.monotonic() - t0 < 10.0


def test_ports_still_taken_after_the_wait_are_replaced(monkeypatch):
    held = _listening()
    previous = {"a": held.getsockname()[1]}
    monkeypatch.setenv("CYPHERTURN_NEO4J_BASE_PORT", str(previous["a"]))
    try:
        ports = server._allocate_ports(["a"], previous, wait=0.3)
    finally:
        held.close()
    assert ports["a"] != previous["a"] and ports["a"] > previous["a"]
