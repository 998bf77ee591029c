"""envs.decoding: sequences that join a decoding batch mid-way and leave it when they end get the tokens
transformers' generate gives each alone (greedy), and leave with the cache of their own sequence. A real
model: the tiny Llama built offline from a config (random weights, the SmolLM2 tokenizer); SmolLM2 itself
through the backend in tests/test_smollm2.py."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from envs.decoding import DecodingBatch, Sequence
from envs.kv_cache import CACHE_KWARG, growing_cache
from envs.models import tiny_model_dir


@pytest.fixture(scope="module")
def model():
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir("tiny-llama"), dtype=torch.float32).eval()


def _eos(model) -> set[int]:
    eos = model.generation_config.eos_token_id
    return set(eos if isinstance(eos, list) else [eos])


def _prompt(seed: int, n: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(10, 40000, (n,), generator=g).tolist()


def _alone(model, prompt, limit, end=()):
    """generate's greedy tokens for one prompt (no padding, no batch), cut after the first end token."""
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                             max_new_tokens=limit, do_sample=False, pad_token_id=0)
    new = out[0, len(prompt):].tolist()
    return next((new[:i + 1] for i, t in enumerate(new) if t in end), new)


def _prefilled(model, prompt):
    cache = growing_cache()
    with torch.no_grad():
        model(input_ids=torch.tensor([prompt[:-1]]), use_cache=True, **{CACHE_KWARG: cache})
    return cache


def test_sequences_joining_and_leaving_mid_batch_get_the_tokens_they_get_alone(model):
    prompts = [_prompt(1, 40), _prompt(2, 75), _prompt(3, 12), _prompt(4, 150)]
    limits = [30, 6, 18, 9]
    want = [_alone(model, p, n, end=_eos(model)) for p, n in zip(prompts, limits)]
    assert [len(w) for w in want] == limits  # no end token in these (random weights): each runs to its limit
    batch = DecodingBatch(model, end_tokens=_eos(model))
    seqs = [Sequence(p, _prefilled(model, p), n, owner=i) for i, (p, n) in enumerate(zip(prompts, limits))]
    batch.add(seqs[:2])
    finished, widths, rows = [], [], []
    for step in range(40):
        if step == 3:  # joins two sequences 3 tokens into their decoding (one longer than both)
            batch.add(seqs[2:])
        if step == 10:
            assert len(batch) == 3  # the 6-token one has left; the others go on
        finished += batch.step()
        if batch.mask is not None:
            widths.append(batch.mask.shape[1])
            rows.append(batch.mask.shape[0])
        if not len(batch):
            break
    # The 6-token sequence left at step 5: its row stayed, decoded and ignored, for `grace` steps (4), then
    # the cache was rebuilt without it.
    assert rows[5:11] == [4, 4, 4, 4, 4, 3]
    assert [s.owner for s in finished] == [1, 3, 2, 0]  # in the order they ended
    assert [s.new for s in sorted(finished, key=lambda s: s.owner)] == want
    assert batch.steps == 30 and batch.tokens == sum(limits)  # one token a sequence a step
    # Each leaves with its own cache: prompt + all its new tokens but the last, no padding.
    for seq in finished:
        assert seq.cache.get_seq_length() == len(seq.prompt) + len(seq.new) - 1
    # After the 150-token prompt left, no column is padding for every row: the cache narrowed.
    assert min(widths[-5:]) < len(prompts[3])


def test_an_end_token_ends_a_sequence_and_is_kept(model):
    prompt = _prompt(5, 30)
    free = _alone(model, prompt, 12)
    end = {free[4]} | _eos(model)  # the fifth token generated becomes an end token
    want = _alone(model, prompt, 12, end=end)
    batch = DecodingBatch(model, end_tokens=end)
    batch.add([Sequence(prompt, _prefilled(model, prompt), 12), Sequence(_prompt(6, 20), _prefilled(model, _prompt(6, 20)), 12)])
    done = []
    while len(batch):
        done += batch.step()
    assert done[0].prompt == prompt and done[0].new == want and done[0].new[-1] in end and len(want) <= 5


def test_sampling_draws_from_each_sequences_own_generator(model):
    """The same seed gives the same sampled tokens whatever else is decoded beside it."""
    prompt = _prompt(7, 25)

    def sample(company: int) -> list[int]:
        batch = DecodingBatch(model, end_tokens=set())
        seq = Sequence(prompt, _prefilled(model, prompt), 10, temperature=1.0, top_p=0.9, seed=3)
        others = [Sequence(_prompt(8 + i, 30), _prefilled(model, _prompt(8 + i, 30)), 10, temperature=1.0, seed=i)
                  for i in range(company)]
        batch.add([seq] + others)
        while len(batch):
            batch.step()
        return seq.new

    alone = sample(0)
    assert sample(2) == alone and len(alone) == 10


def test_a_sequence_needs_a_prompt_and_room(model):
    with pytest.raises(ValueError, match="room"):
        Sequence([1, 2, 3], None, 0)
    batch = DecodingBatch(model, end_tokens=set())
    with pytest.raises(ValueError, match="two tokens"):
        batch.add([Sequence([5], growing_cache(), 4)])
    assert batch.step() == []  # an empty batch decodes nothing
