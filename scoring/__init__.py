"""Scoring: the one judge of a (gold, prediction) pair (``scoring.judge``). See its docstring."""

from scoring.judge import (TRUNCATION_RULE, GoldCache, GoldEntry, GoldQueryError, Judge, JudgeLimits, Pair, Verdict,
                           compare, same_text, shared_judge)

__all__ = ["Judge", "JudgeLimits", "Pair", "Verdict", "GoldCache", "GoldEntry", "GoldQueryError", "compare",
           "same_text", "shared_judge", "TRUNCATION_RULE"]
