"""Issue 22, values and the client deadline: whatever a model writes, the answer is a result or an error
of the query's own kind, never ``unavailable``, and the call is back within its timeout plus
``RETURN_GRACE_S``, against the real Neo4j:

- a value the driver cannot decode (a date outside years 1-9999, lists or maps nested deeper than
  Python's recursion limit, or such a value nested inside a list) is a ``runtime`` error, not retried
  (it was ``unavailable``, retried three times, and made the execution reward raise
  ``RewardInfrastructureError`` for the whole batch; nested in a list it came back as the text
  ``<...BrokenHydrationObject object at 0x...>``);
- one value just under the server's record cap (tens of MB, which the driver decodes whole on the caller's
  thread, where no deadline reaches) is refused as ``too_large`` by the client's cap on one value;
- a query whose first row ends the attempt (too large, undecodable) while the server still computes the
  second is back at once (it waited for the server's watchdog: 12 s for a 2 s timeout, timeout + 10 s), and the client
  deadline covers retries and the session's clean-up.
"""

from __future__ import annotations

import time

import pytest

from graphs import server
from graphs.executor import RETURN_GRACE_S, SafeExecutor, execute
from graphs.spec import all_specs
from rewards.execution import make_execution_reward

pytestmark = pytest.mark.neo4j

WORLD = "ancient_empire"
GOLD = "MATCH (e:Emperor)-[:GOVERNS]->(p:Province) RETURN p.name AS name"
# a row that never finishes (string building that never checks for termination: the server's watchdog ends it)
NEVER = "size(reduce(s = '', x IN range(1, 20000000) | s + 'x'))"
PAD = "[x IN range(1, 100000) | 'aaaaaaaaaa']"  # about 1.3 MB: its record is sent before the next row is computed
FIRST_THEN_NEVER = {  # (query, max_value_bytes, kind)
    "too large first row": (f"UNWIND [1, 2] AS i RETURN CASE i WHEN 1 THEN {PAD} ELSE {NEVER} END AS v",
                            10_000, "too_large"),
    "undecodable first row": (f"UNWIND [1, 2] AS i RETURN CASE i WHEN 1 THEN [date({{year: 10000}})] + {PAD} "
                              f"ELSE {NEVER} END AS v", 1 << 20, "runtime"),
    "bare undecodable first row": (f"UNWIND [1, 2] AS i WITH i, {PAD} AS pad RETURN CASE i WHEN 1 THEN "
                                   f"date({{year: 10000}}) ELSE {NEVER} END AS v, pad", 1 << 22, "runtime"),
}
UNDECODABLE = [
    "RETURN date({year: 10000}) AS v",
    "RETURN date({year: -1}) AS v",
    "RETURN localdatetime({year: 999999999}) AS v",
    "RETURN [1, date({year: 10000})] AS v",
    "RETURN {a: [datetime({year: -5, timezone: 'Europe/Berlin'})]} AS v",
    "RETURN reduce(x = [], i IN range(1, 2000) | [x]) AS v",
    "RETURN reduce(x = {}, i IN range(1, 1000) | {a: x}) AS v",
    "RETURN reduce(x = [], i IN range(1, 300) | [x]) AS v",
]
# value shapes the driver must decode: each a result or a query error, never infrastructure
SHAPES = UNDECODABLE + [
    "RETURN date({year: 9999, month: 12, day: 31}) AS v",
    "RETURN date({year: 1}) AS v",
    "RETURN date({year: 0}) AS v",
    "RETURN localtime({hour: 23, minute: 59, second: 59, nanosecond: 999999999}) AS v",
    "RETURN datetime({year: 9999, month: 12, day: 31, hour: 23, timezone: '+14:00'}) AS v",
    "RETURN datetime({year: 1, timezone: '-18:00'}) AS v",
    "RETURN datetime({year: 2000, timezone: 'America/Argentina/ComodRivadavia'}) AS v",
    "RETURN localdatetime({year: -999999999}) AS v",
    "RETURN duration({years: 999999999}) AS v",
    "RETURN duration({seconds: 9223372036854775807}) AS v",
    "RETURN duration({days: -999999999, nanoseconds: -1}) AS v",
    "RETURN [datetime({year: 2020, timezone: 'Asia/Kolkata'}), date({year: 10000})] AS v",
    "RETURN [1, 'a', 1.5, true, null, [2], {k: 3}, date(), point({x: 1, y: 2}), duration('P1D')] AS v",
    "RETURN point({x: 1e308, y: -1e308, z: 1e308}) AS v",
    "RETURN point({longitude: 180, latitude: -90, crs: 'wgs-84-3d', height: 1e300}) AS v",
    "RETURN [0.0/0.0, 1.0/0.0, -1.0/0.0] AS v",
    "RETURN 9223372036854775807 AS v",
    "RETURN reduce(x = [], i IN range(1, 150) | [x]) AS v",
    "RETURN reduce(x = {}, i IN range(1, 150) | {a: x, b: [x]}) AS v",
    "RETURN reduce(s = 'x', i IN range(1, 22) | s + s) AS v",
    "RETURN range(1, 2000000) AS v",
    "UNWIND range(1, 200000) AS i RETURN i, toString(i) AS s",
    "RETURN [x IN range(1, 1000) | [x, toString(x), date({year: 1 + x % 9999})]] AS v",
    "RETURN {`~node`: 1, `\u0000`: 2, ``: 3} AS v",
    "RETURN '\ud7ff\ue000\U0010ffff' AS v",
    "RETURN [x IN range(1, 50000) | {k: x}] AS v",
]


@pytest.fixture(scope="module")
def before():
    state = server.serve(progress=lambda *_: None)
    return state.pid


def _all_worlds_answer(pid: int) -> None:
    state = server.running_state()
    assert state is not None and state.pid == pid, "the server was restarted"
    for spec in all_specs():
        r = SafeExecutor(spec.world, timeout=10.0).run("RETURN 1 AS one")
        assert r.rows == [[1]], (spec.world, r.error)


@pytest.mark.parametrize("query", SHAPES)
def test_every_value_shape_is_a_result_or_a_query_error(query):
    r = SafeExecutor(WORLD, timeout=10.0).run(query)
    if r.error is not None:
        assert r.error.kind in ("runtime", "too_large", "memory", "timeout", "syntax"), (query, r.error)
    else:
        assert "BrokenHydrationObject" not in repr(r.rows)
    if query in UNDECODABLE:
        assert r.error is not None and r.error.kind == "runtime", (query, r.error)
        assert "decode" in r.error.message


def test_an_undecodable_value_is_not_retried_and_the_connection_pool_stays_usable(before):
    # a retry would wait backoff=5 s first
    ex = SafeExecutor(WORLD, timeout=10.0, retries=3, backoff=5.0)
    for query in UNDECODABLE:
        t0 = time.perf_counter()
        r = ex.run(query)
        assert r.error is not None and r.error.kind == "runtime", (query, r.error)
        assert time.perf_counter() - t0 < 5.0, query
        assert ex.run("MATCH (e:Emperor) RETURN count(e) AS n").ok
    _all_worlds_answer(before)


@pytest.mark.parametrize("case", sorted(FIRST_THEN_NEVER))
def test_the_deadline_covers_the_clean_up_after_the_first_row(case, before):
    query, value_cap, kind = FIRST_THEN_NEVER[case]
    timeout = 5.0  # the first row comes within it even on a loaded machine; the old clean-up took 15 s more
    ex = SafeExecutor(WORLD, timeout=timeout, max_value_bytes=value_cap, max_result_bytes=1 << 23)
    t0 = time.perf_counter()
    r = ex.run(query)
    elapsed = time.perf_counter() - t0
    assert r.error is not None and r.error.kind == kind, r.error
    assert elapsed < timeout + RETURN_GRACE_S, elapsed  # it was 12 s: the server's watchdog ended it
    assert ex.run("RETURN 1 AS one").rows == [[1]]
    _all_worlds_answer(before)


def test_a_value_just_under_the_servers_record_cap_is_refused_by_the_clients_cap(before):
    # how long it takes is scripts/bench_neo4j.py's ("one huge value"): 0.8 s against 8 s before
    n = int(server.BOLT_MAX_BUFFER_BYTES * 0.9) // 5  # integers of 5 bytes of packstream each
    r = SafeExecutor(WORLD, timeout=5.0, retries=0).run(f"RETURN range(1, {n}) AS xs")
    assert r.error is not None and r.error.kind == "too_large", r.error
    assert "column 'xs' in row 1" in r.error.message, r.error  # the client's cap: the server sent the record
    _all_worlds_answer(before)


def test_the_size_count_stops_at_its_limit_and_bounds_a_raw_value_from_below():
    from graphs.executor import _approx_size
    from graphs.values import normalize

    big = list(range(10**6))
    assert _approx_size(big) == 2 + 9 * 10**6
    assert 1000 < _approx_size(big, 1000) < 1100  # stopped just past the limit
    raw = [{"a": "x" * 10, "b": [1.5, None]}, "yz", 7]
    assert _approx_size(raw) == _approx_size(normalize(raw))
    deep: list = []
    for _ in range(5000):  # deeper than normalize decodes and than Python's recursion limit
        deep = [deep]
    assert _approx_size(deep) > 0


def test_retries_stay_within_the_callers_deadline(before):
    # a port nobody listens on: every attempt is unavailable; the backoff alone would take 0.25+0.5+1+2 s
    from graphs.connections import Target

    dead = Target(world=WORLD, uri="bolt://127.0.0.1:9", user=None, password=None, database=None, local=False)
    ex = SafeExecutor(WORLD, timeout=1.0, retries=4, backoff=0.25, target=dead)
    t0 = time.perf_counter()
    r = ex.run("RETURN 1 AS one")
    assert r.error is not None and r.error.kind == "unavailable"
    assert time.perf_counter() - t0 < 1.0 + RETURN_GRACE_S


def test_env_step_reports_them_as_the_models_errors(tmp_path, before):
    from benchmark.build import build
    from benchmark.session import read_sessions
    from envs.env import CypherTurnEnv, EnvConfig

    build("test", tmp_path, seed=11, sessions=2, hf=False)
    session = next(iter(read_sessions(tmp_path)))
    timeout = 5.0
    env = CypherTurnEnv(config=EnvConfig(protocol="agentic", budget_multiplier=20, timeout=timeout), dataset=tmp_path)
    env.reset(options={"session_id": session.id})
    env.executor = SafeExecutor(env.executor.world, env.executor.limits, max_value_bytes=10_000)
    for query in UNDECODABLE[:4] + [FIRST_THEN_NEVER["too large first row"][0],
                                    FIRST_THEN_NEVER["undecodable first row"][0]]:
        t0 = time.perf_counter()
        obs, reward, terminated, truncated, info = env.step("EXECUTE_CYPHER " + query)
        assert time.perf_counter() - t0 < timeout + RETURN_GRACE_S, query
        assert env.last_result.error is not None and env.last_result.error.kind in ("runtime", "too_large")
        assert "unavailable" not in obs.lower() and "BrokenHydrationObject" not in obs
    _all_worlds_answer(before)


def test_the_execution_reward_scores_a_grpo_batch_holding_them(before):
    reward = make_execution_reward(timeout=5.0)
    good = f"<answer>{GOLD}</answer>"
    bad = [f"<answer>{q}</answer>" for q in UNDECODABLE[:5]]
    bad.append(f"<answer>{FIRST_THEN_NEVER['undecodable first row'][0]}</answer>")
    batch = bad + [good] * (16 - len(bad))
    t0 = time.perf_counter()
    scores = reward(None, batch, gold_cypher=[GOLD] * len(batch), world=[WORLD] * len(batch))
    elapsed = time.perf_counter() - t0
    assert scores == [0.0] * len(bad) + [1.0] * (16 - len(bad))
    # a query ending as a timeout is run once more on its own; none of these needs to
    assert elapsed < 2 * (5.0 + RETURN_GRACE_S), elapsed
    assert execute(WORLD, GOLD).ok
    _all_worlds_answer(before)
