"""envs.kv_cache: the growing cache holds exactly what transformers' DynamicCache holds, through
prefill, decoding past a reallocation, crop and deepcopy (PrefixCache's operations); the greedy text
it gives a real model is compared in tests/test_smollm2.py."""

import copy

import pytest
import torch
from transformers import DynamicCache

from envs.kv_cache import GrowingLayer, growing_cache

LAYERS, SHAPE = 3, (2, 3, 0, 8)  # batch, kv heads, tokens, head dim


def _kv(tokens, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*SHAPE[:2], tokens, SHAPE[3], generator=g), torch.randn(*SHAPE[:2], tokens, SHAPE[3], generator=g))


def _same(a, b):
    assert a.get_seq_length() == b.get_seq_length()
    for la, lb in zip(a.layers, b.layers, strict=True):
        assert torch.equal(la.keys, lb.keys) and torch.equal(la.values, lb.values)


def _feed(cache, tokens, seed):
    for i in range(LAYERS):
        k, v = _kv(tokens, seed * 100 + i)
        got_k, got_v = cache.update(k, v, i)
        assert got_k.shape[-2] == cache.layers[i].get_seq_length()


def test_growing_cache_matches_dynamic_cache_through_decoding_crop_and_copy():
    grow, plain = growing_cache(), DynamicCache()
    _feed(grow, 300, 1), _feed(plain, 300, 1)  # a prefill
    assert all(isinstance(layer, GrowingLayer) for layer in grow.layers)
    room = grow.layers[0]._kbuf.shape[-2]
    assert room == 512  # 300 tokens + one CHUNK of room, rounded to CHUNK
    for step in range(250):  # decoding, one token a step, across the reallocation at 512
        _feed(grow, 1, 10 + step), _feed(plain, 1, 10 + step)
        if step == 100:
            assert grow.layers[0]._kbuf.shape[-2] == room  # written in place: no copy of the cache
    _same(grow, plain)
    assert grow.layers[0]._kbuf.shape[-2] > room

    copied = copy.deepcopy(grow)  # PrefixCache.lookup: a private copy, cut to the shared prefix
    copied.crop(400 - copied.get_seq_length())
    _feed(copied, 5, 999)  # extending the copy must not touch the original
    _same(grow, plain)
    plain_copy = copy.deepcopy(plain)
    plain_copy.crop(400 - plain_copy.get_seq_length())
    _feed(plain_copy, 5, 999)
    _same(copied, plain_copy)
    assert copied.get_seq_length() == 405


def test_growing_cache_can_start_filled():
    kv = [_kv(7, i) for i in range(LAYERS)]
    grow = growing_cache(kv)
    plain = DynamicCache(ddp_cache_data=kv)
    _same(grow, plain)
    _feed(grow, 1, 5), _feed(plain, 1, 5)
    _same(grow, plain)


@pytest.mark.parametrize("op", ["select", "repeat"])
def test_batch_operations_keep_the_cache_usable(op):
    grow, plain = growing_cache(), DynamicCache()
    _feed(grow, 10, 2), _feed(plain, 10, 2)
    for c in (grow, plain):
        for layer in c.layers:
            layer.batch_select_indices(torch.tensor([1])) if op == "select" else layer.batch_repeat_interleave(2)
    _same(grow, plain)
    k, v = grow.layers[0].keys, grow.layers[0].values
    for c in (grow, plain):
        for i in range(LAYERS):
            c.update(torch.ones(k.shape[0], k.shape[1], 1, k.shape[3]), torch.ones(v.shape[0], v.shape[1], 1, v.shape[3]), i)
    _same(grow, plain)
