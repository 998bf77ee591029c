"""Significance (DESIGN §7): bootstrap confidence intervals over sessions, a paired bootstrap test
between two runs over the same sessions, and Spearman rank correlation between rankings.

- ``bootstrap_ci``: the 95% interval of a metric by resampling *sessions* with replacement
  (10,000 resamples by default; ``scipy.stats.bootstrap``, percentile method, seeded by ``seed``).
  A turn metric (``ex``, ``ex_relaxed``, ``psjs``) is the pooled turn mean of the resampled sessions
  (sum of their turn values / number of their turns); ``metric="sem"`` is the mean of per-session SEM.
- ``paired_bootstrap``: run A minus run B on the turns scored in both (matched by session id and turn
  index), sessions resampled jointly. Reports the observed difference, its percentile interval and a
  two-sided p-value from the bootstrap distribution shifted to the null (the share of resampled
  differences whose distance to the observed one is at least the observed one's distance to 0;
  Berg-Kirkpatrick et al., 2012), as (k + 1) / (resamples + 1) so that it is never 0 (its resolution
  is 1 / resamples). ``significant`` is p < 1 - confidence. With one shared session there is nothing to
  resample: the interval and p are None (no test), not a zero-width interval with p = 1.
- ``rank_correlation``: Spearman's rho (``scipy.stats.spearmanr``) between two {model: score}
  mappings over their common models, e.g. guided vs agentic EX per model.

Unscored turns (infrastructure errors) are left out, as everywhere. Same records + same seed give the
same numbers.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

import numpy as np

from cypherturn.errors import InputError
from scoring.metrics.sem import session_exact_match
from scoring.records import by_session, is_scored, split_scored

__all__ = ["bootstrap_ci", "paired_bootstrap", "rank_correlation", "DEFAULT_RESAMPLES"]

DEFAULT_RESAMPLES = 10_000


def _session_arrays(records: Iterable[Mapping[str, Any]], metric: str) -> tuple[list[str], np.ndarray, np.ndarray, int]:
    """Per session: sum of the metric over its scored turns and their count."""
    if metric == "sem":
        res = session_exact_match(records)
        ids = list(res["per_session"])
        values = np.array([res["per_session"][s] for s in ids], dtype=float)
        return ids, values, np.ones(len(ids)), res["excluded_turns"]
    ids, sums, counts = [], [], []
    excluded = 0
    for sid, turns in by_session(records).items():
        vals = []
        for r in turns:
            if not is_scored(r):
                excluded += 1
            elif r.get(metric) is not None:
                vals.append(float(r[metric]))
        if vals:
            ids.append(sid)
            sums.append(sum(vals))
            counts.append(len(vals))
    return ids, np.array(sums, dtype=float), np.array(counts, dtype=float), excluded


def _ratio(s, c, axis=-1):
    return np.sum(s, axis=axis) / np.sum(c, axis=axis)


def _none_if_nan(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def bootstrap_ci(records: Iterable[Mapping[str, Any]], metric: str = "ex", *, resamples: int = DEFAULT_RESAMPLES,
                 confidence: float = 0.95, seed: int | None = 0) -> dict:
    """{"mean", "low", "high", "sessions", "resamples", "confidence", "seed", "excluded_turns"}; "low" and
    "high" are None for one session (resampling one session gives it back: no interval, not a zero-width one)."""
    from scipy.stats import bootstrap

    ids, sums, counts, excluded = _session_arrays(records, metric)
    out = {"mean": None, "low": None, "high": None, "sessions": len(ids), "resamples": resamples,
           "confidence": confidence, "seed": seed, "excluded_turns": excluded}
    if not ids:
        return out
    out["mean"] = float(_ratio(sums, counts))
    if len(ids) == 1:
        return out
    res = bootstrap((sums, counts), _ratio, paired=True, vectorized=True, n_resamples=resamples,
                    confidence_level=confidence, method="percentile", rng=np.random.default_rng(seed))
    out["low"] = _none_if_nan(res.confidence_interval.low)
    out["high"] = _none_if_nan(res.confidence_interval.high)
    return out


def paired_bootstrap(records_a: Iterable[Mapping[str, Any]], records_b: Iterable[Mapping[str, Any]],
                     metric: str = "ex", *, resamples: int = DEFAULT_RESAMPLES, confidence: float = 0.95,
                     seed: int | None = 0) -> dict:
    """{"delta" (A - B), "low", "high", "p_value", "significant", "mean_a", "mean_b", "sessions",
    "turns", "resamples", "seed"}; "low", "high" and "p_value" are None when the runs share one session.
    Raises InputError (a ValueError) when the runs share no scored turn."""
    from scipy.stats import bootstrap

    a_scored, _ = split_scored(records_a)
    b_scored, _ = split_scored(records_b)
    key = lambda r: (str(r["session_id"]), int(r["turn_index"]))  # noqa: E731
    b_index = {key(r): r for r in b_scored if r.get(metric) is not None}
    sessions: dict[str, list[float]] = {}
    for r in a_scored:
        other = b_index.get(key(r))
        if other is None or r.get(metric) is None:
            continue
        acc = sessions.setdefault(key(r)[0], [0.0, 0.0, 0.0])
        acc[0] += float(r[metric])
        acc[1] += float(other[metric])
        acc[2] += 1
    if not sessions:
        raise InputError("the two runs share no scored turn: a paired test needs the same sessions")
    arr = np.array(list(sessions.values()))
    sa, sb, c = arr[:, 0], arr[:, 1], arr[:, 2]
    mean_a, mean_b = float(sa.sum() / c.sum()), float(sb.sum() / c.sum())
    delta = mean_a - mean_b
    out = {"delta": delta, "low": None, "high": None, "p_value": None, "significant": False,
           "mean_a": mean_a, "mean_b": mean_b, "sessions": len(sessions), "turns": int(c.sum()),
           "resamples": resamples, "confidence": confidence, "seed": seed}
    if len(sessions) == 1:
        return out

    def stat(x, y, n, axis=-1):
        return (np.sum(x, axis=axis) - np.sum(y, axis=axis)) / np.sum(n, axis=axis)

    res = bootstrap((sa, sb, c), stat, paired=True, vectorized=True, n_resamples=resamples,
                    confidence_level=confidence, method="percentile", rng=np.random.default_rng(seed))
    dist = np.asarray(res.bootstrap_distribution)
    eps = 1e-12
    extreme = int(np.sum(np.abs(dist - delta) >= abs(delta) - eps))
    p = (extreme + 1) / (dist.size + 1) if delta != 0 else 1.0
    out.update(low=_none_if_nan(res.confidence_interval.low), high=_none_if_nan(res.confidence_interval.high),
               p_value=p, significant=bool(p < 1 - confidence))
    return out


def rank_correlation(scores_a: Mapping[str, float], scores_b: Mapping[str, float]) -> dict:
    """{"rho", "p_value", "n", "models"}: Spearman's rho over the models in both mappings (sorted by
    name; rho and p are None with fewer than 3 models or a constant ranking)."""
    from scipy.stats import spearmanr

    models = sorted(set(scores_a) & set(scores_b))
    out = {"rho": None, "p_value": None, "n": len(models), "models": models}
    if len(models) < 3:
        return out
    x = [float(scores_a[m]) for m in models]
    y = [float(scores_b[m]) for m in models]
    if len(set(x)) < 2 or len(set(y)) < 2:
        return out
    res = spearmanr(x, y)
    out["rho"] = _none_if_nan(float(res.statistic))
    out["p_value"] = _none_if_nan(float(res.pvalue))
    return out
