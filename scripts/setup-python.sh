#!/usr/bin/env bash
# Makes polar's Python environment in a clone: .venv at the repository root with the pinned packages of
# src/train/worker/requirements.txt (torch, transformers, peft, safetensors, accelerate, onnx, onnxruntime,
# pytest) and the cluster group src/train/worker/requirements-cluster.txt (ray; POLAR_SETUP_CLUSTER=0 skips
# it), the tracking group src/train/worker/requirements-report.txt (tensorboard; POLAR_SETUP_REPORT=0 skips it)
# and, with POLAR_SETUP_WANDB=1, src/train/worker/requirements-wandb.txt (wandb), through `polar setup` (src/setup/command.ts), which an installed polar runs to make the same
# environment in its cache. `npm run setup:python` (after npm ci); PYTHON=python3.12 picks the interpreter.
# polar train / export and the test suite use .venv by default (--python PATH or POLAR_PYTHON still win).
set -euo pipefail
cd "$(dirname "$0")/.."
cluster=(--cluster)
if [ "${POLAR_SETUP_CLUSTER:-1}" = 0 ]; then cluster=(); fi
report=(--report)
if [ "${POLAR_SETUP_REPORT:-1}" = 0 ]; then report=(); fi
if [ "${POLAR_SETUP_WANDB:-0}" = 1 ]; then report+=(--wandb); fi
exec node bin/polar setup --venv .venv --python "${PYTHON:-python3}" "${cluster[@]}" "${report[@]}"
