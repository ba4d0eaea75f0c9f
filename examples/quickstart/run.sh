#!/usr/bin/env bash
# The first hour of polar: a tiny model learns from a reward, offline, on the CPU, through a real harness
# (Pi), in a few minutes on 2 cores. examples/quickstart/README.md says what each step does and what to
# look at. In a clone, after `npm run setup`:
#
#   examples/quickstart/run.sh [DIR]      writes everything into DIR (default: ./quickstart-run)
#
# SEED=N picks the sampling seed (default 7). Nothing here needs the network.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-quickstart-run}"
seed="${SEED:-7}"
export POLAR_OFFLINE=1
# Pi (a dev dependency of the clone) and polar itself (`npx polar` is the same command)
export PATH="$root/node_modules/.bin:$PATH"
polar() { node "$root/bin/polar" "$@"; }
python="${POLAR_PYTHON:-$root/.venv/bin/python}"

# a tiny random Qwen3 with the real vocabulary (2 layers, hidden size 32), made from its seed
spec='tiny:arch=qwen3,vocab=151669,dim=32,layers=2,heads=2,kv_heads=1,seed=1'
# how every rollout runs: Pi answers the task's prompt through polar's own embedded engine (8 tokens at
# most: the answer is one word), on this machine, and the verifier reward.mjs grades its final answer
rollouts=(--backend embedded --prompt-template "$here/prompt.txt" --grader "node $here/reward.mjs"
  --max-tokens-cap 8 --runtime local --allow-unsandboxed --repos "$out/repos" --concurrency 4 --seed "$seed")

step() { echo "== $1 (at ${SECONDS} s)"; }

step "1/4 the model, and the prompts Pi sends it"
polar export "$spec" --out "$out/init-onnx"
polar eval --dataset "$here/tasks.jsonl" --agent pi --model "$out/init-onnx" --samples 2 "${rollouts[@]}" \
  --out "$out/probe" -q
polar build "$out/probe/captures" --format verl --group-by none -o "$out/probe-prompts.jsonl" -q

step "2/4 warm-up: a few supervised steps, so that it answers heads ~70% and tails ~30%"
"$python" "$here/warmup.py" --spec "$spec" --verl "$out/probe-prompts.jsonl" --tokenizer "$out/init-onnx" \
  --answer heads=0.7 --answer tails=0.3 --out "$out/warm" | tail -2

step "3/4 RL: 3 steps of GRPO (16 rollouts each), the reward: 1 for tails"
polar loop --agent pi --train-set "$here/tasks.jsonl" --eval-set "$here/heldout.jsonl" --model "$out/warm" \
  --group-size 8 --tasks-per-step 2 --steps 3 --eval-every 3 --device cpu --lr 0.005 \
  --report-to tensorboard "${rollouts[@]}" --out "$out/run"

step "4/4 the run"
polar inspect "$out/run" -o "$out/report.html"
"$python" "$here/summary.py" "$out/run"
echo "done in ${SECONDS} s: open $out/report.html; TensorBoard: $python -m tensorboard.main --logdir $out/run/tensorboard"
