#!/usr/bin/env bash
# Regenerates fixtures/swe-logs/logs/*.log by running the small suites in fixtures/swe-logs/suites with the
# real test runners (pytest 8.4 and 9.1, Django's DiscoverRunner at --verbosity 2 as tests/runtests.py
# uses it, sympy's runner as bin/test uses it), wrapped in the markers and exit-code line that an
# eval script prints. Then, when SWEBENCH_SRC names a checkout of SWE-bench/SWE-bench (tags v4.1.0 and
# v5.0.1 fetched), writes each log's expected status map from the official parser functions, the
# official resolution decisions (resolution.json) and v4.1.0's specs (specs.json)
# (scripts/swe-expected.py imports them from a temporary copy; no official code is committed).
#
#   python3 -m venv .venv-grade && .venv-grade/bin/pip install pytest==8.4.2 django sympy
#   python3 -m venv .venv-grade-pt9 && .venv-grade-pt9/bin/pip install pytest==9.1.1
#   SWEBENCH_SRC=/path/to/SWE-bench scripts/regen-swe-logs.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
suites=$root/fixtures/swe-logs/suites
out=$root/fixtures/swe-logs/logs
py8=${PY_PYTEST8:-$root/.venv-grade/bin/python}
py9=${PY_PYTEST9:-$root/.venv-grade-pt9/bin/python}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run NAME DIR COMMAND...: the command's output between the markers, then its exit code (as
# swebench 5.x's record_test_exit_code prints it); paths in the log are relative to DIR
run() {
  local name=$1 dir=$2
  shift 2
  local code=0
  {
    echo '>>>>> Start Test Output'
    (cd "$dir" && "$@") 2>&1 || code=$?
    echo '>>>>> End Test Output'
    echo ">>>>> Test Exit Code: $code"
  } > "$out/$name.log"
  # the temp dir and the interpreter's location differ between machines: keep the logs stable
  sed -i -e "s#$work#/testbed#g" -e "s#$root#/polar#g" -e 's/ in [0-9.]*s\b/ in 0.01s/' \
    -e 's/^\(platform linux -- Python [0-9.]*\).*/\1/' -e 's/\[[0-9.]*s\]/[0.01s]/' \
    -e 's/^\(Ran [0-9]* tests\? in \)[0-9.]*s/\10.001s/' -e 's/^\(random seed: *\)[0-9]*/\1 0/' \
    -e 's/^\(hash randomization: on (PYTHONHASHSEED=\)[0-9]*)/\10)/' \
    -e 's/^\(executable: *\).*/\1python/' -e 's/^\(architecture: *\).*/\164-bit/' \
    -e 's/^\(cache: *\).*/\1no/' -e 's/^\(ground types: *\).*/\1python/' \
    -e 's/^\(numpy: *\).*/\1None/' -e 's/, in [0-9.]* seconds/, in 0.01 seconds/' "$out/$name.log"
}

cp -r "$suites/pytest" "$work/pt" && cp -r "$suites/pytest-collect" "$work/ptc" && cp -r "$suites/pytest-hang" "$work/pth"
export PYTHONDONTWRITEBYTECODE=1 PYTHONHASHSEED=0 NO_COLOR=1
for v in 8 9; do
  py=$py8
  [ "$v" = 9 ] && py=$py9
  # swebench 4.1 TEST_PYTEST (most repos), TEST_SEABORN, TEST_ASTROPY_PYTEST (old astropy)
  run "pytest$v-ra" "$work/pt" "$py" -m pytest -p no:cacheprovider -rA test_ids.py test_outcomes.py
  run "pytest$v-seaborn" "$work/pt" "$py" -m pytest -p no:cacheprovider --no-header -rA test_outcomes.py test_ids.py
  run "pytest$v-astropy-vv" "$work/pt" "$py" -m pytest -p no:cacheprovider -rA -vv -o console_output_style=classic --tb=no test_ids.py test_outcomes.py
  run "pytest$v-collect-error" "$work/ptc" "$py" -m pytest -p no:cacheprovider -rA test_broken.py test_fine.py
done
# colour on: the escapes pytest_v2 removes (astropy, sklearn, sphinx logs carry them on some images)
run pytest8-color "$work/pt" env -u NO_COLOR "$py8" -m pytest -p no:cacheprovider -rA --color=yes test_outcomes.py
# killed mid-run (a test timeout): no summary, no end of the progress line
run pytest8-killed "$work/pth" timeout -s KILL 5 "$py8" -u -m pytest -p no:cacheprovider -rA -v test_hang.py

cp -r "$suites/django" "$work/dj"
run django-runner "$work/dj" env DJANGO_SETTINGS_MODULE=settings PYTHONPATH=. "$py8" -m django test --verbosity 2 --parallel 1 gradeapp.tests

mkdir -p "$work/sy/sympy/fixture/tests" && cp "$suites/sympy/test_fixture.py" "$work/sy/sympy/fixture/tests/"
# sympy's bin/test builds exactly this reporter and runner (sympy/testing/runtests.py _test) but only
# over files under the sympy package; the fixture file is handed to the same objects directly
run sympy-runner "$work/sy" "$py8" -c '
import sys
from sympy.testing.runtests import PyTestReporter, SymPyTests
r = PyTestReporter(verbose=True, tb="short", colors=False)
t = SymPyTests(r, None, False, 0)
import os
t._root_dir = os.getcwd()
r.root_dir(os.getcwd())
t._testfiles.append(os.path.join(os.getcwd(), "sympy/fixture/tests/test_fixture.py"))
sys.exit(int(not t.test()))
'

if [ -n "${SWEBENCH_SRC:-}" ]; then
  "$py8" "$root/scripts/swe-expected.py" "$SWEBENCH_SRC" "$out"
fi
ls -l "$out"
