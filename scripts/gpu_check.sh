#!/usr/bin/env bash
# The GPU check of the 3B GRPO recipe (scripts/gpu_check.py) on a machine that has torch, transformers, peft and
# accelerate but cannot download: the packages it lacks travel as wheels in .whl/ (ignored by git).
#
#   bash scripts/gpu_check.sh fetch        # here, with network: trl, datasets, dill, multiprocess into .whl/
#   bash scripts/gpu_check.sh [ARGS...]    # there: installs from .whl/ what is missing, runs scripts/gpu_check.py
#                                          # (results in $OUT, else runs/gpu_check)
# DEVICE_PY (default 3.12) is the Python version of the GPU machine, for the one wheel that depends on it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if [ "${1:-}" = fetch ]; then
  # the versions this project is tested with (pyproject.toml), as installed in .venv
  VENV=${VENV:-.venv/bin/python}
  ver() { "$VENV" -c "import importlib.metadata as m; print(m.version('$1'))"; }
  mkdir -p .whl
  "$VENV" -m pip download -q --no-deps --only-binary=:all: --python-version "${DEVICE_PY:-3.12}" -d .whl \
    "trl==$(ver trl)" "datasets==$(ver datasets)" "dill==$(ver dill)" "multiprocess==$(ver multiprocess)"
  ls -l .whl
  exit 0
fi

missing=()
for pkg in trl datasets dill multiprocess; do
  "$PY" -c "import $pkg" 2>/dev/null || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ ! -d .whl ]; then
    echo "missing Python packages: ${missing[*]}; run 'bash scripts/gpu_check.sh fetch' where pip can download" >&2
    exit 2
  fi
  "$PY" -m pip install -q --no-index --no-deps --find-links .whl "${missing[@]}"
fi
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 exec "$PY" scripts/gpu_check.py "$@"
