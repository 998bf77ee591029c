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
