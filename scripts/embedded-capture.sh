#!/usr/bin/env bash
# One `polar capture` on the embedded default backend, offline, with the tiny test model: `pi -p hi`
# in a private HOME and workspace (no user config read or written), then cleans up. Exits with polar's
# exit code. With scripts/loop-test.sh it checks that capture never aborts at exit:
#   scripts/loop-test.sh -- 30 scripts/embedded-capture.sh
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
model="$root/fixtures/models/tiny-qwen3-stop"
# the stop bias makes the random model end its turns after a few tokens (as test/e2e/tokens.test.ts)
node --import tsx "$root/scripts/make-tiny-model.ts" "$model" --stop-bias 23 2>/dev/null || exit 1
base=$(mktemp -d -t polar-capture-XXXXXX)
trap 'rm -rf "$base"' EXIT
mkdir -p "$base/home" "$base/work"
cd "$base/work" || exit 1
HOME="$base/home" XDG_CONFIG_HOME="$base/home/.config" XDG_CACHE_HOME="$base/home/.cache" \
  XDG_DATA_HOME="$base/home/.local/share" NO_COLOR=1 POLAR_OFFLINE=1 POLAR_EMBEDDED_THREADS=1 \
  PATH="$root/node_modules/.bin:$PATH" \
  node "$root/bin/polar" capture --backend embedded --model "$model" -o "$base/capture.jsonl" -- pi -p hi
rc=$?
echo "polar capture exit $rc, $(wc -l <"$base/capture.jsonl" 2>/dev/null || echo 0) records"
exit "$rc"
