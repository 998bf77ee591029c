"""One error hierarchy (cypherturn/errors.py): every exception class the project defines derives from
CypherTurnError, there is one InfrastructureError, every failure of a dependency is one, and the
packages raise no bare ValueError / RuntimeError beside the hierarchy."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

from cypherturn.errors import CypherTurnError, InfrastructureError, InputError, InvariantError, ResetNeeded

PACKAGES = ("cypherturn", "graphs", "benchmark", "scoring", "rewards", "envs", "training")
INFRASTRUCTURE = {"ServerError", "SearchUnavailable", "BuildUnavailable", "EnvUnavailable", "BackendError",
                  "ChatError", "RewardInfrastructureError", "InfrastructureError"}
INPUT = {"SpecError", "ConfigError", "SearchError", "ReviewError", "RewardSpecError", "GoldQueryError"}


def _project_exceptions() -> dict[str, type]:
    found: dict[str, type] = {}
    for name in PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, name + "."):
            if info.name.endswith("__main__"):
                continue
            try:
                module = importlib.import_module(info.name)
            except ImportError as exc:  # an optional dependency (vLLM) that this machine lacks
                if "vllm" in str(exc).lower():
                    continue
                raise
            for attr, obj in vars(module).items():
                if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__.split(".")[0] in PACKAGES:
                    found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


EXCEPTIONS = _project_exceptions()


def test_the_hierarchy_was_found():
    assert len(EXCEPTIONS) >= 20  # the walk reached every package


@pytest.mark.parametrize("name", sorted(EXCEPTIONS))
def test_every_project_exception_derives_from_the_base(name):
    assert issubclass(EXCEPTIONS[name], CypherTurnError), name


def test_one_infrastructure_error_and_the_dependency_failures_are_it():
    by_short = {}
    for qual, cls in EXCEPTIONS.items():
        by_short.setdefault(cls.__name__, set()).add(cls)
    assert by_short["InfrastructureError"] == {InfrastructureError}
    for short in INFRASTRUCTURE:
        assert all(issubclass(c, InfrastructureError) and issubclass(c, RuntimeError) for c in by_short[short]), short
    for short in INPUT:
        assert all(issubclass(c, InputError) and issubclass(c, ValueError) for c in by_short[short]), short


ROOT = Path(__file__).resolve().parents[1]
BUILTIN_EXCEPTIONS = {n for n, o in vars(builtins).items() if isinstance(o, type) and issubclass(o, BaseException)}
BARE = {"ValueError", "RuntimeError"}  # the hierarchy has a class for each (InputError, ResetNeeded, ...)


def _name(node: ast.expr) -> str | None:
    """The class a raise or a base names: ``X``, ``m.X`` or ``X(...)``."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _sources():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path.relative_to(ROOT), ast.parse(path.read_text(encoding="utf-8"), str(path))


def test_no_bare_builtin_raise_and_every_exception_class_is_in_the_hierarchy():
    """By the source, so that ``__main__`` modules, classes defined inside functions and modules the
    import walk above skips (an optional dependency missing) are covered too."""
    hierarchy = {cls.__name__ for cls in EXCEPTIONS.values() if issubclass(cls, CypherTurnError)} | {"CypherTurnError"}
    bare, outside, files = [], [], 0
    for path, tree in _sources():
        files += 1
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and node.exc is not None and _name(node.exc) in BARE:
                bare.append(f"{path}:{node.lineno}: raise {_name(node.exc)}")
            if isinstance(node, ast.ClassDef) and (path, node.name) != (Path("cypherturn/errors.py"), "CypherTurnError"):
                bases = {_name(b) for b in node.bases}
                if bases & BUILTIN_EXCEPTIONS and not bases & hierarchy:
                    outside.append(f"{path}:{node.lineno}: class {node.name}({', '.join(sorted(map(str, bases)))})")
    assert files > 50  # the walk reached the packages' sources
    assert not bare, "raise the hierarchy's class (cypherturn/errors.py), not the builtin:\n" + "\n".join(bare)
    assert not outside, "derive from CypherTurnError (cypherturn/errors.py):\n" + "\n".join(outside)


def test_order_and_invariant_errors_keep_their_builtin():
    assert issubclass(ResetNeeded, CypherTurnError) and issubclass(ResetNeeded, RuntimeError)
    assert issubclass(InvariantError, CypherTurnError) and issubclass(InvariantError, RuntimeError)
    assert not issubclass(ResetNeeded, InfrastructureError) and not issubclass(InvariantError, InfrastructureError)


def test_a_command_line_gives_exit_2_for_bad_input_and_3_for_a_failed_dependency(capsys):
    """cypherturn.cli.run_command: an InputError is the person's (2), any InfrastructureError (the local Neo4j
    not starting, a model server not answering) is the dependency's (3); the message goes to stderr."""
    import argparse

    from cypherturn.cli import run_command
    from graphs.server import ServerError

    def failing(exc):
        def command(args):
            raise exc
        return command

    assert run_command(failing(InputError("unknown world 'x'")), argparse.Namespace()) == 2
    assert capsys.readouterr().err == "error: unknown world 'x'\n"
    assert run_command(failing(ServerError("Java 17+ not found")), argparse.Namespace()) == 3
    assert capsys.readouterr().err == "error: infrastructure (ServerError): Java 17+ not found\n"
    assert run_command(failing(InfrastructureError("model server gone")), argparse.Namespace()) == 3
    assert run_command(lambda args: 0, argparse.Namespace()) == 0
