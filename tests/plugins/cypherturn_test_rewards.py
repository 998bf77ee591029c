"""A reward plug-in loaded by import path in tests/test_training.py: its values vary with the completion (so a
GRPO group has a non-zero advantage) and every call is appended to the JSON-lines file named by
$CYPHERTURN_TEST_REWARD_LOG, so the test can compare what it returned with what the trainer logged."""

from __future__ import annotations

import json
import os

from rewards.completions import completion_text


def length_reward(prompts, completions, **kwargs) -> list[float]:
    values = [(len(completion_text(c)) % 7) / 7.0 for c in completions]
    path = os.environ.get("CYPHERTURN_TEST_REWARD_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"pid": os.getpid(), "values": values}) + "\n")
    return values
