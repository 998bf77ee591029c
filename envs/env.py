"""CypherTurn as a Gymnasium environment: one episode is one session (DESIGN §6).

Contract:

- ``reset(seed=None, options=None)`` picks a session (raising ``EnvUnavailable`` when Neo4j stays
  unreachable through a few retries with backoff): ``options={"session_id": ID}`` picks that one;
  otherwise the session is drawn from the dataset with the env's RNG (seeded by ``seed``). It returns
  the first turn prompt and ``info`` with ``system_prompt``, ``session_id``, ``turns``, ``new_turn``.
  ``options["start_turn"] = k`` starts at turn k as if turns 0..k-1 had each been answered with its
  gold query in one action (the agentic history shows those submissions; the budget is (T - k) x m);
  those turns are not recorded. Training on later turns uses it.
- ``step(action)`` takes the model's raw text (see ``envs.actions``), or an ``envs.actions.Action``
  already parsed (the TRL adapter's tool calls; it is played as the text it parses from would be, and
  recorded as its canonical tool call); each call costs one unit, a malformed one too. It returns the
  observation (the action's result, or the next turn prompt when a turn ended), the reward (the EX of
  the ended turn's prediction, else 0), ``terminated`` (the session is over), ``truncated`` (always
  False) and ``info`` (``new_turn``: the observation is a turn
  prompt, so the agent should start a fresh context with ``info["system_prompt"]``; ``record``: the
  turn record when a turn ended; ``records``: every record so far; ``action_observation``: this
  action's own result, also when the observation returned is already the next turn's prompt).
- A turn ends on the first SUBMIT_ANSWER; in the guided protocol also after its third action; in
  the agentic protocol also when the shared budget B = T x m runs out, and then every remaining turn
  is recorded with prediction None and ``cliff`` = True. A turn that ends without SUBMIT takes its last
  EXECUTE_CYPHER query as the prediction, or None.
- The agent never sees gold queries (only, in the guided protocol, gold *results* of earlier turns,
  as the protocol prescribes) and cannot reset a session from inside an episode.
"""

from __future__ import annotations

import json
import string
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from benchmark.build import default_dataset
from benchmark.session import Session, Turn, read_sessions
from envs import prompts
from envs.actions import (ASK, EXECUTE, INSPECT, SEARCH, SUBMIT, Action, ParseError, action_text, check_action,
                          loads_bounded, parse_action)
from cypherturn.errors import InfrastructureError, InputError, ResetNeeded
from envs.simulator import GUIDED_DISCOURAGE, UserSimulator
from graphs.connections import ConfigError
from graphs.schema import introspect
from graphs.search import SearchError, SearchUnavailable, search_graph, search_values
from graphs.server import ServerError
from scoring.judge import shared_judge
from scoring.records import TurnRecord

PROTOCOLS = ("guided", "agentic")
VARIANTS = (None, "persistent_schema", "disclosed_horizon", "budget_encouraging")
MAX_TEXT = 200_000
# Observations and actions are text over this charset; anything else in an observation becomes "?".
CHARSET = frozenset(string.printable + "".join(chr(c) for c in range(0xA0, 0x250)) + "–—‘’“”…•→←·")


def sanitize(text: str) -> str:
    text = "".join(ch if ch in CHARSET else "?" for ch in text)
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 20] + "\n...(cut)"


RESET_ATTEMPTS, RESET_BACKOFF_S = 4, 2.0  # reset reads the schema: 2 + 4 + 8 s of patience for an outage


class EnvUnavailable(InfrastructureError):
    """Neo4j could not be reached by ``reset`` after retries: infrastructure, not the agent's doing."""


def _introspect(world: str):
    """The world's schema, retried with backoff while Neo4j is unreachable (a local server that died is
    restarted on its ports by the next attempt); EnvUnavailable when every attempt fails."""
    from neo4j.exceptions import DriverError, Neo4jError

    for attempt in range(RESET_ATTEMPTS):
        try:
            return introspect(world)
        except (DriverError, Neo4jError, ConfigError, ServerError, OSError) as exc:
            if attempt == RESET_ATTEMPTS - 1:
                raise EnvUnavailable(f"Neo4j is unavailable for world {world!r} after {RESET_ATTEMPTS} attempts: "
                                     f"{type(exc).__name__}: {exc}") from exc
            time.sleep(RESET_BACKOFF_S * 2 ** attempt)


_DATASET_CACHE: dict[str, list[Session]] = {}


def load_dataset(dataset: str | Path | None) -> list[Session]:
    """Sessions from a build directory or sessions.jsonl; None: the default test build (built on demand)."""
    if dataset is None:
        dataset = default_dataset("test")
    key = str(Path(dataset).resolve())
    if key not in _DATASET_CACHE:
        sessions = list(read_sessions(dataset))
        if not sessions:
            raise InputError(f"{dataset}: no sessions")
        _DATASET_CACHE[key] = sessions
    return _DATASET_CACHE[key]


RENDER_MODES = ("ansi",)


@dataclass(frozen=True)
class EnvConfig:
    """How a CypherTurn environment plays its sessions; shared by ``CypherTurnEnv`` and the TRL adapter's
    ``CypherTurnToolEnv``. Validated on construction (``InputError`` naming the field). The sessions
    themselves (``dataset`` / ``sessions``) are not part of it: they are the data, passed beside it."""

    protocol: str = "guided"
    """``"guided"`` (schema and gold history shown, 3 actions per turn) or ``"agentic"`` (schema withheld,
    one shared budget)."""

    budget_multiplier: int = 3
    """The agentic budget is B = T x ``budget_multiplier`` actions for a session of T turns (m >= 1)."""

    variant: str | None = None
    """An agentic ablation: ``"persistent_schema"``, ``"disclosed_horizon"`` or ``"budget_encouraging"``;
    None for the protocol as specified (and always for guided)."""

    timeout: float = 120.0
    """Seconds a query may run (the agent's EXECUTE_CYPHER and the judge's scoring), the paper's 120 s."""

    user_simulator_backend: Any = None
    """The agentic ASK_USER reply backend (``envs.simulator.LLMReplyBackend``); None: the rule-based user."""

    def __post_init__(self):
        if self.protocol not in PROTOCOLS:
            raise InputError(f"protocol must be one of {PROTOCOLS}, got {self.protocol!r}")
        if self.variant not in VARIANTS or (self.variant and self.protocol != "agentic"):
            raise InputError(f"variant must be one of {VARIANTS[1:]} (agentic protocol only), got {self.variant!r}")
        if (not isinstance(self.budget_multiplier, int) or isinstance(self.budget_multiplier, bool)
                or self.budget_multiplier < 1):
            raise InputError(f"budget_multiplier must be a positive integer, got {self.budget_multiplier!r}")
        if (not isinstance(self.timeout, (int, float)) or isinstance(self.timeout, bool)
                or not self.timeout > 0):
            raise InputError(f"timeout must be a positive number of seconds, got {self.timeout!r}")


def env_config(config: EnvConfig | None) -> EnvConfig:
    """``config`` (None: ``EnvConfig()``); anything else is an InputError, so a setting passed in its place
    (``CypherTurnEnv(config="agentic")``) fails here rather than deep inside an episode."""
    if config is None:
        return EnvConfig()
    if not isinstance(config, EnvConfig):
        raise InputError(f"config must be an EnvConfig, got {type(config).__name__}")
    return config


def make_registered(*, preset: dict[str, Any], config: EnvConfig | None = None, dataset: str | Path | None = None,
                    sessions: list[Session] | None = None, render_mode: str | None = None) -> "CypherTurnEnv":
    """The entry point of a registered id (``envs.ENV_IDS``; ``gymnasium.make`` passes its keyword
    arguments): the id's ``preset`` (``EnvConfig`` fields), or ``config`` when that plays the id's
    protocol and variant (a config that says otherwise is an InputError naming both)."""
    fixed = EnvConfig(**preset)
    config = fixed if config is None else env_config(config)
    if (config.protocol, config.variant) != (fixed.protocol, fixed.variant):
        raise InputError(f"this id plays protocol={fixed.protocol!r}, variant={fixed.variant!r}; config= says "
                         f"protocol={config.protocol!r}, variant={config.variant!r}")
    return CypherTurnEnv(config=config, dataset=dataset, sessions=sessions, render_mode=render_mode)


def search_arguments(argument: Any) -> dict | str:
    """A SEARCH_VALUES argument (an object, JSON text or plain text) as ``{"query"}`` (the whole graph) or
    ``{"label", "property", "query"}`` (one property), else the message that says what is wrong."""
    if isinstance(argument, str):
        text = argument.strip()
        if not text.startswith("{"):
            return {"query": text.strip("\"'`")}
        try:
            argument = loads_bounded(text)
        except ValueError as exc:
            return f"SEARCH_VALUES needs a JSON object {{\"label\", \"property\", \"query\"}} or plain text: {exc}"
    if not isinstance(argument, dict) or "query" not in argument:
        return "SEARCH_VALUES needs a JSON object with keys label, property, query, or the text to look for"
    if ("label" in argument) != ("property" in argument):
        given, missing = ("label", "property") if "label" in argument else ("property", "label")
        return (f"SEARCH_VALUES got a {given} but no {missing}: give both (one property searched) or neither "
                "(the whole graph)")
    return argument


class CypherTurnEnv(gym.Env):
    """One CypherTurn session per episode; text observations and text actions.

    ``CypherTurnEnv(config=EnvConfig(...), dataset=... | sessions=...)``: every setting is a field of
    ``config`` (default ``EnvConfig()``), read from there. ``dataset``: a build directory or
    sessions.jsonl (None: the default test build); ``sessions``: the sessions themselves (they win over
    ``dataset``). ``render_mode`` is Gymnasium's constructor argument (``gymnasium.make(id,
    render_mode="ansi")``): None or ``"ansi"``; ``render()`` returns the transcript either way.

    Queries run on the judge's executor of the session's world (``scoring.judge.shared_judge`` for the
    config's timeout): what the agent's EXECUTE_CYPHER sees (row cap, timeout, size caps, retries) is
    what the judge scores, so a submitted query's result is reused as it stands."""

    metadata = {"render_modes": list(RENDER_MODES)}

    def __init__(self, *, config: EnvConfig | None = None, dataset: str | Path | None = None,
                 sessions: list[Session] | None = None, render_mode: str | None = None):
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise InputError(f"render_mode must be None or one of {RENDER_MODES}, got {render_mode!r}")
        self.render_mode = render_mode
        self.config = env_config(config)
        self.sessions = sessions if sessions is not None else load_dataset(dataset)
        self._by_id = {s.id: s for s in self.sessions}
        self._judge = shared_judge(timeout=self.config.timeout)
        self.action_space = gym.spaces.Text(max_length=MAX_TEXT, min_length=0, charset=CHARSET)
        self.observation_space = gym.spaces.Text(max_length=MAX_TEXT, min_length=0, charset=CHARSET)
        self.session: Session | None = None
        self.db_ms = 0.0  # time inside Neo4j queries since construction (for the overhead benchmark)

    # -- episode ------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = options or {}
        if "session_id" in options:
            if options["session_id"] not in self._by_id:
                raise InputError(f"unknown session id {options['session_id']!r}")
            self.session = self._by_id[options["session_id"]]
        else:
            self.session = self.sessions[int(self.np_random.integers(len(self.sessions)))]
        s = self.session
        protocol, m = self.config.protocol, self.config.budget_multiplier
        self.schema = _introspect(s.world)
        self.executor = self._judge.executor(s.world)
        self.simulator = UserSimulator(self.schema.terms(), self.config.user_simulator_backend)
        self.turn_index = 0
        self.records: list[TurnRecord] = []
        self.budget = len(s.turns) * m if protocol == "agentic" else None
        self.agentic_history: list[str] = []
        self.schema_seen = False
        self.transcript: list[str] = [f"Session {s.id} ({s.world}, persona {s.persona}, {protocol})"]
        self._start_turn()
        start = options.get("start_turn", 0)
        if not isinstance(start, int) or isinstance(start, bool) or not 0 <= start < len(s.turns):
            raise InputError(f"start_turn must be an integer in [0, {len(s.turns)}) for session {s.id}, got {start!r}")
        for turn in s.turns[:start]:
            self._replay_gold(turn)
        if self.budget is not None:
            self.budget = (len(s.turns) - start) * m  # the even share of the turns left
        info = {"system_prompt": prompts.system_prompt(protocol, self.config.variant), "session_id": s.id,
                "world": s.world, "turns": len(s.turns), "new_turn": True, "budget_left": self.budget,
                "turn_index": start, "actions_in_turn": 0}
        return self._obs(self._turn_prompt()), info

    def _replay_gold(self, turn: Turn) -> None:
        """An earlier turn taken as answered with its gold query in one action (``start_turn``): the agentic
        history holds that submission as if the agent had made it; no record is kept (it is not scored)."""
        self.transcript.append(f"--- turn {turn.index + 1} (replayed with its gold query) ---")
        if self.config.protocol == "agentic":
            self.agentic_history.append(f"Turn {turn.index + 1}\nUser: {turn.shown_utterance}\n"
                                        f"SUBMIT_ANSWER: {turn.gold_cypher}")
        self.turn_index += 1

    def _start_turn(self) -> None:
        self.actions: list[dict] = []
        self.outputs: list[str] = []  # the model's raw text, for Tok/S
        self.last_execute: str | None = None
        self.last_result = None  # its result: the judge does not run a submitted query again
        self.asks = 0
        self.turn_history: list[str] = []

    @property
    def turn(self) -> Turn:
        return self.session.turns[self.turn_index]

    def _turn_prompt(self) -> str:
        s, i, c = self.session, self.turn_index, self.config
        if c.protocol == "guided":
            text = prompts.guided_turn_prompt(self.schema.to_text(), s.turns, i)
        else:
            horizon = None
            if c.variant == "disclosed_horizon":
                remaining = len(s.turns) - i
                m = c.budget_multiplier
                horizon = {"turns": len(s.turns), "m": m, "budget": len(s.turns) * m, "left": self.budget,
                           "suggested": round(self.budget / remaining, 1)}
            schema_text = self.schema.to_text() if c.variant == "persistent_schema" and self.schema_seen else None
            text = prompts.agentic_turn_prompt(self.agentic_history, self.turn.shown_utterance, i,
                                               schema_text=schema_text, horizon=horizon)
        self.transcript.append(f"--- turn {i + 1} ---\nUser: {self.turn.shown_utterance}")
        return text

    def _obs(self, text: str) -> str:
        return sanitize(text)

    # -- actions ------------------------------------------------------------------------------------
    def step(self, action: str | Action):
        """One action of the agent (see the module docstring for what it returns).

        ``action`` is the model's text, parsed with ``envs.actions.parse_action`` (text that is no
        action, or any other object, is an invalid action: it costs a unit and the observation says
        what to send instead), or an ``Action`` already parsed, played as is and recorded as the
        model's output in its canonical text (``envs.actions.action_text``). A malformed ``Action`` (an
        unknown type, a missing argument) is the caller's bug and raises ``InputError`` before anything
        is spent. The action space stays ``Text``: an ``Action`` is a convenience for callers that parse
        tool calls themselves."""
        if self.session is None or self.turn_index >= len(self.session.turns):
            raise ResetNeeded("call reset() before step(); the episode is over")
        if isinstance(action, Action):
            parsed: Action | ParseError = check_action(action)
            raw = action_text(action)
        else:
            parsed = parse_action(action)
            raw = action if isinstance(action, str) else repr(action)
        self.transcript.append(f"Assistant: {raw}")
        if self.budget is not None:
            self.budget -= 1
        observation, submitted = self._apply(parsed)
        self.actions.append({"type": parsed.type, "payload": _payload_text(parsed)})
        self.outputs.append(raw)
        self.transcript.append(f"Observation: {observation}")
        action_observation = self._obs(observation)
        guided = self.config.protocol == "guided"
        turn_over = submitted is not None or (guided and len(self.actions) >= prompts.GUIDED_CAP) or (
            self.budget is not None and self.budget <= 0)
        info: dict[str, Any] = {"new_turn": False, "budget_left": self.budget, "session_id": self.session.id,
                                "turn_index": self.turn_index, "actions_in_turn": len(self.actions),
                                "actions_left_in_turn": (prompts.GUIDED_CAP - len(self.actions)
                                                         if guided else None),
                                "action_observation": action_observation}
        if not turn_over:
            return action_observation, 0.0, False, False, info
        prediction = submitted if submitted is not None else self.last_execute
        record = self._finish_turn(prediction, submitted is not None)
        reward = float(record.ex or 0)
        info["record"] = record.to_dict()
        if self.budget is not None and self.budget <= 0:
            self._cliff()
        if self.turn_index >= len(self.session.turns):
            info["records"] = [r.to_dict() for r in self.records]
            end = f"{observation}\n[The session is over.]"
            return self._obs(end), reward, True, False, info
        info.update(new_turn=True, turn_index=self.turn_index, actions_in_turn=0,
                    records=[r.to_dict() for r in self.records])
        return self._obs(self._turn_prompt()), reward, False, False, info

    def _apply(self, parsed: Action | ParseError) -> tuple[str, str | None]:
        """(observation, submitted query or None)."""
        if isinstance(parsed, ParseError):
            return prompts.invalid_action(parsed.message), None
        if parsed.type == EXECUTE:
            self.last_execute = parsed.argument
            r = self.last_result = self.executor.run(parsed.argument)
            self.db_ms += r.elapsed_ms
            if r.error is not None:
                text = prompts.error_text(r.error.kind, r.error.message)
            else:
                text = "[Query Result]\n" + prompts.format_result(r.columns, r.rows, prompts.CURRENT_ROWS,
                                                                  truncated=r.truncated)
            self.turn_history.append(f"EXECUTE_CYPHER: {parsed.argument}\nResult: {prompts.truncate(text)}")
            return text, None
        if parsed.type == INSPECT:
            self.schema_seen = True
            return self.schema.to_text(), None
        if parsed.type == SEARCH:
            return self._search(parsed.argument), None
        if parsed.type == ASK:
            self.asks += 1
            if self.config.protocol == "guided":
                reply = (self.turn.ambiguity_info["clarification"] if self.turn.ambiguity_info else GUIDED_DISCOURAGE)
            else:
                reply = self.simulator.reply(parsed.argument, self.turn, self.session.persona, self.asks).reply
            self.turn_history.append(f"ASK_USER: {parsed.argument}\nUser: {reply}")
            return f"User: {reply}", None
        assert parsed.type == SUBMIT
        self.turn_history.append(f"SUBMIT_ANSWER: {parsed.argument}")
        return "[Answer submitted]", parsed.argument

    def _search(self, argument: Any) -> str:
        """SEARCH_VALUES: a JSON object with label, property and query searches that property; plain text
        (or an object with only a query) searches every label and property (``search_graph``)."""
        argument = search_arguments(argument)
        if isinstance(argument, str):
            return prompts.error_text("parse", argument)
        try:
            if "label" in argument:
                result = search_values(self.session.world, str(argument["label"]), str(argument["property"]),
                                       argument["query"])
                values = result.values
                text = json.dumps(values, ensure_ascii=False)
            else:
                values = search_graph(self.session.world, argument["query"], limit=prompts.GRAPH_SEARCH_ROWS)
                text = "\n".join(m.pattern() for m in values)
        except SearchError as exc:
            return prompts.error_text("search", str(exc))
        except SearchUnavailable as exc:
            return prompts.error_text("unavailable", str(exc))
        if not values:
            return "[Search] no matching values"
        return "[Search] " + text

    # -- scoring --------------------------------------------------------------------------------------
    def _finish_turn(self, prediction: str | None, submitted: bool) -> TurnRecord:
        turn = self.turn
        # the query the agent just ran and now submits: its result stands (it ran on the judge's executor)
        ran = self.last_result if prediction is not None and prediction == self.last_execute else None
        # the one judge (the scorer's and the execution rewards' rules), against the stored gold result
        v = self._judge.judge(self.session.world, turn.gold_cypher, prediction, gold_columns=turn.gold_columns,
                              gold_rows=turn.gold_rows, pred_result=ran)
        self.db_ms += v.db_ms
        record = self._record(turn, prediction, v.ex, v.ex_relaxed, submitted=submitted, cliff=False,
                              infra_error=v.infra_error)
        self.records.append(record)
        if self.config.protocol == "agentic":
            entry = [f"Turn {turn.index + 1}\nUser: {turn.shown_utterance}"] + self.turn_history
            self.agentic_history.append("\n".join(entry))
        self.turn_index += 1
        self._start_turn()
        return record

    def _cliff(self) -> None:
        """The shared budget is spent: every remaining turn scores None (EX 0), flagged as cliff."""
        while self.turn_index < len(self.session.turns):
            self.records.append(self._record(self.turn, None, 0, 0, submitted=False, cliff=True, infra_error=None))
            self.turn_index += 1
            self._start_turn()

    def record_infrastructure_error(self, message: str, *, session_id: str | None = None) -> list[dict]:
        """End the episode because of an infrastructure failure (Neo4j or the model server could not be
        reached: no verdict on the agent) and return the session's turn records: those of the turns
        played, then every turn not yet recorded with prediction None, ``ex`` None and ``infra_error``
        = ``message`` (unscored: the metrics exclude and count them, a resumed evaluation replays the
        session). The turn in progress, and each one after it, carries the actions, outputs and budget
        of the moment of the failure.

        ``session_id``: the session whose ``reset`` failed (nothing of it was played, no budget yet);
        without it, the episode in progress."""
        if session_id is not None:
            if session_id not in self._by_id:
                raise InputError(f"unknown session id {session_id!r}")
            self.session, self.turn_index, self.records, self.budget = self._by_id[session_id], 0, [], None
            self._start_turn()
        elif self.session is None:
            raise ResetNeeded("no episode to end: call reset() first, or name the session whose reset failed")
        for turn in self.session.turns[len(self.records):]:
            self.records.append(self._record(turn, None, None, None, submitted=False, cliff=False,
                                             infra_error=message))
        self.turn_index = len(self.session.turns)  # the episode is over: step() now refuses
        return [r.to_dict() for r in self.records]

    def _record(self, turn: Turn, prediction, ex, exr, *, submitted: bool, cliff: bool, infra_error) -> TurnRecord:
        s = self.session
        return TurnRecord(session_id=s.id, world=s.world, persona=s.persona, turn_index=turn.index,
                          phenomenon=turn.phenomenon, chain_mode=turn.chain_mode, depends_on=turn.depends_on,
                          protocol=self.config.protocol, prediction=prediction, gold_cypher=turn.gold_cypher, ex=ex,
                          ex_relaxed=exr, actions=list(self.actions), submitted=submitted,
                          budget_left=self.budget, cliff=cliff, infra_error=infra_error,
                          output_text="\n".join(self.outputs))

    def render(self) -> str:
        return "\n".join(self.transcript)


def _payload_text(parsed: Action | ParseError) -> str:
    if isinstance(parsed, ParseError):
        return parsed.message
    if parsed.argument is None:
        return ""
    return parsed.argument if isinstance(parsed.argument, str) else json.dumps(parsed.argument, ensure_ascii=False)

