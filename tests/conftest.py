"""Shared fixtures. Tests marked ``neo4j`` talk to the real local Neo4j: the session fixture starts it
(idempotent; scripts/test.sh has usually started it and loaded the worlds already) and loads every world
whose checksum does not match."""

from __future__ import annotations

import pytest

from graphs import server
from graphs.spec import all_specs


@pytest.fixture(scope="session")
def neo4j_server():
    state = server.serve(progress=lambda *_: None)
    from graphs.loader import load_world

    for spec in all_specs():
        load_world(spec)  # a no-op when the database already holds the world
    return state


@pytest.fixture(autouse=True)
def _needs_server(request):
    if request.node.get_closest_marker("neo4j") is not None:
        request.getfixturevalue("neo4j_server")


_log_start: dict[str, int] = {}


def pytest_sessionstart(session):
    path = server.log_path()
    _log_start["offset"] = path.stat().st_size if path.exists() else 0


def pytest_terminal_summary(terminalreporter):
    """What the server's watchdog did while the tests ran (it stops and restarts things behind the
    tests' backs; when a test fails for a reason of the server, these lines say which query caused it)."""
    path = server.log_path()
    if not path.exists():
        return
    with path.open("rb") as f:
        size = path.stat().st_size
        f.seek(_log_start.get("offset", 0) if size >= _log_start.get("offset", 0) else 0)
        lines = [ln for ln in f.read().decode("utf-8", "replace").splitlines() if ln.startswith("WATCHDOG")]
    if lines:
        terminalreporter.section(f"server watchdog: {len(lines)} actions during the tests ({path})")
        for line in lines[-60:]:
            terminalreporter.write_line(line[:400])
