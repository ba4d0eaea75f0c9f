/**
 * The eval script of a test run without the integrity layers, as the official harness writes it:
 * polar's own for rows without an eval_script (set-up, reset the test patch's files, apply it, markers,
 * the tests, the exit code), or a 5.x row's eval_script with the exit code captured. Rows without an
 * eval_script are graded through the layers by default (src/rollout/integrity/harden.ts); this is what
 * runs with `hardened: false` and for 5.x rows.
 */
import type { SweInstance } from './dataset.ts';
import { shellQuote } from './patch.ts';
import { END_MARKER, START_MARKER, TEST_EXIT_CODE } from './resolve.ts';
import type { InstanceEnv } from './runtime/types.ts';
import { diffFiles, type TestSpec, testDirectives } from './specs.ts';

/**
 * The eval script for rows without a 5.x eval_script: set-up, reset tests, apply test_patch, markers,
 * tests, the test command's exit code after the end marker, reset. Unlike the official script, a
 * test_patch that does not apply stops it (exit 97): polar reports that as an error of the dataset or
 * environment instead of grading the tests of the unpatched files. Test files are quoted (a path with
 * spaces stays one argument; the official script joins them unquoted).
 */
export function buildEvalScript(
  instance: SweInstance,
  testPatchFile: string,
  testCmd: string,
  directives: string[],
  setup: string[] = [],
): string {
  const base = shellQuote(instance.base_commit);
  const files = diffFiles(instance.test_patch).map(shellQuote).join(' ');
  const reset = files
    ? `existing=$(git ls-tree -r --name-only ${base} -- ${files}); [ -z "$existing" ] || git checkout -q ${base} -- $existing`
    : 'true';
  return [
    'set -uo pipefail',
    ...setup,
    reset,
    `git apply --verbose ${shellQuote(testPatchFile)} || { echo ">>>>> test_patch failed to apply"; exit 97; }`,
    `echo ${shellQuote(START_MARKER)}`,
    `${testCmd} ${directives.map(shellQuote).join(' ')}`,
    'code=$?',
    `echo ${shellQuote(END_MARKER)}`,
    `echo "${TEST_EXIT_CODE}: $code"`,
    reset,
  ].join('\n');
}

/**
 * A 5.x row's eval_script as the harness runs it (v5.0.1 harness/utils.py parse_eval_script and
 * record_test_exit_code, types.py TestSpec.eval_script): shebang and `set -uxo pipefail` lines dropped
 * and put back in front, and the test command's `$?` saved before the first line naming the end
 * marker and echoed after it. A script without that line is left as it is.
 */
export function withExitCodeCapture(evalScript: string): string {
  const lines = evalScript
    .trim()
    .split('\n')
    .filter((l) => l !== '#!/bin/bash' && l !== 'set -uxo pipefail');
  const at = lines.findIndex((l) => l.includes(END_MARKER));
  const body =
    at === -1
      ? lines
      : [
          ...lines.slice(0, at),
          'SWEBENCH_TEST_EXIT_CODE=$?',
          lines[at]!,
          `echo "${TEST_EXIT_CODE}: $SWEBENCH_TEST_EXIT_CODE"`,
          ...lines.slice(at + 1),
        ];
  return `${['#!/bin/bash', 'set -uxo pipefail', ...body].join('\n')}\n`;
}

/** The script that runs the tests: the row's 5.x eval_script, or polar's from the spec. */
export async function evalScriptFor(
  instance: SweInstance,
  spec: TestSpec | null,
  env: InstanceEnv,
): Promise<string> {
  if (instance.eval_script || !spec) return withExitCodeCapture(instance.eval_script ?? '');
  const testPatchFile = `${env.scratch}/polar-test.diff`;
  await env.writeFile(
    testPatchFile,
    instance.test_patch.endsWith('\n') ? instance.test_patch : `${instance.test_patch}\n`,
  );
  return buildEvalScript(
    instance,
    testPatchFile,
    spec.testCmd,
    testDirectives(instance.test_patch, spec.directives),
    env.envSetup?.(spec.setup) ?? [],
  );
}
