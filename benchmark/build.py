"""Building a split: sessions on every world of the split, verified, written with their manifest,
stats and Hugging Face dataset (DESIGN §5)."""

from __future__ import annotations

import collections
import hashlib
import json
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from benchmark.hf import save_hf_dataset
from benchmark.session import Session, write_sessions
from benchmark.stats import render_stats, stats_dict
from benchmark.world_builder import BuildUnavailable, WorldBuilder, persona_plan, session_rng, turn_count
from cypherturn.errors import CypherTurnError
from graphs import connections
from graphs.executor import SafeExecutor
from graphs.generator import generate
from graphs.loader import read_summary
from graphs.server import cache_home
from graphs.spec import all_specs, get_spec

SPLITS = {"test": "benchmark", "train": "training"}
DEFAULT_SESSIONS = {"test": 721, "train": 2000}
DEFAULT_SEED = {"test": 20260, "train": 777}
FORMAT_VERSION = 1


class BuildError(CypherTurnError, RuntimeError):
    """The build cannot run: Neo4j unreachable, a world missing or not the generated one."""


@dataclass
class BuildResult:
    out: Path
    sessions: list[Session]
    manifest: dict
    db_seconds: float = 0.0  # summed time inside Neo4j queries (over all worker threads)


def _check_worlds(worlds: list[str]) -> dict[str, str]:
    """Each world's database checksum, which must equal the generated graph's."""
    checksums = {}
    for world in worlds:
        try:
            summary = read_summary(connections.resolve(world))
        except Exception as exc:  # noqa: BLE001 - any failure here is infrastructure
            raise BuildError(f"world {world}: Neo4j is unreachable ({type(exc).__name__}: {exc}); "
                             "start it with `python -m graphs serve`") from exc
        expected = generate(get_spec(world)).checksum()
        if summary.checksum != expected:
            raise BuildError(f"world {world}: the database does not hold the generated world "
                             f"({summary.nodes} nodes, checksum {summary.checksum[:12]} != {expected[:12]}); "
                             "run `python -m graphs load`")
        checksums[world] = summary.checksum
    return checksums


def _split_specs(split: str, worlds: list[str] | None):
    """The specs of ``split``'s worlds, or of the ``worlds`` named (each must belong to the split)."""
    specs = all_specs(SPLITS[split])
    if worlds:
        unknown = sorted(set(worlds) - {s.world for s in specs})
        if unknown:
            raise BuildError(f"worlds {unknown} are not {SPLITS[split]} worlds; choose from "
                             f"{[s.world for s in specs]}")
        specs = [s for s in specs if s.world in worlds]
    return specs


def _plan(specs: list, n_sessions: int, seed: int, split: str) -> tuple[dict[str, int], dict[str, list[str]]]:
    """(world -> sessions to build, world -> their personas): the sessions shared out over the worlds in
    turn, the personas near-uniform over the whole split."""
    quotas = {s.world: n_sessions // len(specs) + (i < n_sessions % len(specs)) for i, s in enumerate(specs)}
    plan = persona_plan(n_sessions, random.Random(f"{seed}:{split}:personas"))
    personas, start = {}, 0
    for s in specs:
        personas[s.world] = plan[start:start + quotas[s.world]]
        start += quotas[s.world]
    return quotas, personas


def _world_sessions(builder: WorldBuilder, seed: int, split: str, quota: int, personas: list[str],
                    kept_one: Callable[[], None]) -> list[Session]:
    """``quota`` sessions of one world, session number n from its own seeded rng (so a world's sessions
    do not depend on the others'); too many dropped sessions stop the build."""
    world = builder.spec.world
    kept, number = [], 0
    while len(kept) < quota:
        if number > 5 * quota + 20:
            raise BuildError(f"world {world}: too many dropped sessions ({builder.gate_failures})")
        rng = session_rng(seed, split, world, number)
        number += 1
        session = builder.build_session(f"{world}-{len(kept):04d}", personas[len(kept)], turn_count(rng), rng)
        if session is not None:
            kept.append(session)
            kept_one()
    return kept


def _gate_failures(builders) -> dict[str, int]:
    """Every builder's gate failures summed, by gate name."""
    gate_failures: dict[str, int] = {}
    for b in builders:
        for gate, n in b.gate_failures.items():
            gate_failures[gate] = gate_failures.get(gate, 0) + n
    return dict(sorted(gate_failures.items()))


def _rewrite_totals(builders) -> dict:
    """The LLM rewrite pass's counts summed over the builders, its rejection reasons by name."""
    totals = collections.Counter()
    reasons = collections.Counter()
    for b in builders:
        stats = b.rewrite_stats.as_dict()
        reasons.update(stats.pop("reasons"))
        totals.update(stats)
    return {**totals, "reasons": dict(sorted(reasons.items()))}


def build(split: str, out: str | Path, *, seed: int | None = None, sessions: int | None = None,
          worlds: list[str] | None = None, progress: Callable[[int], None] = lambda n: None,
          hf: bool = True, workers: int = 4, rewriter=None) -> BuildResult:
    """Build ``sessions`` verified sessions of ``split`` (test: benchmark worlds, train: training worlds)."""
    if split not in SPLITS:
        raise BuildError(f"unknown split {split!r}; use test or train")
    seed = DEFAULT_SEED[split] if seed is None else seed
    n_sessions = DEFAULT_SESSIONS[split] if sessions is None else sessions
    if n_sessions < 1:
        raise BuildError("--sessions must be at least 1")
    specs = _split_specs(split, worlds)
    checksums = _check_worlds([s.world for s in specs])
    quotas, personas = _plan(specs, n_sessions, seed, split)
    lock = threading.Lock()
    builders = {s.world: WorldBuilder(s, SafeExecutor(s.world, timeout=60.0), rewriter=rewriter,
                                           split=split) for s in specs}

    def kept_one() -> None:
        with lock:  # the worlds build in threads; progress is called from one at a time
            progress(1)

    def one_world(world: str) -> list[Session]:
        return _world_sessions(builders[world], seed, split, quotas[world], personas[world], kept_one)

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(specs)))) as pool:
        try:
            per_world = dict(zip([s.world for s in specs], pool.map(one_world, [s.world for s in specs])))
        except BuildUnavailable as exc:
            raise BuildError(f"Neo4j became unreachable during the build: {exc}") from exc
    all_sessions = [sess for s in specs for sess in per_world[s.world]]
    extra = {"rewrite": _rewrite_totals(builders.values())} if rewriter is not None else {}
    result = write_build(out, split, seed, all_sessions, checksums, _gate_failures(builders.values()), hf=hf,
                         extra=extra)
    result.db_seconds = sum(b.db_ms for b in builders.values()) / 1000.0
    return result


def write_build(out: str | Path, split: str, seed: int, sessions: list[Session], checksums: dict[str, str],
                gate_failures: dict[str, int], *, hf: bool = True, extra: dict | None = None) -> BuildResult:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "sessions.jsonl"
    write_sessions(path, sessions)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    manifest = {
        "format_version": FORMAT_VERSION,
        "split": split,
        "seed": seed,
        "sessions": len(sessions),
        "turns": sum(len(s.turns) for s in sessions),
        "world_checksums": checksums,
        "dataset_sha256": digest,
        "gate_failures": gate_failures,
        "stats": stats_dict(sessions),
        **(extra or {}),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    (out / "stats.md").write_text(render_stats(sessions, gate_failures=gate_failures,
                                               title=f"CypherTurn {split} split (seed {seed})"))
    if hf:
        save_hf_dataset(sessions, out, manifest=manifest)
    return BuildResult(out, sessions, manifest)


# the files that decide a build's content; a change to any of them makes a new default build
_CONTENT_FILES = ("benchmark/build.py", "benchmark/world_builder.py", "benchmark/chain.py", "benchmark/lexicon.py",
                  "benchmark/templates.py", "benchmark/wordings.py", "benchmark/wordings.yaml", "benchmark/session.py",
                  "graphs/cypher_syntax.py", "graphs/spec.py", "graphs/generator.py")


def _code_version() -> str:
    """A hash of the generator, the specs and the session builder."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    files = [root / f for f in _CONTENT_FILES] + sorted((root / "graphs" / "specs").glob("*.yaml"))
    for p in files:
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:12]


def default_dataset(split: str = "test", *, progress: Callable[[int], None] = lambda n: None) -> Path:
    """The default build of ``split`` (default seed and size), built on first use and cached under
    ``$CYPHERTURN_HOME/datasets``; a change to the code or the specs makes a new one."""
    return cached_dataset(split, progress=progress)


def cached_dataset(split: str, *, seed: int | None = None, sessions: int | None = None, hf: bool = True,
                   progress: Callable[[int], None] = lambda n: None) -> Path:
    """A build of ``split`` with this seed and size (None: the defaults), built once under
    ``$CYPHERTURN_HOME/datasets`` and reused while the code and the specs are unchanged (concurrent
    callers, other processes included, wait for one builder)."""
    import fcntl
    import shutil

    root = cache_home() / "datasets"
    root.mkdir(parents=True, exist_ok=True)
    seed = DEFAULT_SEED[split] if seed is None else seed
    name = f"{split}-seed{seed}" + ("" if sessions is None else f"-n{sessions}") + f"-{_code_version()}"
    path = root / name
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time; the others wait and reuse it
        if not (path / "manifest.json").is_file():
            tmp = path.with_name(path.name + ".partial")
            shutil.rmtree(tmp, ignore_errors=True)
            build(split, tmp, seed=seed, sessions=sessions, progress=progress, hf=hf)
            tmp.rename(path)
    return path
