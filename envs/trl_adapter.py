"""CypherTurn as a TRL environment: ``GRPOTrainer(environment_factory=…)`` (DESIGN §6, §10).

One GRPO rollout is one *turn* of a session: the training row names it (``world``, ``session``,
``turn``, ``protocol``); the model acts through five tools — the five actions of ``envs.actions`` —
and is rewarded with the EX of that turn. The adapter drives a real ``CypherTurnEnv`` (and so the
real Neo4j); nothing is simulated.

The contract, as implemented by TRL 1.13 (``trl/trainer/grpo_trainer.py``), that this module follows:

- ``GRPOTrainer.__init__`` calls the factory with no arguments, once to probe and then once per
  concurrent rollout (``_environment_pool``; instances are reused across batches, so ``reset`` must
  clear every per-episode field). Use ``functools.partial(CypherTurnToolEnv, dataset=…)`` or
  ``make_env_factory``.
- Tools are the instance's bound methods found by ``inspect.getmembers(env, inspect.ismethod)`` whose
  names are not ``reset`` / ``get_reward`` and do not start with ``_`` (``__init__`` and
  ``_generate_and_score_completions``). Their JSON schemas come from
  ``tokenizer.apply_chat_template(tools=[methods])``, i.e. ``transformers.utils.get_json_schema``:
  type hints plus a Google-style docstring (``Args:`` / ``Returns:``). This class therefore has
  exactly five public methods besides ``reset`` and ``get_reward``, no public classmethods (they
  would be bound methods too), and keeps everything else — sessions, gold, the wrapped env — in
  underscore-prefixed attributes, out of the tool list.
- ``reset(**row)`` is called with *every column* of the training row, ``prompt`` included
  (``_generate_and_score_completions``). A string it returns is concatenated to the content of the
  row's last prompt message (``content + observation``, no separator); ``None`` leaves the prompt
  as is. Rows from ``make_training_rows`` end with an empty user message, so the turn prompt
  returned by ``reset`` becomes the user message.
- The tool loop (``_tool_call_loop``): tool calls are parsed from the completion with the
  tokenizer's response template (``trl.chat_template_utils.add_response_schema`` sets it for known
  templates such as Qwen2.5's Hermes ``<tool_call>{…}</tool_call>`` format); each call runs
  ``method(**arguments)``; the result is sent back as ``{"role": "tool", "content": str(result)}``;
  an exception becomes ``{"error": str(e)}`` (counted as a tool failure). Generation continues
  until a response has no tool call, ``GRPOConfig.max_tool_calling_iterations`` rounds have run, or
  the completion would exceed ``max_completion_length`` (tool results count towards it).
- ``get_reward()`` (no arguments) is found by the trainer in ``__init__`` and added as a reward
  function named after the environment class, weight 1 (logged as ``rewards/<ClassName>/mean``); it
  is called once per finished rollout, after the tool loop. Reward functions passed in
  ``reward_funcs`` also receive the rollouts' instances as ``environments=`` (``_calculate_rewards``),
  which ``env_reward`` uses.

Per rollout:

- ``reset(world=…, session=…, turn=k, protocol=…, **other_columns)`` starts the session in a
  ``CypherTurnEnv`` at turn k (``reset(options={"start_turn": k})``: turns ``0 … k-1`` count as
  answered with their gold queries); the model sees only what the protocol shows at turn k. Guided: the schema and the earlier turns'
  utterances with their gold *results* (the protocol's own history). Agentic: the history is the
  agent's own actions, so the replayed turns appear as the agent having submitted the earlier gold
  queries (teacher forcing); the shared budget left at turn k is set to the even share
  ``(T - k) × m``. The current turn's gold is never shown. Other columns (``prompt``, reward columns
  such as ``gold_cypher``) are ignored and not stored.
- Each tool call is one action of the environment (one unit of cost; the guided protocol's cap of 3
  actions per turn and the agentic budget apply). Once the turn is over (SUBMIT_ANSWER, the cap, the
  budget) further calls are answered with a notice and change nothing; the next turn's prompt is
  never shown (in the guided protocol it would hold this turn's gold result).
- ``get_reward()`` is the EX (1.0 / 0.0) of the row's turn. A turn the model left without
  SUBMIT_ANSWER is scored by the environment's rule: its last EXECUTE_CYPHER query is the
  prediction, or there is none (0.0). A scoring query that cannot reach Neo4j raises.

Typical use::

    from envs.trl_adapter import make_env_factory, training_dataset
    dataset = training_dataset(sessions, protocol="guided")
    trainer = GRPOTrainer(model, args=GRPOConfig(...), train_dataset=dataset, processing_class=tok,
                          environment_factory=make_env_factory(sessions=sessions))
"""

from __future__ import annotations

import functools
import inspect
import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable

from benchmark.session import Session
from cypherturn.errors import InfrastructureError, InputError, ResetNeeded
from envs import prompts
from envs.actions import Action, ParseError, action_from_tool_call, parse_action, tool_call_text
from envs.env import PROTOCOLS, CypherTurnEnv, EnvConfig, env_config, load_dataset
from rewards.completions import completion_text

TOOL_NAMES = ("execute_cypher", "inspect_schema", "search_values", "ask_user", "submit_answer")
TURN_OVER = ("[The turn is over: your answer for this question is recorded. Do not call more tools; "
             "end your response.]")
LAST_ACTION = "[That was your last action for this question: the turn is over.]"


def _text(value: Any) -> str:
    """A tool argument as text (models sometimes send numbers or objects)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


class CypherTurnToolEnv:
    """One CypherTurn turn per episode, acted on through five tools (see the module docstring).

    Args (constructor, not a tool): ``dataset`` (a build directory or sessions.jsonl) or ``sessions``;
    ``config``: the environment's ``envs.env.EnvConfig``, as for ``CypherTurnEnv`` (default
    ``EnvConfig()``; its ``protocol`` is the default when a row has no ``protocol`` column; a row's own
    protocol replaces it); ``expose_reward``: False hides ``get_reward`` from TRL (then score with
    ``env_reward`` in ``reward_funcs``, e.g. to weight it against other rewards without counting it
    twice).
    """

    def __init__(self, dataset: str | Path | None = None, *, sessions: list[Session] | None = None,
                 config: EnvConfig | None = None, expose_reward: bool = True):
        self._config = env_config(config)
        self._sessions = sessions if sessions is not None else load_dataset(dataset)
        self._by_id = {s.id: s for s in self._sessions}
        self._envs: dict[str, CypherTurnEnv] = {}
        self._env: CypherTurnEnv | None = None
        self._clear()
        if not expose_reward:
            # An instance attribute shadows the method: TRL's inspect.getmembers(..., ismethod) then finds
            # no `get_reward` (and no tool); `env_reward` scores through `_score` instead.
            self.get_reward = None  # type: ignore[assignment]
        # Public, gold-free counters for logging and tests.
        self.episodes = 0
        self.tool_calls: list[str] = []  # tool names called by the model in the current episode

    def _clear(self) -> None:
        self._turn_index: int | None = None
        self._ex: float | None = None  # the row's turn's EX once the turn is over
        self._over = False

    # -- episode ----------------------------------------------------------------------------------
    def reset(self, *, session: str | None = None, turn: int = 0, protocol: str | None = None,
              world: str | None = None, prompt: Any = None, **_columns: Any) -> str | None:
        """Start the episode of one training row (called by the trainer, never a tool).

        Args:
            session: The session id.
            turn: The index (from 0) of the turn to play.
            protocol: "guided" or "agentic" (default: the constructor's).
            world: The session's world, checked against the session when given.
            prompt: The row's prompt; the turn prompt is returned only if its last message does not
                hold it already.

        Returns:
            The turn prompt, to be appended to the row's last prompt message (or None).
        """
        self._clear()
        self.tool_calls = []
        self.episodes += 1
        if session is None:
            raise InputError("a training row needs a `session` column (see envs.trl_adapter.make_training_rows)")
        if session not in self._by_id:
            raise InputError(f"unknown session id {session!r}")
        protocol = protocol or self._config.protocol
        if protocol not in PROTOCOLS:
            raise InputError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
        s = self._by_id[session]
        if world is not None and world != s.world:
            raise InputError(f"row world {world!r} does not match session {session!r} ({s.world})")
        index = int(turn)
        if not 0 <= index < len(s.turns):
            raise InputError(f"session {session!r} has {len(s.turns)} turns; turn {turn!r} is out of range")
        env = self._envs.get(protocol)
        if env is None:
            env = self._envs[protocol] = CypherTurnEnv(config=replace(self._config, protocol=protocol),
                                                       sessions=self._sessions)
        self._env = env
        observation, info = env.reset(options={"session_id": session, "start_turn": index})
        self._turn_index = index
        return _merge_prompt(prompt, observation)

    def get_reward(self) -> float:
        """The EX (1.0 or 0.0) of the row's turn (called by the trainer, never a tool)."""
        return self._score()

    def _answer_text(self, text: str) -> None:
        """The rollout's final text (the completion's last assistant message, which has no tool call) is
        what the evaluator would send the environment next: when the turn is still open and the text
        parses as an action (e.g. the GRPO paper's ``<answer>`` format, a SUBMIT_ANSWER), it is played."""
        if self._env is None or self._turn_index is None or self._over or not text or not text.strip():
            return
        if isinstance(parse_action(text), ParseError):
            return
        observation, reward, _, _, info = self._env.step(text)
        if "record" in info:
            self._over = True
            self._ex = None if info["record"].get("ex") is None else float(reward)

    def _score(self) -> float:
        if self._env is None or self._turn_index is None:
            raise ResetNeeded("get_reward() before reset()")
        if not self._over:
            # The turn ended without SUBMIT_ANSWER: the environment's rule takes the last EXECUTE_CYPHER
            # query as the prediction (submitted here on the model's behalf), or there is none.
            last = self._env.last_execute
            if last is None:
                self._over, self._ex = True, 0.0
            else:
                self._step("submit_answer", {"query": last})
        if self._ex is None:
            raise InfrastructureError("the turn could not be scored: Neo4j was unavailable")
        return self._ex

    # -- tools (the five actions) ---------------------------------------------------------------------
    def execute_cypher(self, query: str) -> str:
        """Run a read-only Cypher query on the graph database and see the first 20 rows of its result.

        Args:
            query: The Cypher query to run, e.g. "MATCH (p:Person) RETURN p.name AS name".

        Returns:
            The result as a table (column header, then rows), or an error message.
        """
        return self._act("execute_cypher", {"query": _text(query)})

    def inspect_schema(self) -> str:
        """See the graph schema: every node label with its typed properties and every relationship type.

        Returns:
            The schema as text.
        """
        return self._act("inspect_schema", {})

    def search_values(self, query: str, label: str | None = None, property: str | None = None) -> str:
        """Find stored values that match a piece of text: in one node property when label and property are
        given (up to 10), else anywhere in the graph (the 5 closest, each with its label and property).

        Args:
            query: The text to look for (approximate spelling is fine).
            label: The node label, e.g. "Person" (optional, with property).
            property: The property of that label to search, e.g. "name" (optional, with label).

        Returns:
            The matching stored values, or a message saying there are none.
        """
        arguments = {"query": _text(query)}
        # only what was given: the environment names a missing half, where "null" would be searched as a name
        arguments |= {key: _text(value) for key, value in (("label", label), ("property", property))
                      if value is not None}
        return self._act("search_values", arguments)

    def ask_user(self, question: str) -> str:
        """Ask the user a clarifying question about their request.

        Args:
            question: The question for the user.

        Returns:
            The user's reply.
        """
        return self._act("ask_user", {"question": _text(question)})

    def submit_answer(self, query: str) -> str:
        """Give the final Cypher query that answers the current question; this ends the turn.

        Args:
            query: The Cypher query whose result answers the question.

        Returns:
            A confirmation that the answer was recorded.
        """
        return self._act("submit_answer", {"query": _text(query)})

    # -- plumbing ---------------------------------------------------------------------------------
    def _act(self, name: str, arguments: dict[str, Any]) -> str:
        self.tool_calls.append(name)
        if self._env is None or self._turn_index is None:
            return "[Error] the episode has not started"
        if self._over:
            return TURN_OVER
        return self._step(name, arguments)

    def _step(self, name: str, arguments: dict[str, Any]) -> str:
        env = self._env
        action = action_from_tool_call(name, arguments)
        # A call that parses is played as its Action; one that does not goes as the text the model's call
        # reads as, so the environment answers it (and records it) exactly as it would the evaluated model.
        observation, reward, _, _, info = env.step(action if isinstance(action, Action)
                                                   else tool_call_text(name, arguments))
        if "record" not in info:
            return observation
        # The turn is over. The environment's observation is then the *next* turn's prompt (or the end of
        # the session); the model gets this action's own result instead.
        record = info["record"]
        self._over = True
        self._ex = None if record.get("ex") is None else float(reward)
        own = info["action_observation"]
        if name == "submit_answer":
            return own
        return f"{own}\n{LAST_ACTION}"


def _merge_prompt(prompt: Any, observation: str) -> str | None:
    """What ``reset`` returns, given that TRL appends it to the row prompt's last message."""
    if isinstance(prompt, list) and prompt and isinstance(prompt[-1], dict):
        content = prompt[-1].get("content")
        if isinstance(content, str):
            if content == observation or content.endswith(observation):
                return None
            return observation if not content else "\n\n" + observation
    return observation


# -- factories, rows, reward ------------------------------------------------------------------------
def env_tools(env: CypherTurnToolEnv) -> list:
    """The environment's tools exactly as ``GRPOTrainer`` collects them (public bound methods other than
    ``reset`` and ``get_reward``)."""
    return [m for name, m in inspect.getmembers(env, predicate=inspect.ismethod)
            if name not in ("reset", "get_reward") and not name.startswith("_")]


def tool_schemas(env: CypherTurnToolEnv | None = None) -> list[dict]:
    """The JSON schemas of the five tools as the chat template declares them (``get_json_schema``, as
    TRL renders ``environment_factory`` tools); the evaluator's ``tools`` chat format uses the same."""
    from transformers.utils import get_json_schema

    return [get_json_schema(m) for m in env_tools(env or CypherTurnToolEnv(sessions=[]))]


def make_env_factory(dataset: str | Path | None = None, *, sessions: list[Session] | None = None,
                     **kwargs: Any) -> Callable[[], CypherTurnToolEnv]:
    """A zero-argument factory for ``GRPOTrainer(environment_factory=…)``; the sessions are loaded
    once and shared by every instance."""
    if sessions is None:
        sessions = load_dataset(dataset)
    return functools.partial(CypherTurnToolEnv, sessions=sessions, **kwargs)


def system_message(protocol: str, variant: str | None = None) -> dict[str, str]:
    return {"role": "system", "content": prompts.system_prompt(protocol, variant)}


# the columns of a turn's row (``benchmark.session.Turn.to_row``) that the reward functions read
GOLD_COLUMNS = ("gold_cypher", "gold_columns", "gold_rows_json", "gold_key_values", "gold_triples")


def make_training_rows(sessions: Iterable[Session], protocol: str = "guided", *, variant: str | None = None,
                       turns: Iterable[int] | None = None, max_chain_depth: int | None = None,
                       with_gold: bool = False) -> list[dict[str, Any]]:
    """One row per turn (or per turn index in ``turns``, and of at most ``max_chain_depth`` steps on top of a
    fresh query, ``Session.chain_depth``) of every session: ``prompt`` (the system
    prompt and an empty user message that ``reset`` fills with the turn prompt), ``world``,
    ``session``, ``turn``, ``protocol``. ``with_gold`` adds the columns that the reward functions of
    ``rewards`` read (``GOLD_COLUMNS``, encoded as ``Turn.to_row`` encodes them: ``gold_rows_json``
    as JSON text, ``gold_key_values`` as ``{label, property, value_json}``); the trainer passes them to reward functions
    and to ``reset``, which ignores them; the model never sees them."""
    if protocol not in PROTOCOLS:
        raise InputError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    if max_chain_depth is not None and max_chain_depth < 0:
        raise InputError(f"max_chain_depth must be 0 or more, got {max_chain_depth}")
    wanted = None if turns is None else set(turns)
    rows = []
    for s in sessions:
        for t in s.turns:
            if wanted is not None and t.index not in wanted:
                continue
            if max_chain_depth is not None and s.chain_depth(t.index) > max_chain_depth:
                continue
            row: dict[str, Any] = {"prompt": [system_message(protocol, variant), {"role": "user", "content": ""}],
                                   "world": s.world, "session": s.id, "turn": t.index, "protocol": protocol}
            if with_gold:
                turn_row = t.to_row(where=f"session {s.id} turn {t.index}")  # the one session codec
                row.update({name: turn_row[name] for name in GOLD_COLUMNS})
            rows.append(row)
    return rows


def training_dataset(sessions: Iterable[Session], protocol: str = "guided", **kwargs: Any):
    """``make_training_rows`` as a ``datasets.Dataset`` (the ``train_dataset`` of ``GRPOTrainer``)."""
    from datasets import Dataset

    return Dataset.from_list(make_training_rows(sessions, protocol, **kwargs))


def env_reward(prompts=None, completions=None, environments=None, **kwargs) -> list[float]:
    """TRL reward function: the EX of each rollout's turn, read from its environment (TRL 1.13 passes
    the rollouts' environment instances as ``environments=``). A completion whose final message answers
    in text (``<answer>…</answer>``, ``SUBMIT_ANSWER …``) instead of calling ``submit_answer`` is played
    as that action first, as the evaluator would. Use it in ``reward_funcs`` with
    ``CypherTurnToolEnv(expose_reward=False)``; with the default ``expose_reward=True`` the trainer
    already adds ``get_reward`` as a reward of weight 1, and this function would count it twice."""
    if environments is None:
        raise InputError("env_reward needs GRPOTrainer(environment_factory=...): no environments were passed")
    if completions is not None:
        for env, completion in zip(environments, completions):
            env._answer_text(completion_text(completion))
    return [e._score() for e in environments]
