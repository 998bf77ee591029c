"""Issue 22, the server: no single query takes the local Neo4j down. Two 3-line queries did, with every
world: a string concatenation asking for 2 GB in one allocation next to a 2 GB string (the JVM ran with
-XX:+ExitOnOutOfMemoryError, so one failed allocation exited it), and a record of about a billion
integers (``[y IN l2 | l2]``) that Neo4j serialized into one growing buffer for over a minute, past its
timeout and its closed connection, until the server's watchdog halted the JVM. Now the failed allocation
is that query's ``memory`` error, and Bolt's buffers have a ceiling (graphs/jvm CappedAllocator), so the
record fails as ``too_large`` within seconds. Each ends with the same server process, every world
answering, nothing of theirs still running, and the client back within its timeout plus
``RETURN_GRACE_S``: through ``execute``, ``env.step`` and the execution reward in a GRPO-sized batch.
Destructive when it fails (the server may go down), hence the file name that sorts near the end."""

from __future__ import annotations

import time

import pytest

from graphs import connections, server
from graphs.executor import RETURN_GRACE_S, SafeExecutor, execute
from graphs.spec import all_specs
from rewards.execution import make_execution_reward

pytestmark = [pytest.mark.neo4j, pytest.mark.destructive]

WORLD = "ancient_empire"
GOLD = "MATCH (e:Emperor)-[:GOVERNS]->(p:Province) RETURN p.name AS name"
A = "'" + "a" * 1000 + "'"
OOM = f"RETURN size(replace(replace(replace('aa','a',{A}),'a',{A}),'a',{A}) + 'b') AS n"
REPLY = "WITH range(1, 1000) AS l WITH [x IN l | l] AS l2 RETURN [y IN l2 | l2] AS l3"
TIMEOUT = 30.0  # the OOM comes after a few seconds of building 2 GB; a loaded machine is slower


@pytest.fixture(scope="module")
def pid():
    return server.serve(progress=lambda *_: None).pid


def _others() -> list:
    with connections.driver(connections.resolve(WORLD)).session() as s:
        return s.run("SHOW TRANSACTIONS YIELD currentQuery WHERE NOT currentQuery STARTS WITH 'SHOW' "
                     "RETURN currentQuery").values()


def _still_serving(pid: int) -> None:
    state = server.running_state()
    assert state is not None and state.pid == pid, "the server went down"
    assert all(server.port_open(p) for p in state.ports.values()), "a port closed"
    for spec in all_specs():
        r = SafeExecutor(spec.world, timeout=10.0).run("RETURN 1 AS one")
        assert r.rows == [[1]], (spec.world, r.error)
    deadline = time.monotonic() + 2 * server.WATCHDOG_GRACE_S
    while (left := _others()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left == [], left


def _timed(run, timeout: float):
    t0 = time.perf_counter()
    out = run()
    elapsed = time.perf_counter() - t0
    assert elapsed < timeout + RETURN_GRACE_S, elapsed
    return out


def test_a_2_gb_allocation_is_the_querys_memory_error(pid):
    log_start = server.log_path().stat().st_size
    r = _timed(lambda: SafeExecutor(WORLD, timeout=TIMEOUT).run(OOM), TIMEOUT)
    assert r.error is not None and r.error.kind == "memory", r.error
    _still_serving(pid)
    log = server.log_path().read_bytes()[log_start:].decode(errors="replace")
    assert "Terminating due to java.lang.OutOfMemoryError" not in log and "CYPHERTURN READY" not in log


def test_an_oversized_record_fails_fast_as_too_large(pid):
    log_start = server.log_path().stat().st_size
    r = _timed(lambda: SafeExecutor(WORLD, timeout=5.0).run(REPLY), 5.0)
    assert r.error is not None and r.error.kind == "too_large", r.error
    assert "over the server's limit" in r.error.message
    _still_serving(pid)
    log = server.log_path().read_bytes()[log_start:].decode(errors="replace")
    assert "exiting" not in log and "CYPHERTURN READY" not in log


def test_env_step_gets_them_as_the_models_errors(tmp_path, pid):
    from benchmark.build import build
    from benchmark.session import read_sessions
    from envs.env import CypherTurnEnv, EnvConfig

    build("test", tmp_path, seed=11, sessions=2, hf=False)
    session = next(iter(read_sessions(tmp_path)))
    env = CypherTurnEnv(config=EnvConfig(protocol="agentic", budget_multiplier=20, timeout=TIMEOUT), dataset=tmp_path)
    env.reset(options={"session_id": session.id})
    for query, kind in ((OOM, "memory"), (REPLY, "too_large")):
        obs, *_ = _timed(lambda: env.step("EXECUTE_CYPHER " + query), TIMEOUT)
        assert env.last_result.error is not None and env.last_result.error.kind == kind, env.last_result.error
    _still_serving(pid)


def test_the_execution_reward_scores_a_grpo_batch_holding_them(pid):
    reward = make_execution_reward(timeout=TIMEOUT)
    bad = [f"<answer>{OOM}</answer>", f"<answer>{REPLY}</answer>", f"<answer>{REPLY}</answer>"]
    batch = bad + [f"<answer>{GOLD}</answer>"] * (16 - len(bad))
    scores = _timed(lambda: reward(None, batch, gold_cypher=[GOLD] * 16, world=[WORLD] * 16), TIMEOUT)
    assert scores == [0.0] * len(bad) + [1.0] * (16 - len(bad))
    assert execute(WORLD, GOLD).ok
    _still_serving(pid)
