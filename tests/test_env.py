"""The Gymnasium environment's rules, on a small real build over the real Neo4j."""

from __future__ import annotations

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

from benchmark.build import build
from benchmark.session import read_sessions
import envs  # noqa: F401 - registers the ids
from envs.env import CypherTurnEnv, EnvConfig
from envs.oracle import OracleAgent
from envs.prompts import DEPENDENCY_HINT, GUIDED_CAP, HISTORY_ROWS
from envs.simulator import GUIDED_DISCOURAGE

pytestmark = pytest.mark.neo4j


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    out = tmp_path_factory.mktemp("small")
    build("test", out, seed=11, sessions=21, hf=False)
    return out, list(read_sessions(out))


def _env(small, **settings):
    path, sessions = small
    return CypherTurnEnv(config=EnvConfig(**settings), dataset=path)


def test_registered_ids_make_envs_that_pass_the_gymnasium_checker(small):
    path, _ = small
    for env_id in envs.ENV_IDS:
        env = gymnasium.make(env_id, dataset=str(path))
        check_env(env.unwrapped, skip_render_check=True)
        obs, info = env.reset(seed=3)
        assert env.observation_space.contains(obs) and info["new_turn"]
        env.close()


def test_reset_is_deterministic_and_takes_an_explicit_session(small):
    env = _env(small)
    a, ia = env.reset(seed=5)
    b, ib = env.reset(seed=5)
    assert a == b and ia["session_id"] == ib["session_id"]
    sid = small[1][3].id
    _, info = env.reset(options={"session_id": sid})
    assert info["session_id"] == sid
    with pytest.raises(ValueError, match="unknown session id"):
        env.reset(options={"session_id": "nope"})


def test_start_turn_counts_earlier_turns_as_gold_answered(small):
    _, sessions = small
    s = next(x for x in sessions if len(x.turns) >= 4)
    k = 3
    # Agentic: the history is what an agent that submitted each gold query at once would have seen.
    played = _env(small, protocol="agentic", budget_multiplier=3)
    played.reset(options={"session_id": s.id})
    for t in s.turns[:k]:
        obs, _, _, _, info = played.step("SUBMIT_ANSWER " + t.gold_cypher)
    started = _env(small, protocol="agentic", budget_multiplier=3)
    obs2, info2 = started.reset(options={"session_id": s.id, "start_turn": k})
    assert obs2 == obs and info2["turn_index"] == info["turn_index"] == k
    assert info2["budget_left"] == (len(s.turns) - k) * 3 and started.records == []
    assert s.turns[k].gold_cypher not in obs2  # the current turn's gold is never shown
    _, reward, _, _, info3 = started.step("SUBMIT_ANSWER " + s.turns[k].gold_cypher)
    assert reward == 1.0 and info3["record"]["turn_index"] == k and len(info3["records"]) == 1
    # Guided: the prompt is the protocol's own (gold results of earlier turns), as if played through.
    guided = _env(small, protocol="guided")
    guided.reset(options={"session_id": s.id})
    for t in s.turns[:k]:
        obs, *_ = guided.step("SUBMIT_ANSWER " + t.gold_cypher)
    assert _env(small, protocol="guided").reset(options={"session_id": s.id, "start_turn": k})[0] == obs
    for bad in (-1, len(s.turns), "2", True):
        with pytest.raises(ValueError, match="start_turn"):
            started.reset(options={"session_id": s.id, "start_turn": bad})


def test_action_observation_is_the_actions_own_result_even_when_the_turn_ends(small):
    _, sessions = small
    env = _env(small, protocol="guided")
    s = sessions[0]
    env.reset(options={"session_id": s.id})
    obs, _, _, _, info = env.step("EXECUTE_CYPHER " + s.turns[0].gold_cypher)
    assert info["action_observation"] == obs and obs.startswith("[Query Result]")
    obs, _, _, _, info = env.step("SUBMIT_ANSWER " + s.turns[0].gold_cypher)
    assert info["new_turn"] and info["action_observation"] == "[Answer submitted]" and obs != "[Answer submitted]"


def test_oracle_scores_one_on_every_turn_of_both_protocols(small):
    from envs.runner import play_episode

    _, sessions = small
    for protocol in ("guided", "agentic"):
        env = _env(small, protocol=protocol, budget_multiplier=3)
        agent = OracleAgent(sessions, protocol)
        for s in sessions:
            records = play_episode(env, agent, s.id)
            assert len(records) == len(s.turns)
            assert all(r["ex"] == 1 and not r["cliff"] for r in records), (protocol, s.id)


def _first_session(small, pred=None):
    sessions = small[1]
    return next(s for s in sessions if pred is None or pred(s))


def test_guided_turn_closes_after_three_actions_and_falls_back_to_the_last_execute(small):
    env = _env(small, protocol="guided")
    s = _first_session(small)
    obs, _ = env.reset(options={"session_id": s.id})
    _, _, _, _, info = env.step("EXECUTE_CYPHER MATCH (n) RETURN count(n) AS n")
    assert info["actions_left_in_turn"] == 2 and "record" not in info
    env.step("INSPECT_SCHEMA")
    _, reward, _, _, info = env.step(f"EXECUTE_CYPHER {s.turns[0].gold_cypher}")
    record = info["record"]
    assert len(record["actions"]) == GUIDED_CAP and record["prediction"] == s.turns[0].gold_cypher
    assert record["submitted"] is False and record["ex"] == 1 and reward == 1.0
    assert info["new_turn"] is True
    # the 4th action is not part of turn 1: it belongs to turn 2
    _, _, _, _, info = env.step("SUBMIT_ANSWER MATCH (n) RETURN n.name AS name")
    assert info["record"]["turn_index"] == 1 and len(info["records"]) == 2


def test_submit_counts_once_and_no_execute_means_none(small):
    env = _env(small, protocol="guided")
    s = _first_session(small)
    env.reset(options={"session_id": s.id})
    _, reward, _, _, info = env.step("ASK_USER what do you mean?")
    _, reward, _, _, info = env.step("SUBMIT_ANSWER MATCH (n) RETURN 1 AS x")
    assert info["record"]["prediction"] == "MATCH (n) RETURN 1 AS x" and info["record"]["ex"] == 0
    _, _, _, _, info = env.step(f"SUBMIT_ANSWER {s.turns[1].gold_cypher}")  # the next turn's, not turn 1 again
    assert info["records"][0]["prediction"] == "MATCH (n) RETURN 1 AS x"
    assert info["record"]["turn_index"] == 1 and info["record"]["ex"] == 1
    for _ in range(GUIDED_CAP):
        _, _, _, _, info = env.step("ASK_USER hm?")
    assert info["record"]["prediction"] is None and info["record"]["ex"] == 0


def test_guided_ask_user_is_scripted(small):
    env = _env(small, protocol="guided")
    amb = [(s, t) for s in small[1] for t in s.turns if t.ambiguity_info]
    plain = [(s, t) for s in small[1] for t in s.turns if not t.ambiguity_info and t.index == 0]
    s, _ = plain[0]
    env.reset(options={"session_id": s.id})
    obs, *_ = env.step("ASK_USER Which one do you mean?")
    assert obs == f"User: {GUIDED_DISCOURAGE}"
    if amb:
        s, t = amb[0]
        env.reset(options={"session_id": s.id})
        for u in s.turns[:t.index]:
            env.step(f"SUBMIT_ANSWER {u.gold_cypher}")
        obs, *_ = env.step("ASK_USER anything at all")
        assert obs == f"User: {t.ambiguity_info['clarification']}"


def test_guided_prompt_has_schema_history_caps_contrast_whole_and_hint(small):
    env = _env(small, protocol="guided")
    sessions = small[1]
    for s in sessions:
        obs, _ = env.reset(options={"session_id": s.id})
        assert "Graph schema:" in obs and "(this is the first question)" in obs
        for t in s.turns[1:]:
            obs, *_ = env.step(f"SUBMIT_ANSWER {s.turns[t.index - 1].gold_cypher}")
            prev = s.turns[t.index - 1]
            if len(prev.gold_rows) > HISTORY_ROWS + 1:
                hidden = f"{len(prev.gold_rows) - HISTORY_ROWS} more rows not shown"
                assert (hidden in obs) != (t.phenomenon == "CONTRAST")
            hint = DEPENDENCY_HINT.format(n=t.depends_on + 1) if t.depends_on is not None else None
            assert (hint is not None and hint in obs) == (t.depends_on is not None and t.depends_on < t.index - 1)
            assert t.gold_cypher not in obs  # the gold query itself is never shown


def test_agentic_budget_cliff_flags_the_remaining_turns(small):
    s = max(small[1], key=lambda s: len(s.turns))
    env = _env(small, protocol="agentic", budget_multiplier=1)
    _, info = env.reset(options={"session_id": s.id})
    assert info["budget_left"] == len(s.turns)
    done, steps = False, 0
    while not done:
        _, _, done, _, info = env.step("INSPECT_SCHEMA")  # spends the whole budget on turn 1
        steps += 1
    assert steps == len(s.turns)
    records = info["records"]
    assert len(records) == len(s.turns)
    assert records[0]["cliff"] is False and records[0]["prediction"] is None
    assert all(r["cliff"] and r["prediction"] is None and r["ex"] == 0 for r in records[1:])


def test_agentic_history_is_the_models_own_truncated_without_inspect_and_search(small):
    s = _first_session(small, lambda s: len(s.turns) >= 3)
    env = _env(small, protocol="agentic")
    obs, _ = env.reset(options={"session_id": s.id})
    assert "Graph schema" not in obs
    env.step("INSPECT_SCHEMA")
    env.step('SEARCH_VALUES {"label": "NoSuchLabel", "property": "name", "query": "x"}')
    env.step("EXECUTE_CYPHER MATCH (n) RETURN n.name AS name")
    obs, *_ = env.step("SUBMIT_ANSWER MATCH (n) RETURN n.name AS name LIMIT 1")
    assert "EXECUTE_CYPHER: MATCH (n) RETURN n.name AS name" in obs
    assert "SUBMIT_ANSWER: MATCH (n) RETURN n.name AS name LIMIT 1" in obs
    history = obs.split("Conversation so far:")[1].split("Current question")[0]
    assert "INSPECT_SCHEMA" not in history and "SEARCH_VALUES" not in history
    result = history.split("Result: ", 1)[1].split("\nSUBMIT_ANSWER:", 1)[0]
    assert result.endswith("...") and len(result) == 200 + 3


def test_agentic_variants(small):
    s = _first_session(small, lambda s: len(s.turns) >= 3)
    env = _env(small, protocol="agentic", variant="persistent_schema")
    env.reset(options={"session_id": s.id})
    obs, *_ = env.step("SUBMIT_ANSWER MATCH (n) RETURN 1 AS x")
    assert "Graph schema" not in obs
    env.step("INSPECT_SCHEMA")
    obs, *_ = env.step("SUBMIT_ANSWER MATCH (n) RETURN 1 AS x")
    assert "Graph schema (from your INSPECT_SCHEMA)" in obs
    env = _env(small, protocol="agentic", variant="disclosed_horizon", budget_multiplier=5)
    obs, _ = env.reset(options={"session_id": s.id})
    assert f"This session has {len(s.turns)} questions" in obs and f"{5 * len(s.turns)} in all" in obs
    env = gymnasium.make("CypherTurn-AgenticBudgetEncouraging-v0", dataset=str(small[0]))
    _, info = env.reset(options={"session_id": s.id})
    assert "Use the budget fully" in info["system_prompt"] and info["budget_left"] == 10 * len(s.turns)
    with pytest.raises(ValueError):
        _env(small, protocol="guided", variant="persistent_schema")
    with pytest.raises(ValueError):
        _env(small, protocol="agentic", budget_multiplier=0)


def test_step_takes_a_parsed_action_as_it_takes_the_text(small):
    """Two envs play the same sessions, one with tool-call text, one with the Actions that text parses to:
    observations, rewards, infos and records are identical (the records' output text included, since an
    Action is recorded as its tool call)."""
    from envs.actions import action_from_tool_call, tool_call_text

    _, sessions = small
    for protocol in ("guided", "agentic"):
        by_text, by_action = _env(small, protocol=protocol), _env(small, protocol=protocol)
        for s in sessions[:3]:
            outs = [e.reset(options={"session_id": s.id}) for e in (by_text, by_action)]
            assert outs[0] == outs[1]
            done, i = False, 0
            while not done:
                turn = s.turns[by_text.turn_index]
                name, args = [("inspect_schema", {}), ("ask_user", {"question": "which ones?"}),
                              ("search_values", {"label": "X", "property": "name", "query": "q"}),
                              ("execute_cypher", {"query": "MATCH (n) RETURN count(n) AS count"}),
                              ("submit_answer", {"query": turn.gold_cypher})][i % 5]
                i += 1
                a = by_text.step(tool_call_text(name, args))
                b = by_action.step(action_from_tool_call(name, args))
                assert a == b
                done = a[2]
            assert by_text.render() == by_action.render()


def test_a_malformed_action_object_raises_before_anything_is_spent(small):
    from envs.actions import EXECUTE, Action
    from cypherturn.errors import InputError

    s = _first_session(small)
    env = _env(small, protocol="agentic")
    _, info = env.reset(options={"session_id": s.id})
    with pytest.raises(InputError, match="non-empty string"):
        env.step(Action(EXECUTE, ""))
    assert env.budget == info["budget_left"] and env.actions == []


def test_malformed_actions_cost_a_unit_and_get_a_clear_error(small):
    s = _first_session(small)
    env = _env(small, protocol="agentic")
    _, info = env.reset(options={"session_id": s.id})
    budget = info["budget_left"]
    for bad in ["", "hello there", "<tool_call>{not json</tool_call>", "EXECUTE_CYPHER", '{"name": "fly"}',
                "\ud800\x00", "SEARCH_VALUES {broken"]:
        obs, reward, done, _, info = env.step(bad)
        budget -= 1
        assert info["budget_left"] == budget and reward == 0.0 and not done
        assert obs.startswith("[Invalid action]") or obs.startswith("[Error: parse]"), obs


@pytest.fixture(scope="module")
def fuzz_env(small):
    env = _env(small, protocol="agentic", budget_multiplier=10)
    env.reset(seed=0)
    return env


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.text(max_size=200), st.sampled_from(["EXECUTE_CYPHER ", "SEARCH_VALUES ", "ASK_USER ",
                                                         "SUBMIT_ANSWER ", "<tool_call>"]).flatmap(
    lambda p: st.text(max_size=120).map(lambda t: p + t))))
def test_step_never_raises_and_always_returns_an_observation_in_the_space(fuzz_env, text):
    obs, reward, done, truncated, info = fuzz_env.step(text)
    assert isinstance(obs, str) and fuzz_env.observation_space.contains(obs)
    assert reward in (0.0, 1.0) and truncated is False
    if done:
        fuzz_env.reset(seed=len(text))


def test_play_episode_records_the_unplayed_turns_of_an_infrastructure_failure(small, monkeypatch):
    """The one episode loop (envs.runner.play_episode): an agent whose model server fails, or a reset that
    cannot reach Neo4j, ends the episode with every unplayed turn an unscored infrastructure-error record
    (CypherTurnEnv.record_infrastructure_error), never a traceback."""
    import envs.env as env_module
    from envs.backends import BackendError
    from envs.runner import play_episode

    _, sessions = small
    s = next(x for x in sessions if len(x.turns) >= 3)

    class FailsOnTurn2:
        def act(self, obs, info):
            if info["turn_index"] == 1 and info["actions_in_turn"] == 1:
                raise BackendError("model server: 503")
            if info["turn_index"] == 1:
                return "INSPECT_SCHEMA"
            return f"SUBMIT_ANSWER {s.turns[info['turn_index']].gold_cypher}"

    env = _env(small, protocol="agentic")
    records = play_episode(env, FailsOnTurn2(), s.id)
    assert [r["turn_index"] for r in records] == list(range(len(s.turns)))
    assert records[0]["ex"] == 1 and records[0]["infra_error"] is None
    assert all(r["ex"] is None and r["infra_error"] == "model server: 503" and r["prediction"] is None
               for r in records[1:])
    assert records[1]["actions"] == [{"type": "INSPECT_SCHEMA", "payload": ""}]  # what the turn had done
    with pytest.raises(RuntimeError):
        env.step("INSPECT_SCHEMA")  # the episode is over

    # A Neo4j that cannot be reached, for real: the driver is pointed at a port nothing listens on (the
    # backoff between reset's attempts is zeroed only to keep the test short)
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    monkeypatch.setenv("CYPHERTURN_NEO4J_URI", f"bolt://127.0.0.1:{closed_port}")
    monkeypatch.setattr(env_module, "RESET_BACKOFF_S", 0.0)
    records = play_episode(_env(small), FailsOnTurn2(), s.id)
    down = f"Neo4j is unavailable for world {s.world!r} after {env_module.RESET_ATTEMPTS} attempts: ServiceUnavailable"
    assert len(records) == len(s.turns) and all(
        r["infra_error"].startswith(down) and r["actions"] == [] and r["budget_left"] is None
        and r["session_id"] == s.id for r in records)


def test_env_config_is_validated_and_shared_by_both_env_classes(small):
    """The config is the one way in: both env classes take an EnvConfig and nothing else for their
    settings, and a registered id plays the config it is given when that config is of its protocol."""
    from envs.trl_adapter import CypherTurnToolEnv
    from cypherturn.errors import InputError

    path, sessions = small
    for bad, field in [({"protocol": "chat"}, "protocol"), ({"variant": "persistent_schema"}, "variant"),
                       ({"protocol": "agentic", "budget_multiplier": 0}, "budget_multiplier"),
                       ({"budget_multiplier": True}, "budget_multiplier"), ({"timeout": 0}, "timeout")]:
        with pytest.raises(InputError, match=field):
            EnvConfig(**bad)
    config = EnvConfig(protocol="agentic", budget_multiplier=2, variant="disclosed_horizon", timeout=30.0)
    by_config = CypherTurnEnv(config=config, dataset=path)
    by_id = gymnasium.make("CypherTurn-AgenticDisclosedHorizon-v0", dataset=str(path), config=config)
    assert by_config.config == by_id.unwrapped.config == config
    sid = sessions[0].id
    obs, info = by_config.reset(options={"session_id": sid})
    assert (obs, info) == by_id.reset(options={"session_id": sid})
    assert info["budget_left"] == 2 * len(sessions[0].turns)  # the config's multiplier, not the id's default 3
    with pytest.raises(InputError, match="protocol='guided'.*protocol='agentic'"):
        gymnasium.make("CypherTurn-Guided-v0", dataset=str(path), config=config)
    for loose in ({"budget_multiplier": 5}, {"protocol": "agentic"}):
        with pytest.raises(TypeError):
            CypherTurnEnv(dataset=path, **loose)
        with pytest.raises(TypeError):
            CypherTurnToolEnv(sessions=sessions, **loose)
    with pytest.raises(InputError, match="config must be an EnvConfig"):
        CypherTurnEnv(config="agentic", dataset=path)
    # render_mode is Gymnasium's constructor argument, as gymnasium.make passes it
    assert CypherTurnEnv(dataset=path).render_mode is None
    assert gymnasium.make("CypherTurn-Guided-v0", dataset=str(path), render_mode="ansi").unwrapped.render_mode == "ansi"
    with pytest.raises(InputError, match="render_mode"):
        CypherTurnEnv(dataset=path, render_mode="human")
    tool_env = CypherTurnToolEnv(sessions=sessions, config=config)
    tool_env.reset(session=sid, turn=0)
    assert tool_env._env.config == config  # a row without a protocol plays the config's
    tool_env.reset(session=sid, turn=0, protocol="agentic")


def test_the_agent_and_the_judge_share_one_executor_per_world(small):
    """The environment runs the agent's queries on the judge's executor of the world (one per world and
    timeout), so a submitted query that the agent has just run is scored from that run, not run again."""
    from scoring.judge import shared_judge

    _, sessions = small
    s = sessions[0]
    env = _env(small, protocol="guided", timeout=30.0)
    env.reset(options={"session_id": s.id})
    judge = shared_judge(timeout=30.0)
    assert env.executor is judge.executor(s.world)
    assert env.executor.limits.max_rows == judge.limits.max_rows and env.executor.limits.timeout == 30.0
    pred = "MATCH (n) RETURN count(n) AS n"  # not the gold's text: the judge would run it, unless it reuses the result
    env.step(f"EXECUTE_CYPHER {pred}")
    ran = []
    original = judge.run_queries
    judge.run_queries = lambda jobs: ran.append(list(jobs)) or original(jobs)
    try:
        _, _, _, _, info = env.step(f"SUBMIT_ANSWER {pred}")
    finally:
        del judge.run_queries
    assert info["record"]["prediction"] == pred and ran == [[]]


def test_search_values_with_plain_text_searches_the_whole_graph(small):
    s = _first_session(small)
    env = _env(small, protocol="guided")
    env.reset(options={"session_id": s.id})
    from graphs.search import search_graph
    first = search_graph(s.world, "a", limit=1)[0]
    obs, *_ = env.step(f"SEARCH_VALUES {first.value}")
    assert obs.startswith("[Search] ") and first.pattern() in obs and len(obs.splitlines()) <= 5
    obs, *_ = env.step(f'SEARCH_VALUES {{"query": "{first.value}", "label": "{first.label}"}}')
    assert "got a label but no property" in obs
