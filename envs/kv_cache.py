"""A KV cache that grows in place, for the hf backend's CPU decoding.

transformers' ``DynamicLayer`` appends each decoded token's keys and values with ``torch.cat``, which
copies the whole cache of every layer at every step: at a guided prompt's 1,300 tokens that was about a
quarter of a SmolLM2-135M decoding step on 2 cores (20 of 80 ms, profiled). ``GrowingLayer`` writes into a
buffer with room for ``CHUNK`` more tokens and hands attention a view of the filled part, so a step copies
only the new token; the buffer is reallocated once every ``CHUNK`` tokens. The attention sees the same
numbers in the same order, so greedy text is unchanged (tests/test_smollm2.py compares it with and without).

``growing_cache(kv)`` is a ``DynamicCache`` whose layers are ``GrowingLayer``s, optionally filled with
``[(keys, values), ...]`` per layer; ``crop`` and ``copy.deepcopy`` (what ``PrefixCache`` uses) work as
on a ``DynamicCache``.
"""

from __future__ import annotations

from transformers.cache_utils import DynamicCache, DynamicLayer

__all__ = ["CACHE_KWARG", "GrowingLayer", "growing_cache"]


class GrowingLayer(DynamicLayer):
    CHUNK = 256  # spare tokens per reallocation: small, since PrefixCache keeps up to 16 caches

    def lazy_initialization(self, key_states, value_states) -> None:
        super().lazy_initialization(key_states, value_states)
        self._kbuf = self._vbuf = None  # the filled length is the views': get_seq_length()

    def _view(self, length: int) -> None:
        self.keys = self._kbuf[..., :length, :]
        self.values = self._vbuf[..., :length, :]

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n, add = self.get_seq_length(), key_states.shape[-2]
        if self._kbuf is None or n + add > self._kbuf.shape[-2] or self._kbuf.shape[:2] != key_states.shape[:2]:
            room = (n + add + self.CHUNK) // self.CHUNK * self.CHUNK
            kbuf = key_states.new_empty((*key_states.shape[:2], room, key_states.shape[-1]))
            vbuf = value_states.new_empty((*value_states.shape[:2], room, value_states.shape[-1]))
            if n:
                kbuf[..., :n, :] = self.keys
                vbuf[..., :n, :] = self.values
            self._kbuf, self._vbuf = kbuf, vbuf
        self._kbuf[..., n:n + add, :] = key_states
        self._vbuf[..., n:n + add, :] = value_states
        self._view(n + add)
        return self.keys, self.values

    # crop: DynamicLayer's narrows the views; the buffer keeps its room

    def batch_repeat_interleave(self, repeats: int) -> None:
        super().batch_repeat_interleave(repeats)
        self._rebuffer()

    def batch_select_indices(self, indices) -> None:
        super().batch_select_indices(indices)
        self._rebuffer()

    def _rebuffer(self) -> None:  # after an op that replaced the views with new tensors
        if self.is_initialized and self._kbuf is not None:
            self._kbuf, self._vbuf = self.keys, self.values

    def __deepcopy__(self, memo):
        new = self.__class__.__new__(self.__class__)
        new.__dict__.update(self.__dict__)
        if self.is_initialized and self._kbuf is not None:
            new._kbuf, new._vbuf = self._kbuf.clone(), self._vbuf.clone()
            new._view(self.get_seq_length())
        return new


def growing_cache(kv=None, *, filled: int | None = None) -> DynamicCache:
    """An empty cache of ``GrowingLayer``s (layers are added as the model first writes them), or one
    holding ``kv``: one (keys, values) pair per layer, each (batch, kv heads, tokens, head dim), copied in.
    With ``filled``, the pairs are buffers taken as they are (no copy): their first ``filled`` positions
    hold the cache and the rest is room to grow into."""
    cache = DynamicCache()
    cache.layer_class_to_replicate = GrowingLayer
    for i, (keys, values) in enumerate(kv or ()):
        if filled is None:
            cache.update(keys, values, i)
            continue
        layer = GrowingLayer()
        layer.lazy_initialization(keys, values)
        layer._kbuf, layer._vbuf = keys, values
        layer._view(filled)
        cache.layers.append(layer)
    return cache


def _cache_kwarg() -> str:
    """transformers renamed ``past_key_values`` to ``cache`` (5.2x), in generate and the models' forward alike; use
    whichever this one has."""
    try:
        from transformers.generation.utils import GenerateDecoderOnlyOutput
    except ImportError:
        return "past_key_values"
    return "cache" if "cache" in GenerateDecoderOnlyOutput.__dataclass_fields__ else "past_key_values"


CACHE_KWARG = _cache_kwarg()
