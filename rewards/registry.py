"""The reward registry: built-in names, import paths and the ``cypherturn.rewards`` entry-point group.

A reward spec names one reward function:

- a built-in name (``BUILTINS``): ``format``, ``answer``, ``key_value``, ``triple``, ``execution``,
  ``execution_relaxed``, ``partial`` (row-level F1), ``partial_psjs`` (provenance subgraph Jaccard);
- an import path ``package.module:function`` (``package.module:Class.attribute`` works too);
- the name of an entry point in the group ``cypherturn.rewards`` of any installed distribution::

      # the plug-in's pyproject.toml
      [project.entry-points."cypherturn.rewards"]
      sql_like = "my_rewards:sql_like_reward"

Resolution order: built-in, then import path (a spec containing ``:``), then entry point. Every
resolved object is checked at start-up: it must be callable and accept TRL's reward call
``fn(prompts, completions, **kwargs)``, i.e. take at least two positional parameters (or ``*args``)
and ``**kwargs``. Anything else raises ``RewardSpecError`` with a message that lists the built-ins
and the installed entry points.

Weighted specs (``parse_reward_specs``), for configs and command lines: ``"NAME"`` or ``"NAME:WEIGHT"``
(``"format:1"``, ``"execution:2"``, ``"mypkg.mod:fn:0.5"``: the last ``:``-field is the weight when it
is a number), or a mapping ``{name: ..., weight: ..., options: {...}}``, where ``options`` configure a
built-in through its factory (e.g. ``{name: execution, options: {exec_credit: 0.1, timeout: 3}}``; for
the execution rewards the keys are those of ``rewards.execution.ExecutionRewardOptions.from_kwargs``).
"""

from __future__ import annotations

import importlib
import inspect
import math
from importlib.metadata import entry_points
from typing import Any, Callable, Iterable
from cypherturn.errors import InputError

ENTRY_POINT_GROUP = "cypherturn.rewards"

# name -> (module, attribute) of the ready-made function, and of its factory (for ``options``)
BUILTINS: dict[str, tuple[str, str]] = {
    "format": ("rewards.paper", "format_reward"),
    "answer": ("rewards.paper", "answer_reward"),
    "key_value": ("rewards.paper", "key_value_reward"),
    "triple": ("rewards.paper", "triple_reward"),
    "execution": ("rewards.execution", "execution_reward"),
    "execution_relaxed": ("rewards.execution", "execution_relaxed_reward"),
    "partial": ("rewards.execution", "partial_reward"),
    "partial_psjs": ("rewards.execution", "partial_psjs_reward"),
}
FACTORIES: dict[str, tuple[str, str, dict]] = {
    "key_value": ("rewards.paper", "make_key_value_reward", {}),
    "triple": ("rewards.paper", "make_triple_reward", {}),
    "execution": ("rewards.execution", "make_execution_reward", {"mode": "strict"}),
    "execution_relaxed": ("rewards.execution", "make_execution_reward", {"mode": "relaxed"}),
    "partial": ("rewards.execution", "make_partial_reward", {"metric": "f1"}),
    "partial_psjs": ("rewards.execution", "make_partial_reward", {"metric": "psjs"}),
}
PAPER_REWARDS = ("format", "answer", "key_value", "triple")


class RewardSpecError(InputError):
    """A reward spec that does not name a usable reward function."""


def _entry_points() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)
    return found


def _known() -> str:
    eps = sorted(_entry_points())
    text = f"built-in rewards: {', '.join(BUILTINS)}"
    text += f"; entry points ({ENTRY_POINT_GROUP}): {', '.join(eps) if eps else 'none installed'}"
    return text + "; or an import path 'package.module:function'"


def check_signature(fn: Any, spec: str) -> Callable:
    """``fn`` if it can be called as ``fn(prompts, completions, **kwargs)``; else RewardSpecError."""
    if not callable(fn):
        raise RewardSpecError(f"reward {spec!r} resolves to {type(fn).__name__} {fn!r}, which is not callable; "
                              "a reward is a function fn(prompts, completions, **kwargs) -> list[float | None]")
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError) as exc:
        raise RewardSpecError(f"reward {spec!r}: cannot read its signature ({exc})") from None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var_positional = any(p.kind == p.VAR_POSITIONAL for p in params)
    var_keyword = any(p.kind == p.VAR_KEYWORD for p in params)
    problems = []
    if len(positional) < 2 and not var_positional:
        problems.append(f"it takes {len(positional)} positional parameter(s), needs 2 (prompts, completions)")
    if not var_keyword:
        problems.append("it has no **kwargs (TRL passes the dataset columns and more as keyword arguments)")
    if problems:
        raise RewardSpecError(f"reward {spec!r} has the signature {fn.__name__ if hasattr(fn, '__name__') else fn}"
                              f"{inspect.signature(fn)}: " + "; ".join(problems)
                              + ". Expected fn(prompts, completions, **kwargs) -> list[float | None]")
    return fn


def _import_path(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise RewardSpecError(f"reward {spec!r}: an import path is 'package.module:function'. {_known()}")
    try:
        obj = importlib.import_module(module_name)
    except ImportError as exc:
        raise RewardSpecError(f"reward {spec!r}: cannot import module {module_name!r} ({exc}). {_known()}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise RewardSpecError(f"reward {spec!r}: module {module_name!r} has no attribute {attr!r}. "
                                  f"{_known()}") from None
    return obj


def resolve(spec: str | Callable, *, options: dict | None = None) -> Callable:
    """The reward function named by ``spec`` (module docstring), signature-checked.

    ``options``: keyword arguments for a built-in's factory (``FACTORIES``); refused for others.
    A callable ``spec`` is checked and returned as it is.
    """
    if callable(spec) and not isinstance(spec, str):
        if options:
            raise RewardSpecError("options are only accepted for built-in rewards")
        return check_signature(spec, getattr(spec, "__name__", repr(spec)))
    if not isinstance(spec, str) or not spec.strip():
        raise RewardSpecError(f"reward spec must be a non-empty string, got {spec!r}. {_known()}")
    spec = spec.strip()
    if spec in BUILTINS:
        if options:
            if spec not in FACTORIES:
                raise RewardSpecError(f"built-in reward {spec!r} takes no options (got {sorted(options)}); "
                                      f"configurable: {', '.join(FACTORIES)}")
            module, attr, fixed = FACTORIES[spec]
            factory = getattr(importlib.import_module(module), attr)
            try:
                return check_signature(factory(**fixed, **options), spec)
            except (TypeError, ValueError) as exc:
                raise RewardSpecError(f"built-in reward {spec!r}: bad options {options!r} ({exc})") from None
        module, attr = BUILTINS[spec]
        return check_signature(getattr(importlib.import_module(module), attr), spec)
    if options:
        raise RewardSpecError(f"reward {spec!r}: options are only accepted for built-in rewards")
    if ":" in spec:
        return check_signature(_import_path(spec), spec)
    eps = _entry_points()
    if spec in eps:
        try:
            obj = eps[spec].load()
        except Exception as exc:  # noqa: BLE001 - a broken plug-in: report it clearly
            raise RewardSpecError(f"reward {spec!r}: entry point {eps[spec].value!r} of group {ENTRY_POINT_GROUP} "
                                  f"fails to load ({type(exc).__name__}: {exc})") from None
        return check_signature(obj, spec)
    raise RewardSpecError(f"unknown reward {spec!r}. {_known()}")


def _split_weight(text: str) -> tuple[str, float | None]:
    """(name, the weight the spec states or None)."""
    head, sep, tail = text.rpartition(":")
    if sep:
        try:
            weight = float(tail)
        except ValueError:
            return text, None
        return head, weight
    return text, None


def stated_weight(spec: Any) -> float | None:
    """The weight a spec states (``NAME:WEIGHT``, a mapping's ``weight``), or None when it states none
    (``parse_reward_specs`` then weighs it 1). For specs that ``parse_reward_specs`` accepts."""
    if isinstance(spec, dict):
        weight = spec.get("weight")
    elif isinstance(spec, str):
        weight = _split_weight(spec.strip())[1]
    else:
        return None
    return None if weight is None else float(weight)


def parse_reward_specs(specs: Iterable[Any]) -> list[tuple[str, Callable, float]]:
    """``[(name, function, weight), ...]`` for a list of weighted specs (module docstring)."""
    if isinstance(specs, (str, dict)):
        specs = [specs]
    out: list[tuple[str, Callable, float]] = []
    for item in specs:
        options = None
        if isinstance(item, dict):
            unknown = set(item) - {"name", "weight", "options"}
            if "name" not in item or unknown:
                raise RewardSpecError(f"reward spec {item!r}: a mapping takes keys name, weight, options"
                                      + (f" (unknown: {sorted(unknown)})" if unknown else ""))
            name, weight, options = str(item["name"]), item.get("weight", 1.0), item.get("options")
            if options is not None and not isinstance(options, dict):
                raise RewardSpecError(f"reward spec {item!r}: options must be a mapping")
        elif isinstance(item, str):
            name, weight = _split_weight(item.strip())
            weight = 1.0 if weight is None else weight
        else:
            raise RewardSpecError(f"reward spec {item!r}: expected 'NAME[:WEIGHT]' or a mapping. {_known()}")
        try:
            weight = float(weight)
        except (TypeError, ValueError):
            raise RewardSpecError(f"reward spec {item!r}: weight {weight!r} is not a number") from None
        if not math.isfinite(weight):
            raise RewardSpecError(f"reward spec {item!r}: weight must be finite")
        out.append((name, resolve(name, options=options), weight))
    return out


def weighted(specs: Iterable[Any]) -> tuple[list[Callable], list[float]]:
    """``(reward_funcs, reward_weights)`` for ``GRPOTrainer(reward_funcs=...)`` and
    ``GRPOConfig(reward_weights=...)``."""
    parsed = parse_reward_specs(specs)
    return [fn for _, fn, _ in parsed], [w for _, _, w in parsed]
