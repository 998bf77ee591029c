"""Continuous batching for the hf backend: sequences join and leave a decoding batch at any step.

A static batch decodes until its longest answer ends. In a guided evaluation the actions of one batch are
8-token lookups next to 36-token answers next to runaway answers that run to the token limit, so most of a
static batch's slots sat idle (on 2 cores the static batch gained only on short single turns:
reports/learning-demo). Here a finished sequence leaves at once and a waiting one joins at the next step
(95 held-out turns at 4 sessions: 939 s of play one sequence at a time, 628 s, the same text).

Each sequence arrives with the KV cache of its prompt but its last token (prefilled alone, from the prefix
cache); the batch holds those caches left-padded to one width, the padding masked, each sequence's positions
its own, so each sees what it would see decoded alone. A finished sequence leaves with its own cache (padding
cut off), which the backend stores in its prefix cache for the session's next call.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from cypherturn.errors import InputError
from envs.kv_cache import CACHE_KWARG, GrowingLayer, growing_cache

__all__ = ["DecodingBatch", "Sequence"]


@dataclass(eq=False)
class Sequence:
    """One request being decoded. ``cache``: the KV cache of ``prompt[:-1]`` when it joins, of ``prompt +
    new[:-1]`` when it leaves (the last token's keys are never computed, as in ``generate``). ``limit``: most
    new tokens. ``temperature``/``top_p``/``seed``: sampling (greedy at temperature 0); each sampled sequence
    draws from its own generator, so its text does not depend on what else is in the batch. ``owner``: whatever
    the caller needs to hand the result back (the backend's future)."""

    prompt: list[int]
    cache: object
    limit: int
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    owner: object = None
    new: list[int] = field(default_factory=list)

    def __post_init__(self):
        if len(self.prompt) < 1 or self.limit < 1:
            raise InputError("a sequence needs a prompt and room for at least one new token")
        self.generator = torch.Generator().manual_seed(self.seed) if self.temperature > 0 else None


class DecodingBatch:
    """The sequences being decoded together. ``add`` admits prefilled sequences; ``step`` decodes one token
    for each and returns those that finished (an end token, kept in ``new``, or ``limit`` tokens), which
    leave with their own caches. ``steps`` and ``tokens`` count decoding steps and tokens decoded (their
    ratio: the mean batch size).

    Rebuilding the batch's cache copies every sequence's keys and values (69 ms for a fourth guided prompt
    joining three on 2 cores; a step of 4 takes 139 ms): a finished sequence's row is left in the cache,
    decoded and ignored, until a sequence joins (one rebuild for both) or for ``grace`` steps (a dead row
    adds about a fifth to a step of 4)."""

    grace = 4

    def __init__(self, model, end_tokens: set[int]):
        self.model = model
        self.end_tokens = set(end_tokens)
        # What generate would take from the model's generation config (unset: generate's defaults). Other
        # processors a checkpoint may set (n-gram bans, length penalties) are not applied.
        config = model.generation_config
        self.top_k = config.top_k if config.top_k is not None else 50  # when sampling
        self.repetition_penalty = config.repetition_penalty or 1.0  # greedy too
        self.sequences: list[Sequence] = []
        self.rows: list[int] = []  # each sequence's row in the cache; the other rows are dead
        self.cache = None
        self.mask = None  # (rows, width): 1 for a real position, 0 for left padding
        self.dead_steps = 0  # steps decoded with dead rows
        self.steps = self.tokens = 0

    def __len__(self) -> int:
        return len(self.sequences)

    def add(self, sequences: list[Sequence]) -> None:
        if not sequences:
            return
        if any(not s.cache.layers for s in sequences):
            raise InputError("a joining sequence has an empty cache: its prompt needs at least two tokens")
        joining = [[(layer.keys, layer.values) for layer in s.cache.layers] for s in sequences]
        for s in sequences:
            s.cache = None  # the batch holds it now
        self.sequences += sequences
        self._rebuild(joining)

    def step(self) -> list[Sequence]:
        if not self.sequences:
            self.cache = self.mask = None
            self.rows = []
            return []
        if len(self.rows) < self.mask.shape[0] and self.dead_steps >= self.grace:
            self._rebuild([])
        device = self.mask.device
        last = [0] * self.mask.shape[0]  # a dead row's token is decoded and ignored (rows never attend to each other)
        for row, seq in zip(self.rows, self.sequences):
            last[row] = seq.new[-1] if seq.new else seq.prompt[-1]
        self.mask = torch.cat([self.mask, self.mask.new_ones((len(last), 1))], dim=1)
        positions = self.mask.sum(dim=1, keepdim=True) - 1  # each sequence's own, padding not counted
        with torch.no_grad():
            out = self.model(input_ids=torch.tensor([[t] for t in last], device=device), attention_mask=self.mask,
                             position_ids=positions, use_cache=True, **{CACHE_KWARG: self.cache})
        logits = out.logits[:, -1, :].float()
        self.steps += 1
        self.tokens += len(self.sequences)
        self.dead_steps += len(self.rows) < len(last)
        done, kept = [], []
        for row, seq in zip(self.rows, self.sequences):
            seq.new.append(self._choose(seq, logits[row]))
            if seq.new[-1] in self.end_tokens or len(seq.new) >= seq.limit:
                seq.cache = growing_cache(self._own_kv(row))  # copied into a cache of its own
                done.append(seq)
            else:
                kept.append((row, seq))
        if done:
            self.rows = [row for row, _ in kept]
            self.sequences = [seq for _, seq in kept]
        return done

    def _own_kv(self, row: int) -> list[tuple]:
        """Cache row ``row``'s keys and values per layer, its padding cut off (views into the batch's cache)."""
        pad = int(self.mask.shape[1] - self.mask[row].sum())
        return [(layer.keys[row:row + 1, :, pad:], layer.values[row:row + 1, :, pad:]) for layer in self.cache.layers]

    def _rebuild(self, joining: list[list[tuple]]) -> None:
        """One cache for the live sequences and the joining ones, left-padded to the longest (no column is
        padding in every row; no dead row), with room to grow: each sequence's keys and values copied once."""
        kv = [self._own_kv(row) for row in self.rows] + joining
        lengths = [layers[0][0].shape[2] for layers in kv]
        width = max(lengths)
        room = (width + GrowingLayer.CHUNK) // GrowingLayer.CHUNK * GrowingLayer.CHUNK
        merged = []
        for i in range(len(kv[0])):
            buffers = []
            for part in (0, 1):  # keys, values
                first = kv[0][i][part]
                buf = first.new_empty((len(kv), first.shape[1], room, first.shape[3]))
                for row, (layers, n) in enumerate(zip(kv, lengths)):
                    buf[row, :, :width - n] = 0  # padding: masked, but never garbage (0 * nan is nan)
                    buf[row, :, width - n:width] = layers[i][part][0]
                buffers.append(buf)
            merged.append(tuple(buffers))
        self.cache = growing_cache(merged, filled=width)
        self.mask = torch.tensor([[0] * (width - n) + [1] * n for n in lengths], device=merged[0][0].device)
        self.rows = list(range(len(kv)))
        self.dead_steps = 0

    def _choose(self, seq: Sequence, logits) -> int:
        if self.repetition_penalty != 1.0:  # as transformers' RepetitionPenaltyLogitsProcessor
            seen = torch.tensor(sorted(set(seq.prompt + seq.new)), device=logits.device)
            picked = logits[seen]
            logits = logits.clone()
            logits[seen] = torch.where(picked < 0, picked * self.repetition_penalty, picked / self.repetition_penalty)
        if seq.temperature <= 0:
            return int(logits.argmax())
        scores = logits / seq.temperature
        if self.top_k:
            cut = torch.topk(scores, min(self.top_k, scores.numel())).values[-1]
            scores = scores.masked_fill(scores < cut, float("-inf"))
        if seq.top_p < 1.0:
            ordered, order = torch.sort(scores, descending=True)
            cumulative = ordered.softmax(-1).cumsum(-1)
            drop = cumulative - ordered.softmax(-1) > seq.top_p  # keeps the token that crosses top_p
            scores = scores.clone()
            scores[order[drop]] = float("-inf")
        probs = scores.softmax(-1).cpu()
        return int(torch.multinomial(probs, 1, generator=seq.generator))
