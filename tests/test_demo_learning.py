"""scripts/demo_learning.py end to end at toy size (``--toy``: the 2-layer random ``tiny-llama``, a few
examples, one session per split), on CPU against the real Neo4j: every stage runs (data, SFT, the base and
SFT evaluations, GRPO with the execution reward, the GRPO evaluation, the report, shipping), and a rerun
continues instead of starting again. The full-size run is the same command without ``--toy``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

pytestmark = pytest.mark.neo4j

ROOT = Path(__file__).resolve().parent.parent


def _demo(out: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1", "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, "scripts/demo_learning.py", "--out", str(out), "--toy", "--train-sessions", "36",
           "--test-sessions", "7", *extra]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return proc


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, Path, subprocess.CompletedProcess]:
    tmp = tmp_path_factory.mktemp("demo")
    out, shipped = tmp / "demo", tmp / "shipped"
    return out, shipped, _demo(out, "--ship", str(shipped))


def test_every_stage_runs_and_the_report_compares_the_three_models(demo):
    out, _, proc = demo
    results = json.loads((out / "results.json").read_text())
    for split in ("heldout", "benchmark"):
        models = results["splits"][split]
        assert set(models) == {"base", "sft", "grpo"}
        for m in models.values():
            ex = m["ex"]
            assert m["turns"] >= 1 and 0 <= ex["mean"] <= 1
            if m["sessions"] == 1:  # resampling one session gives no interval
                assert ex["low"] is None and ex["high"] is None
            else:
                assert ex["low"] <= ex["mean"] <= ex["high"]
            assert 0 <= m["valid_actions"] <= 1 and m["psjs"] is not None
            assert sum(p["turns"] for p in m["by_position"].values()) == m["turns"]
            assert sum(d["turns"] for d in m["by_depth"].values()) == m["turns"]
            assert set(m["by_depth"]) <= {"0", "1", "2", "3+"} and "0" in m["by_depth"]  # turn 1 is depth 0
        assert {"sft-base:ex", "grpo-sft:ex", "grpo-base:ex"} <= set(results["paired"][split])
    # the held-out sessions are the SFT checkpoint's, and come from the training worlds
    held = {json.loads(line)["id"] for line in (out / "heldout" / "sessions.jsonl").read_text().splitlines()}
    assert held == set(json.loads((out / "sft" / "cypherturn.json").read_text())["heldout_sessions"])
    train = results["training"]
    assert train["sft"]["examples"] == 6 and train["sft"]["runtime_s"] > 0
    assert train["grpo"]["steps"] == 2 and len(train["grpo"]["first_rewards"]) >= 1
    assert (out / "training_curves.png").stat().st_size > 10_000
    timed = set(json.loads((out / "timings.json").read_text()))
    assert timed >= {"data", "sft", "eval sft", "grpo", "eval base"}
    # a GRPO stage that changed no weight is not scored again: its evaluations are SFT's, and the report says so;
    # one that changed any is scored
    copied = (out / "eval" / "grpo-heldout" / "same_weights_as").is_file()
    assert copied == _script().same_weights(out / "sft", out / "grpo")
    if copied:
        assert "the same weights as sft" in (out / "results.md").read_text()
    else:
        assert "eval grpo" in timed
    assert "EX by turn position" in (out / "results.md").read_text() and "EX by turn position" in proc.stdout
    assert "EX by chain depth" in (out / "results.md").read_text()


def test_the_shipped_adapter_is_the_grpo_checkpoint_with_a_model_card(demo):
    out, shipped, _ = demo
    assert json.loads((shipped / "cypherturn.json").read_text())["stage"] == "grpo"
    assert (shipped / "adapter_model.safetensors").read_bytes() == (out / "grpo" / "adapter_model.safetensors").read_bytes()
    card = (shipped / "README.md").read_text()
    assert (out / "results.md").read_text().splitlines()[0] in card and "python scripts/demo_learning.py" in card
    assert not list(shipped.glob("optimizer*")) and not list(shipped.glob("checkpoint-*"))


def test_shipping_sft_s_adapter_with_a_recipe_of_its_own(demo, tmp_path):
    out, _, _ = demo
    (tmp_path / "recipe.md").write_text("Three SFT runs, one after the other: RECIPE-MARK\n")
    _demo(out, "--stages", "report", "--ship", str(tmp_path / "sft-shipped"), "--ship-stage", "sft",
          "--card-recipe", str(tmp_path / "recipe.md"))
    shipped = tmp_path / "sft-shipped"
    assert json.loads((shipped / "cypherturn.json").read_text())["stage"] == "sft"
    assert (shipped / "adapter_model.safetensors").read_bytes() == (out / "sft" / "adapter_model.safetensors").read_bytes()
    card = (shipped / "README.md").read_text()
    assert "RECIPE-MARK" in card and "## Limits" in card and "python scripts/demo_learning.py --out runs/demo" not in card
    proc = subprocess.run([sys.executable, "scripts/demo_learning.py", "--out", str(out), "--toy", "--ship",
                           str(tmp_path / "x"), "--card-recipe", str(tmp_path / "missing.md")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "missing.md" in proc.stderr and not (tmp_path / "x").exists()


def test_a_rerun_continues_instead_of_training_again(demo):
    out, _, _ = demo
    before = {p: p.stat().st_mtime_ns for p in [out / "sft" / "adapter_model.safetensors",
                                                 out / "grpo" / "adapter_model.safetensors",
                                                 out / "eval" / "base-heldout" / "trajectories.jsonl"]}
    _demo(out)
    assert {p: p.stat().st_mtime_ns for p in before} == before
    assert json.loads((out / "results.json").read_text())["splits"]["benchmark"]["grpo"]["turns"] >= 1


def _script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("demo_learning", ROOT / "scripts" / "demo_learning.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_grpo_stage_that_changed_no_weight_takes_the_sft_scores(tmp_path):
    demo_learning = _script()
    sft, grpo = tmp_path / "sft", tmp_path / "grpo"
    for stage, after in ((sft, "d1"), (grpo, "d1")):
        stage.mkdir()
        (stage / "param_digest_rank0.json").write_text(json.dumps({"before": "d0", "after": after}))
    assert demo_learning.same_weights(sft, grpo)
    (grpo / "param_digest_rank0.json").write_text(json.dumps({"before": "d1", "after": "d2"}))
    assert not demo_learning.same_weights(sft, grpo)
    (grpo / "param_digest_rank0.json").unlink()
    assert not demo_learning.same_weights(sft, grpo)  # no digest: no claim
    # only a finished evaluation is copied, and the copy says where it came from
    for split, finished in (("heldout", True), ("benchmark", False)):
        run = tmp_path / "eval" / f"sft-{split}"
        run.mkdir(parents=True)
        (run / "trajectories.jsonl").write_text('{"turn": 1}\n')
        if finished:
            (run / "metrics.json").write_text("{}")
    assert demo_learning.reuse_eval(tmp_path, "sft", "grpo") == ["heldout"]
    copy = tmp_path / "eval" / "grpo-heldout"
    assert (copy / "trajectories.jsonl").read_text() == '{"turn": 1}\n' and (copy / "same_weights_as").read_text() == "sft\n"
    assert not (tmp_path / "eval" / "grpo-benchmark").exists()
    assert demo_learning.reuse_eval(tmp_path, "sft", "grpo") == []  # already there: nothing copied again


def test_names_in_schema_tells_schema_names_from_made_up_ones():
    demo_learning = _script()
    record = lambda q: {"world": "ancient_empire", "prediction": q}  # noqa: E731
    good = ["MATCH (a:Deity {name: 'Mogiaren'})<-[:WORSHIPS]-(t:Temple)<-[:HOSTS]-(c:City) RETURN c.name AS name",
            "MATCH (p:Province {name: x}) RETURN count(p) AS count"]  # a map value after a colon is no label
    bad = ["MATCH (t:Temple)<-[:HOUSTINGS]-(c:City) RETURN c.name AS name",   # a type the world lacks
           "MATCH (p:Professor) RETURN p.name AS name",                          # another world's label
           "MATCH (t:Temple) WHERE t.goddess = 'X' RETURN t.name AS name"]       # a property it lacks
    assert [demo_learning._in_schema(record(q)) for q in good + bad] == [True, True, False, False, False]
    assert demo_learning._in_schema({"world": "ancient_empire", "prediction": None}) is None
    assert demo_learning._schema_share([record(q) for q in good + bad] + [record(None)]) == 2 / 5


def test_gold_parts_tell_a_wrong_relationship_from_a_wrong_name():
    demo_learning = _script()
    gold = "MATCH (a:Deity {name: 'Mogiaren'})<-[:WORSHIPS]-(t:Temple)<-[:HOSTS]-(c:City) RETURN c.name AS name"
    record = lambda q: {"world": "ancient_empire", "prediction": q, "gold_cypher": gold}  # noqa: E731
    right_path = "MATCH (c:City)-[:HOSTS]->(t:Temple)-[:WORSHIPS]->(:Deity {name: 'Mogiarn'}) RETURN c.name AS name"
    right_name = "MATCH (a:Deity {name: 'Mogiaren'})<-[:WORSHIPS]-(t:Temple) RETURN t.name AS name"
    both = gold.replace("c.name", "c.name AS city, c.name")
    assert demo_learning._relationships_and_values(gold) == ({"WORSHIPS", "HOSTS"}, {"Mogiaren"})
    # a map's colon is no relationship type, and a label is not one either
    assert demo_learning._relationships_and_values("MATCH (p:Province {name: 'x'}) RETURN p") == (set(), {"x"})
    shares = demo_learning._gold_parts_share([record(right_path), record(right_name), record(both), record(None)])
    assert shares == {"relationships": 2 / 3, "values": 2 / 3}
    assert demo_learning._gold_parts_share([record(None)]) == {"relationships": None, "values": None}


def test_lookup_analysis_counts_lookups_that_show_a_gold_value_and_answers_that_copy_it(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from lookup_analysis import analyse

    gold = "MATCH (n1:Ward)\nWHERE n1.ward_type = 'general'\nRETURN DISTINCT n1.name AS name"

    def record(search: str, answer: str, ex: int) -> dict:
        return {"world": "hospital", "gold_cypher": gold, "prediction": answer, "ex": ex,
                "actions": [{"type": "SEARCH_VALUES", "payload": search}, {"type": "SUBMIT_ANSWER", "payload": answer}]}

    rows = [record("Geneeral", gold, 1),  # found (the whole graph), copied
            record('{"label": "Ward", "property": "ward_type", "query": "geneeral"}', gold.replace("general", "geneeral"), 0),
            record('{"label": "Ward", "property": "colour", "query": "geneeral"}', gold, 0),  # an error: shows nothing
            {"world": "hospital", "gold_cypher": gold, "prediction": gold, "ex": 1,
             "actions": [{"type": "SUBMIT_ANSWER", "payload": gold}]}]
    (tmp_path / "trajectories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = analyse(tmp_path)
    assert (got["turns"], got["ex"], got["turns_with_lookup"], got["lookups"]) == (4, 2, 3, 3)
    assert got["lookups_showing_a_gold_value"] == 2 and got["answers_after_such_a_lookup"] == 2
    assert got["of_which_spell_it_as_stored"] == 1 and got["of_which_ex"] == 1


def test_base_evaluations_are_taken_from_an_earlier_run_only_where_they_score_the_same_thing(tmp_path):
    import argparse
    import hashlib

    demo_learning = _script()
    source, out = tmp_path / "demo9", tmp_path / "demo12"
    datasets = {}
    for split in ("heldout", "benchmark"):
        dataset = out / split
        dataset.mkdir(parents=True)
        (dataset / "sessions.jsonl").write_text(f'{{"id": "{split}-1"}}\n')
        datasets[split] = dataset
        run = source / "eval" / f"base-{split}"
        run.mkdir(parents=True)
        (run / "metrics.json").write_text("{}")
        (run / "trajectories.jsonl").write_text('{"turn": 0}\n')
        (run / "meta.json").write_text(json.dumps({
            "model": "smollm2-135m", "limit": 1, "protocol": "guided", "dtype": "float32", "chat_format": "text",
            "dataset_sha256": hashlib.sha256((dataset / "sessions.jsonl").read_bytes()).hexdigest(),
            "generation": {"max_new_tokens": 192}}))
    # the benchmark sessions of this run are others than those the earlier run scored
    (datasets["benchmark"] / "sessions.jsonl").write_text('{"id": "benchmark-2"}\n')
    args = argparse.Namespace(splits={"heldout", "benchmark"}, limit=11, limit_benchmark=12, base_limit=1,
                              dtype="float32", max_new_tokens=192)
    why = demo_learning.copy_base_evals(args, out, source, "smollm2-135m", datasets)
    assert why["heldout"] == "copied" and "dataset_sha256" in why["benchmark"]
    copy = out / "eval" / "base-heldout"
    assert (copy / "trajectories.jsonl").read_text() == '{"turn": 0}\n' and (copy / "copied_from").is_file()
    assert not (out / "eval" / "base-benchmark").exists()
    # another limit or token limit scores something else; a finished copy is left as it is
    for changed in ({"base_limit": None}, {"max_new_tokens": 64}):
        other = argparse.Namespace(**{**vars(args), **changed})
        why = demo_learning.copy_base_evals(other, tmp_path / "other", source, "smollm2-135m",
                                            {"heldout": datasets["heldout"]})
        assert why["heldout"].startswith(str(source)) and not (tmp_path / "other" / "eval").exists()
    assert demo_learning.copy_base_evals(args, out, source, "smollm2-135m", datasets)["heldout"] == "present"


def test_a_stage_s_time_is_summed_over_the_runs_that_did_work_in_it(tmp_path, monkeypatch):
    """A stage cut and resumed, or an evaluation run again for another split, took the time of all its runs; a
    run that found the stage's output took none and changes nothing."""
    script = _script()
    # the one stand-in: the script's clock, so that stages "take" minutes without waiting them out
    clock = iter([0.0, 600.0, 1000.0, 1780.0, 2000.0, 2000.5])
    monkeypatch.setattr(script, "time", types.SimpleNamespace(perf_counter=lambda: next(clock)))
    script.Timings(tmp_path).run("eval grpo", lambda: None)  # 600 s: the heldout split
    script.Timings(tmp_path).run("eval grpo", lambda: None)  # 780 s: the benchmark split, a later command
    script.Timings(tmp_path).run("eval grpo", lambda: None)  # both scored already: 0.5 s
    assert json.loads((tmp_path / "timings.json").read_text()) == {"eval grpo": 1380.0}
