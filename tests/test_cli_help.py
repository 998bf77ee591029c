"""``--help`` of every command line exits 0 and prints its usage: every Python script under ``training/`` and
``scripts/`` (a file with a ``__main__`` guard), every ``python -m`` entry of the packages (a ``__main__.py``
or a module with a ``__main__`` guard) and each of its subcommands, and the shell scripts that take
``--help``. The commands are found, not listed, so a new one is covered the day it is added. They run as
subprocesses, as a user types them, all at once: most of the time is spent importing torch and TRL."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT_DIRS = ("training", "scripts")  # a guarded file here is run by its path
PACKAGES = ("graphs", "benchmark", "scoring", "rewards", "envs")  # a guarded module here is run with -m
GUARD = re.compile(r"""^if __name__ == ["']__main__["']:""", re.M)
# shell scripts and why they have no --help: the test asserts that every one is here or in SHELL_HELP
SHELL_WITHOUT_HELP = {"scripts/test.sh": "passes its arguments to pytest after installing and starting Neo4j",
                      "scripts/main_job.sh": "takes no arguments (settings are environment variables)"}
SHELL_HELP = {"scripts/gpu_check.sh": "gpu_check.py"}  # passes --help on to the Python script it wraps
# moved from tests/test_training.py (test_help_of_the_training_scripts_exits_0): a help string holding a bare
# '%' made argparse's formatting raise (ValueError: unsupported format character)
EXPECTED = {"training/sft.py": ["--holdout_fraction", "90%", "--lora_layers"],
            "training/grpo.py": ["--holdout_fraction", "90%", "--lora_layers"]}
SUBCOMMANDS = re.compile(r"^positional arguments:\n\s+\{([\w,-]+)\}", re.M)


def _guarded(path: Path) -> bool:
    return bool(GUARD.search(path.read_text(encoding="utf-8")))


def _commands() -> dict[str, tuple[list[str], str]]:
    """{name: (argv before --help, the usage's program name)}."""
    found: dict[str, tuple[list[str], str]] = {}
    for folder in SCRIPT_DIRS:
        for path in sorted((ROOT / folder).glob("*.py")):
            if _guarded(path):
                rel = str(path.relative_to(ROOT))
                found[rel] = ([sys.executable, rel], path.name)
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if _guarded(path) or path.name == "__main__.py":
                module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__main__")
                found[f"-m {module}"] = ([sys.executable, "-m", module], f"python -m {module}")
    for rel, prog in SHELL_HELP.items():
        found[rel] = (["bash", rel], prog)
    return found


COMMANDS = _commands()


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRL_EXPERIMENTAL_SILENCE="1", TOKENIZERS_PARALLELISM="false",
               CYPHERTURN_HOME=str(home), PYTHON=sys.executable,  # PYTHON: the interpreter gpu_check.sh runs
               PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    return env


@pytest.fixture(scope="module")
def helps(request, tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """The ``--help`` of every selected command and, for a command with subcommands, each subcommand's, run
    concurrently: {name: process}, subcommands as "name sub"."""
    env = _env(tmp_path_factory.mktemp("home"))
    selected = {item.callspec.params["name"] for item in request.session.items
                if item.path == request.path and hasattr(item, "callspec")}

    def run(argv: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(argv + ["--help"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)

    with ThreadPoolExecutor(max_workers=8) as pool:
        first = {name: pool.submit(run, argv) for name, (argv, _) in COMMANDS.items() if name in selected}
        results = {name: future.result() for name, future in first.items()}
        second = {}
        for name, proc in results.items():
            m = SUBCOMMANDS.search(proc.stdout)
            for sub in m.group(1).split(",") if m else []:
                second[f"{name} {sub}"] = pool.submit(run, COMMANDS[name][0] + [sub])
        results.update({name: future.result() for name, future in second.items()})
    return results


def test_the_commands_were_found():
    for name in ("training/sft.py", "training/grpo.py", "scripts/import_graph.py", "-m benchmark", "-m graphs",
                 "-m rewards", "-m envs.evaluate", "scripts/gpu_check.sh"):
        assert name in COMMANDS, name
    shell = {str(p.relative_to(ROOT)) for p in (ROOT / "scripts").glob("*.sh")}
    assert shell == set(SHELL_HELP) | set(SHELL_WITHOUT_HELP), "a shell script to sort: does it take --help?"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_exits_0_and_prints_the_usage(helps, name):
    prog = COMMANDS[name][1]
    runs = {n: p for n, p in helps.items() if n == name or n.startswith(name + " ")}
    for run_name, proc in runs.items():
        usage = f"usage: {prog}{run_name[len(name):]}"  # "usage: python -m graphs load" for a subcommand
        assert proc.returncode == 0 and usage in proc.stdout, (f"{run_name} --help: exit {proc.returncode}, "
                                                               f"expected {usage!r}\n{proc.stdout[-2000:]}\n"
                                                               f"{proc.stderr[-4000:]}")
    for text in EXPECTED.get(name, []):
        assert text in helps[name].stdout, (name, text)
