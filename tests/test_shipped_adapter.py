"""The adapter the repository ships (``models/smollm2-135m-cypherturn``, written by ``scripts/demo_learning.py
--ship``), which the main job scores: small, carded, loadable offline, and answering in the action format."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SHIPPED = Path(__file__).resolve().parent.parent / "models" / "smollm2-135m-cypherturn"


def test_the_adapter_is_small_carded_and_names_the_offline_base():
    config = json.loads((SHIPPED / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == "smollm2-135m"  # the alias envs.models resolves offline
    size = sum(p.stat().st_size for p in SHIPPED.iterdir())
    assert size <= 20 * 2**20, f"{size / 2**20:.1f} MiB"
    card = (SHIPPED / "README.md").read_text()
    for section in ("## Data", "## Recipe", "## Results", "## Limits"):
        assert section in card
    marker = json.loads((SHIPPED / "cypherturn.json").read_text())
    assert marker["chat_format"] == "text" and marker["heldout_sessions"]


@pytest.mark.neo4j
def test_the_main_job_model_answers_every_turn_with_a_submitted_query(tmp_path):
    from benchmark.build import build
    from envs.env import load_dataset

    build("test", tmp_path / "set", seed=4, sessions=7, hf=False)  # one session of each benchmark world
    session = load_dataset(tmp_path / "set")[0]
    out = subprocess.run([sys.executable, "-m", "envs.evaluate", "--model", str(SHIPPED), "--dataset",
                          str(tmp_path / "set"), "--limit", "1", "--protocol", "guided", "--max-new-tokens", "160",
                          "--concurrency", "1", "--no-psjs", "--out", str(tmp_path / "run"), "--quiet"],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    records = [json.loads(line) for line in (tmp_path / "run" / "trajectories.jsonl").read_text().splitlines()]
    assert len(records) == len(session.turns)
    # The base model writes prose on all three actions of a turn; the trained one submits a query at once, or
    # after value lookups (its training teaches up to MAX_SEARCHES of them before the answer).
    from training.data import MAX_SEARCHES

    kinds = [[a["type"] for a in r["actions"]] for r in records]
    assert all(k[-1] == "SUBMIT_ANSWER" and set(k[:-1]) <= {"SEARCH_VALUES"} and len(k) <= MAX_SEARCHES + 1
               for k in kinds), kinds
    assert all(r["infra_error"] is None and r["ex"] in (0, 1) for r in records)
