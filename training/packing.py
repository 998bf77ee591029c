"""Prefix-tree packing of SFT examples: the turns of one session trained in one row, their shared prompt computed once.

Every guided turn prompt of a session repeats the system prompt, the schema and the conversation so far, so
turn k's prompt starts with most of turn k-1's. Tokenized, the examples of a session form a prefix tree. One
row holds the tree's nodes in depth-first order; each token attends only to its ancestors (a 4-D attention
mask built from ``tree_end``: token i sees token j iff j <= i < tree_end[j]) and keeps the position it has in
its own example (``position_ids``). The model therefore computes for every example what it computes for that
example alone (up to float rounding), while a token shared by several examples is computed once: on the CPU
recipe's guided_action examples a session's row has about 4.3 times fewer tokens than its examples.

Targets are pre-shifted (``shift_labels``, which transformers' causal-LM loss and TRL's SFTTrainer accept): in
a tree the token after position i in the row is not the next token of i's example, so ``shift_labels[i]`` is
the answer token that follows node i in its example, or -100. Only answer tokens are targets (the
``assistant_only_loss`` of the flat path); no answer token is shared, nor the last prompt token, whose target
is its example's first answer token.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from cypherturn.errors import InputError

IGNORE = -100


@dataclass
class _Node:
    token: int
    position: int
    target: int = IGNORE  # the answer token that follows this node in its example
    children: dict[int, int] = field(default_factory=dict)  # token -> node index, shared prompt tokens only
    order: list[int] = field(default_factory=list)  # every child, in insertion order


class PrefixTree:
    """The prefix tree of a group of tokenized examples (``add``), flattened into rows (``rows``)."""

    def __init__(self):
        self.nodes: list[_Node] = []
        self.roots: dict[int, int] = {}
        self.root_order: list[int] = []
        self.examples = 0
        self.example_tokens = 0  # tokens of the examples one by one, to report the saving

    def shared(self, ids: list[int], prompt_length: int) -> int:
        """How many leading tokens of an example the tree already holds (the shareable ones: ``add``)."""
        siblings, n = self.roots, 0
        while n < prompt_length - 1 and ids[n] in siblings:
            siblings = self.nodes[siblings[ids[n]]].children
            n += 1
        return n

    def add(self, ids: list[int], prompt_length: int) -> None:
        """One example: ``ids`` (prompt then answer), whose first ``prompt_length`` tokens are the prompt."""
        if not 0 < prompt_length < len(ids):
            raise InputError(f"an example needs a prompt and an answer (prompt {prompt_length} of {len(ids)} tokens)")
        parent: int | None = None
        for position, token in enumerate(ids):
            siblings = self.roots if parent is None else self.nodes[parent].children
            # a prompt token another example has is shared, except the last: its target is this example's
            # first answer token, and a node has one target (two turns may have the same prompt)
            shareable = position < prompt_length - 1
            if shareable and token in siblings:
                parent = siblings[token]
                continue
            self.nodes.append(_Node(token, position))
            index = len(self.nodes) - 1
            if shareable:
                siblings[token] = index
            (self.root_order if parent is None else self.nodes[parent].order).append(index)
            if parent is not None and position >= prompt_length:
                self.nodes[parent].target = token
            parent = index
        self.examples += 1
        self.example_tokens += len(ids)

    def flatten(self) -> dict[str, list[int]]:
        """The tree as one row in depth-first order: input_ids, position_ids, tree_end, shift_labels."""
        out: dict[str, list[int]] = {"input_ids": [], "position_ids": [], "tree_end": [], "shift_labels": []}
        stack = [(i, False) for i in reversed(self.root_order)]
        starts: dict[int, int] = {}
        while stack:
            index, done = stack.pop()
            if done:  # every descendant is placed: the subtree ends here
                out["tree_end"][starts[index]] = len(out["input_ids"])
                continue
            node = self.nodes[index]
            starts[index] = len(out["input_ids"])
            out["input_ids"].append(node.token)
            out["position_ids"].append(node.position)
            out["tree_end"].append(-1)
            out["shift_labels"].append(node.target)
            stack.append((index, True))
            stack.extend((child, False) for child in reversed(node.order))
        return out


def pack_group(examples: Iterable[tuple[list[int], int]], max_length: int) -> list[dict[str, Any]]:
    """Rows for one group of examples that share prompts (one session's turns, in order): each example joins
    the current tree unless that makes the row longer than ``max_length`` tokens, else it starts a new one.
    Each row also says how many examples it holds and their tokens one by one. An example longer than
    ``max_length`` on its own raises (the flat path would truncate it and cut its answer)."""
    rows: list[dict[str, Any]] = []
    tree = PrefixTree()
    for ids, prompt_length in examples:
        if len(ids) > max_length:
            raise InputError(f"an example of {len(ids)} tokens is longer than max_length {max_length}")
        if tree.examples and len(tree.nodes) + len(ids) - tree.shared(ids, prompt_length) > max_length:
            rows.append(_row(tree))
            tree = PrefixTree()
        tree.add(ids, prompt_length)
    if tree.examples:
        rows.append(_row(tree))
    return rows


def _row(tree: PrefixTree) -> dict[str, Any]:
    return {**tree.flatten(), "examples": tree.examples, "example_tokens": tree.example_tokens}


# -- examples -> rows ---------------------------------------------------------------------------------------
def tokenized(messages: list[dict], tokenizer, tools: list | None = None) -> tuple[list[int], int]:
    """(token ids of the whole conversation, length of its prompt): the chat template applied to the
    conversation, and to all but its last (assistant) message with the generation prompt."""
    def ids(conversation: list[dict], **kwargs) -> list[int]:
        out = tokenizer.apply_chat_template(conversation, tools=tools, tokenize=True, **kwargs)
        return list(out["input_ids"] if hasattr(out, "keys") else out)

    if not messages or messages[-1].get("role") != "assistant":
        raise InputError("an SFT example must end with the assistant's answer")
    full = ids(messages)
    prompt = ids(messages[:-1], add_generation_prompt=True)
    if full[:len(prompt)] != prompt:  # the template renders the prompt differently once answered
        raise InputError("the chat template does not render the prompt as a prefix of the whole conversation; "
                         "prefix-tree packing needs it to")
    return full, len(prompt)


PACK_BY = ("session", "world")


def packed_rows(examples: list[dict[str, Any]], tokenizer, max_length: int, by: str = "session") -> list[dict[str, Any]]:
    """Prefix-tree rows of SFT ``examples`` (``training.data.sft_examples`` rows): one tree per session (``by``
    ``session``) or per world (``world``: the sessions of a world share the system prompt and the schema too) and
    format, the examples in session and turn order; a group longer than ``max_length`` takes several rows (a
    row is longer than ``max_length`` only if one example is). ``world`` pays on short examples, openings above
    all: a 1,000-token system prompt and schema then computed once for a row of twenty questions."""
    import json

    if by not in PACK_BY:
        raise InputError(f"pack_by must be one of {list(PACK_BY)}, got {by!r}")
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for e in examples:
        # a renamed example (training.trainers._renamed) shares its schema only with those of the same names
        groups.setdefault((e[by], e.get("renaming", ""), e["format"]), []).append(e)
    rows = []
    for group in groups.values():
        group.sort(key=lambda e: (e["session"], e["turn"]))  # stable: a turn's lookups before its answer
        tools = json.loads(group[0]["tools"]) if group[0].get("tools") else None
        rows += pack_group((tokenized(e["messages"], tokenizer, tools) for e in group), max_length)
    return rows


# -- rows -> model inputs -----------------------------------------------------------------------------------
def tree_attention_mask(tree_end):
    """(batch, 1, L, L) booleans from ``tree_end`` (batch, L): token i attends to token j iff j <= i < tree_end[j],
    that is iff j is i or one of its ancestors in the tree."""
    import torch

    index = torch.arange(tree_end.shape[-1], device=tree_end.device)
    return ((index[None, None, :] <= index[None, :, None]) & (index[None, :, None] < tree_end[:, None, :]))[:, None]


class PrefixTreeCollator:
    """Pads rows of ``packed_rows`` into a batch: ``input_ids``, ``position_ids``, ``tree_end``, ``shift_labels``
    and ``labels`` (the same targets; transformers computes the loss only when labels are given, and the trainer
    counts the targets from them). A padding token attends to itself only and is never a target."""

    def __init__(self, pad_token_id: int):
        self.pad_token_id = pad_token_id

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        width = max(len(r["input_ids"]) for r in rows)
        batch: dict[str, list[list[int]]] = {"input_ids": [], "position_ids": [], "tree_end": [], "shift_labels": []}
        for r in rows:
            pad = width - len(r["input_ids"])
            n = len(r["input_ids"])
            batch["input_ids"].append(list(r["input_ids"]) + [self.pad_token_id] * pad)
            batch["position_ids"].append(list(r["position_ids"]) + [0] * pad)
            batch["tree_end"].append(list(r["tree_end"]) + list(range(n + 1, width + 1)))
            batch["shift_labels"].append(list(r["shift_labels"]) + [IGNORE] * pad)
        out = {k: torch.tensor(v, dtype=torch.long) for k, v in batch.items()}
        out["labels"] = out["shift_labels"].clone()
        return out


def attach_tree_mask(model):
    """Make ``model`` read a batch's ``tree_end``: a forward pre-hook turns it into the 4-D attention mask
    (``tree_attention_mask``). The batch itself has no ``attention_mask``, so TRL's token count reads the row
    lengths from ``position_ids``. Needs the ``sdpa`` attention (a boolean 4-D mask means "may attend" there;
    the eager one would add it as numbers). Returns the hook's handle."""
    implementation = getattr(model.config, "_attn_implementation", None)
    if implementation != "sdpa":
        raise InputError(f"prefix-tree packing needs attn_implementation sdpa, the model uses {implementation!r}")

    def hook(module, args, kwargs):
        tree_end = kwargs.pop("tree_end", None)
        if tree_end is not None:
            kwargs["attention_mask"] = tree_attention_mask(tree_end)
        return args, kwargs

    return model.register_forward_pre_hook(hook, with_kwargs=True)
