"""One error hierarchy (graphs/errors.py): every exception class the project defines derives from
CypherTurnError, there is one InfrastructureError, and every failure of a dependency is one."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from graphs.errors import CypherTurnError, InfrastructureError, InputError

PACKAGES = ("graphs", "benchmark", "scoring", "rewards", "envs", "training")
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
