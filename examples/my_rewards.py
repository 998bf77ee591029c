"""A custom reward for CypherTurn Gym (the worked example of the README section "Custom rewards").

Use it by import path, with this folder on PYTHONPATH::

    from rewards import weighted
    funcs, weights = weighted(["format:1", "execution:2", "my_rewards:concise_query_reward:0.5"])

or list the same specs under ``rewards:`` in a training recipe, or register the function as an entry
point of your own package (group ``cypherturn.rewards``, see the README) and use its name.
"""

from __future__ import annotations

from rewards.completions import completion_text, extract_answer


def concise_query_reward(prompts, completions, max_chars: int = 400, **kwargs) -> list[float | None]:
    """0.0 for an <answer> query of at most ``max_chars`` characters, down to -1.0 as it grows to
    twice that; -1.0 when there is no <answer>. Rows without a gold query are skipped (None)."""
    golds = kwargs.get("gold_cypher") or [None] * len(completions)
    scores: list[float | None] = []
    for completion, gold in zip(completions, golds):
        if gold is None:
            scores.append(None)  # TRL leaves None out of the weighted sum
            continue
        query = extract_answer(completion_text(completion))
        if query is None:
            scores.append(-1.0)
            continue
        excess = max(0, len(query) - max_chars)
        scores.append(-min(1.0, excess / max_chars))
    return scores
