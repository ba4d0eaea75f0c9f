#!/usr/bin/env bash
# Runs one test file (or any command) N times and counts the exit codes, to catch flaky tests and
# crashes at exit. Usage:
#   scripts/loop-test.sh FILE [N]          node scripts/test.mjs FILE, N times (default 30)
#   scripts/loop-test.sh -- N CMD [ARGS]   CMD ARGS, N times
# Each failing run's output is kept in $LOOP_LOGS (default: a fresh temp folder), every run's with
# LOOP_KEEP=1; prints the tally and exits non-zero when any run failed.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--" ]; then
  n="${2:?usage: scripts/loop-test.sh -- N CMD [ARGS]}"
  shift 2
  cmd=("$@")
else
  file="${1:?usage: scripts/loop-test.sh FILE [N]}"
  n="${2:-30}"
  cmd=(node scripts/test.mjs "$file")
fi
logs="${LOOP_LOGS:-$(mktemp -d -t polar-loop-XXXXXX)}"
mkdir -p "$logs"
declare -A codes=()
failed=0
for i in $(seq 1 "$n"); do
  "${cmd[@]}" >"$logs/run-$i.log" 2>&1
  rc=$?
  codes[$rc]=$((${codes[$rc]:-0} + 1))
  if [ "$rc" -eq 0 ]; then
    [ "${LOOP_KEEP:-0}" = 1 ] || rm -f "$logs/run-$i.log"
  else
    failed=$((failed + 1))
    echo "run $i: exit $rc (log: $logs/run-$i.log)"
  fi
done
summary=""
for rc in "${!codes[@]}"; do summary+=" exit $rc: ${codes[$rc]};"; done
echo "loop: $n runs of ${cmd[*]} —${summary% ;}"
[ "$failed" -eq 0 ]
