#!/usr/bin/env bash
# Makes polar's Python environment: .venv at the repository root with the pinned packages of
# src/train/worker/requirements.txt (torch, transformers, peft, safetensors, accelerate, onnx, onnxruntime,
# pytest), and the cluster group src/train/worker/requirements-cluster.txt (ray; POLAR_SETUP_CLUSTER=0 skips it). `npm run setup:python`; PYTHON=python3.12 picks the interpreter. polar train / export and the
# test suite use .venv by default (--python PATH or POLAR_PYTHON still win). See docs/train.md.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
# --retries 0: an unreachable index fails at once instead of retrying for minutes
.venv/bin/python -m pip install --disable-pip-version-check --retries 0 -r src/train/worker/requirements.txt
# the optional cluster group (Ray, docs/cluster.md); POLAR_SETUP_CLUSTER=0 leaves it out
if [ "${POLAR_SETUP_CLUSTER:-1}" != 0 ]; then
  .venv/bin/python -m pip install --disable-pip-version-check --retries 0 -r src/train/worker/requirements-cluster.txt
fi
.venv/bin/python -c 'import torch, transformers, peft; print("polar python:", torch.__version__, transformers.__version__, peft.__version__)'
