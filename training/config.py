"""The CypherTurn part of a training recipe, parsed with TRL's ``TrlParser`` next to TRL's own configs.

``training/sft.py`` parses ``(CypherTurnSFTArguments, SFTConfig, ModelConfig)`` and ``training/grpo.py``
``(CypherTurnGRPOArguments, GRPOConfig, ModelConfig)`` from ``--config recipe.yaml``; every field of the
three can be overridden on the command line (``--learning_rate 1e-4``, ``--max_steps 3``).
``ModelConfig.model_name_or_path`` takes a local directory, a cached hub id, an alias of
``envs.models`` (``smollm2-135m``, ``tiny-llama``, ``tiny-qwen2``) or a checkpoint written by these
scripts (a LoRA adapter continues training, e.g. GRPO from the SFT checkpoint).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cypherturn.errors import InputError

# no weights stated: each weighs 1 unless the recipe's reward_weights say otherwise
SINGLE_TURN_REWARDS = ["format", "answer", "key_value", "triple", "execution"]


class RecipeError(InputError):
    """A setting of a training recipe out of range, or settings that contradict each other; the message
    names them."""


@dataclass
class CypherTurnDataArguments:
    """Where the training sessions come from and how turns become examples."""

    dataset: str | None = field(default=None, metadata={
        "help": "A training build directory (python -m benchmark build --split train --out DIR). Without it a "
                "training split of --build_sessions sessions is built on demand (cached under $CYPHERTURN_HOME)."})
    build_sessions: int = field(default=200, metadata={"help": "sessions of the on-demand training build"})
    build_seed: int = field(default=0, metadata={"help": "seed of the on-demand training build"})
    holdout_fraction: float = field(default=0.1, metadata={
        "help": "the last share of each world's sessions held out from training (the paper trains on 90%%)"})
    max_examples: int | None = field(default=None, metadata={
        "help": "use at most this many examples (after shuffling with the training seed): smoke runs"})
    turns: list[int] | None = field(default=None, metadata={"help": "only these turn indexes (0-based)"})
    max_chain_depth: int | None = field(default=None, metadata={
        "help": "only turns whose gold takes at most this many steps on top of a fresh query (benchmark.session "
                "Session.chain_depth): 0, the openings and topic shifts; 1, also each first follow-up of one "
                "(\"how many of those?\", \"keep the critical ones\"); default: every turn"})
    env_timeout: float = field(default=10.0, metadata={"help": "per-query time limit of the environment, seconds"})
    budget_multiplier: int = field(default=3, metadata={"help": "agentic budget m (B = T x m)"})
    lora_layers: int | None = field(default=None, metadata={
        "help": "with use_peft on a base model: LoRA on the top N decoder layers only (the backward pass stops "
                "below them, so an example costs less and the adapter is smaller); default: every layer"})


@dataclass
class CypherTurnSFTArguments(CypherTurnDataArguments):
    formats: list[str] = field(default_factory=lambda: ["guided_tools"], metadata={
        "help": "SFT data formats: guided_tools, agentic_tools (oracle tool-call conversations), paper (the GRPO "
                "paper's single-turn <reasoning>...<answer> response to the guided turn prompt), guided_action (the "
                "guided turn prompt answered with the action alone: SUBMIT_ANSWER <query>; short, for CPU recipes)"})
    chat_format: str = field(default="auto", metadata={
        "help": "tools: the five tool schemas are declared through the chat template, as in multi-turn GRPO and "
                "the evaluator's tools chat format; text: no declarations (the papers' protocol); auto: tools "
                "when a *_tools format is used"})
    verify: bool = field(default=True, metadata={
        "help": "guided tool conversations run EXECUTE_CYPHER on the gold before SUBMIT_ANSWER"})
    rename_schema: float = field(default=0.0, metadata={
        "help": "share of the guided_action examples shown with their world's labels and relationship types "
                "renamed (schema, users' nouns and answer alike; training/renaming.py), so that names must be "
                "read from the schema given: a small model otherwise learns the training worlds' names by heart"})
    lookups: str = field(default="typed", metadata={
        "help": "guided_action: which names an example looks up with SEARCH_VALUES before its SUBMIT_ANSWER. typed: "
                "those the user typed as the graph does not store them; new_names: also every name the question "
                "says word for word for the first time in the session (a misspelt invented name reads like a "
                "right one, so the model gets a rule it can follow: look each new name up); unseen: also each name "
                "the answer needs whose stored spelling the prompt does not show, as an earlier question typed it "
                "(the guided history holds questions and results, not the lookups)"})
    search_scope: str = field(default="property", metadata={
        "help": "guided_action: how a lookup searches. property: SEARCH_VALUES {label, property, query}, the label and "
                "property that store the name; graph: SEARCH_VALUES <the text as typed>, searched in every label "
                "and property, whose observation shows each close value as (:Label {property: 'value'}), so the "
                "answer copies its label, property and spelling from there"})
    inline_filters: bool = field(default=False, metadata={
        "help": "guided_action: write the answer's tests of a string property in the node pattern, "
                "MATCH (n1:Ward {ward_type: 'general'}), where the gold has MATCH (n1:Ward) WHERE n1.ward_type = "
                "'general' (the same query): the form a graph-wide lookup shows, so the answer copies it"})
    answer_first: bool = field(default=False, metadata={
        "help": "guided_action: write each path from a named anchor to the answer node the other way round, "
                "MATCH (n1:Studio)<-[:PRODUCED_BY]-(m_n1:Film)-[:IN_GENRE]->(a_n1:Genre {name: 'Noir'}) (the same "
                "pattern): the answer starts with the label the question asks about, as a property-filter "
                "answer does, and the looked-up node comes last"})
    path_probes: bool = field(default=False, metadata={
        "help": "guided_action: before an answer that walks from a named node (and with an action left for it), "
                "EXECUTE_CYPHER a path probe that lists the relationship types of each path of at most 2 hops "
                "from the answer's label to that node, answered by its real result; the answer then copies a row, "
                "MATCH (n1:Cluster)-[:DEPLOYED_ON]-(m_n1)-[:OWNS]-(a_n1:Squad {name: '...'}) (training/data.py "
                "path_probe): a small model copies a relationship far better than it reads one off the schema"})
    set_recall: bool = field(default=False, metadata={
        "help": "guided_action: a turn that builds on an earlier set (a follow-up; Session.set_turn) first runs "
                "again, EXECUTE_CYPHER, the answer that built that set, answered by its real result, then answers "
                "by taking that query one step further (training/data.py recall_query). Left out where the "
                "turn's lookups take the actions it needs"})
    share_prefixes: bool = field(default=False, metadata={
        "help": "train each session's turns as one prefix-tree row (training/packing.py): the prompt they share "
                "(system, schema, conversation so far) is computed once, about 4x fewer tokens on guided_action. "
                "max_examples then takes whole sessions (the last one cut to fit), and rename_schema renames "
                "whole sessions"})
    pack_by: str = field(default="session", metadata={
        "help": "share_prefixes: session, one tree per session; world, one tree per world (rows of at most "
                "max_length tokens), so the sessions of a world also share the system prompt and the schema: "
                "for short examples (turns: [0], the openings) a row holds about twenty, their 1,000-token "
                "prompt computed once"})
    all_openings: bool = field(default=False, metadata={
        "help": "share_prefixes: besides the sessions max_examples takes, the opening turn of every other training "
                "session, packed by world (a few hundred tokens each) and shuffled in with the session rows: the "
                "opening is where a path is read from the question and the schema alone, and a recipe of whole "
                "sessions sees one per eight examples"})


@dataclass
class CypherTurnGRPOArguments(CypherTurnDataArguments):
    mode: str = field(default="multi_turn", metadata={
        "help": "multi_turn: rollouts act in the environment through its tools (environment_factory), reward = "
                "the turn's EX plus any other rewards; single_turn: the GRPO paper's format on the guided turn "
                "prompt, scored by the rewards listed"})
    protocol: str = field(default="guided", metadata={
        "help": "multi_turn: guided or agentic. max_tool_calling_iterations defaults to the actions the protocol "
                "allows a rollout: 3 (guided), the budget share (T - k) x m of its turn (agentic)"})
    lookups: str | None = field(default=None, metadata={
        "help": "single_turn: the prompt goes on with the value lookups an SFT guided_action example makes before "
                "its answer (typed, new_names or unseen, as SFT's lookups; training/data.py action_conversations), "
                "each followed by its real observation, so that a completion is the turn's answer, as a model "
                "trained with those lookups answers after them. Unset: the turn prompt alone"})
    search_scope: str = field(default="property", metadata={
        "help": "with lookups: how a name is looked up (SFT's search_scope: property or graph)"})
    path_probes: bool = field(default=False, metadata={
        "help": "with lookups: the prompt goes on with the path probe an SFT example with path_probes makes (its "
                "EXECUTE_CYPHER and real result) where it makes one"})
    rewards: list[str] | None = field(default=None, metadata={
        "aliases": ["--reward"],
        "help": "reward specs NAME[:WEIGHT] (a built-in, pkg.module:function, or an entry point of "
                "cypherturn.rewards; `env` is the environment's turn EX). Default: env (multi_turn); format, "
                "answer, key_value, triple, execution (single_turn). A weight stated here and GRPOConfig's "
                "reward_weights must agree; a reward without either weighs 1"})

    def reward_specs(self) -> list:
        if self.rewards:
            return list(self.rewards)
        return ["env"] if self.mode == "multi_turn" else list(SINGLE_TURN_REWARDS)
