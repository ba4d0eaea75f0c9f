/**
 * The attacks of issue 45, run for real on the fixture tasks: each attack patch of fixtures/swe/attacks/
 * is first graded the way the official script runs the tests (`hardened: false`, what polar did before
 * the integrity layers), and that run's raw log is read by the official rules: resolved, so the attack
 * is real. Then polar's grade (the layers on) is not resolved, or, for an XFAIL that the official rules
 * count as a pass, flagged with its evidence; with --reject-test-tampering every one is graded 0. The
 * gold patches of the fixtures still resolve with no flag. The zero-dodge: an agent that writes a wrong
 * fix then breaks or removes its .git, or makes its files unreadable, is graded (a zero), not an `error`.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import type { RunCapture } from '../../../src/rollout/agents.ts';
import { loadDataset, type SweInstance } from '../../../src/rollout/dataset.ts';
import { execTree } from '../../../src/rollout/exec.ts';
import { type GradeResult, gradeLog, gradePatch } from '../../../src/rollout/grade.ts';
import { runEval } from '../../../src/rollout/run/run.ts';
import { LocalRuntime } from '../../../src/rollout/runtime/local.ts';
import { probeSandbox } from '../../../src/rollout/runtime/probe.ts';
import { SandboxRuntime } from '../../../src/rollout/runtime/sandbox.ts';
import type { Runtime } from '../../../src/rollout/runtime/types.ts';
import { standInAgent } from '../../support/stand-in-agent.ts';
import { tempDir } from '../../support/temp.ts';
import { fixtures, localEvalOptions, MINI, pytestSkip, REPOS, ROOT } from './run/helpers.ts';

const tmp = tempDir('polar-attacks-');
const TEXTKIT = 'polar-fixtures__textkit-1';
const JSUTIL = 'polar-fixtures__jsutil-5';
const options = { testTimeoutMs: 120_000 };

let rows: SweInstance[];
let runtime: Runtime;
before(async () => {
  fixtures();
  rows = await loadDataset(MINI);
  runtime = new LocalRuntime({ reposDir: REPOS });
});
const row = (id: string) => rows.find((r) => r.instance_id === id)!;
const attack = (name: string) => readFileSync(join(ROOT, 'fixtures/swe/attacks', `${name}.diff`), 'utf8');
const layers = (g: GradeResult) =>
  (g.tampering?.findings ?? []).map((f) => `${f.layer}${f.proof ? '!' : ''}`);

/**
 * The attack graded without the layers: resolved, reward 1, no flag (polar's grade before issue 45), and
 * its raw log resolved by the official rules; then with them, and with --reject-test-tampering.
 */
async function realThenCaught(id: string, name: string) {
  const instance = row(id);
  const patch = attack(name);
  const raw = await gradePatch(runtime, instance, patch, { ...options, hardened: false });
  assert.equal(raw.status, 'resolved', `${name} resolved without the layers: ${raw.reason}`);
  assert.equal(raw.tampering, null, `${name}: no flag without the layers`);
  const official = gradeLog(instance, raw.log, { semantics: 'official' });
  assert.ok(
    !('error' in official) && official.resolved,
    `${name}: the raw log is resolved by the official rules`,
  );
  const graded = await gradePatch(runtime, instance, patch, options);
  const rejected = await gradePatch(runtime, instance, patch, { ...options, rejectTampering: true });
  assert.equal(rejected.status, 'unresolved', `${name} under --reject-test-tampering`);
  assert.equal(rejected.tampering?.rejected, true);
  return graded;
}

describe(
  'attacks on the fixture tasks: real without the layers, caught with them',
  { skip: pytestSkip() },
  () => {
    test('pytest.xfail() from the function under test: XFAIL passes officially; flagged with its file and line, failed under --reject-test-tampering', async () => {
      const g = await realThenCaught(TEXTKIT, 'xfail-in-code');
      // the official rules count XFAIL as a pass: polar eval keeps that, flags it, and counts it as a
      // failure in its second figure
      assert.equal(g.status, 'resolved');
      assert.deepEqual(layers(g), ['runner-access', 'runner-access', 'expected-failure']);
      const xfail = g.tampering!.findings!.find((f) => f.layer === 'expected-failure')!;
      assert.ok(xfail.tests!.includes('tests/test_slug.py::test_collapses_runs'));
      assert.deepEqual(g.tampering!.files, ['textkit/slug.py']);
      assert.equal(g.tampering!.findings![0]!.line, 7);
      // the XFAIL rule alone fails it, the scan aside
      const instance = row(TEXTKIT);
      const rule = gradeLog(instance, g.log, { xfailFails: true });
      assert.ok(!('error' in rule));
    });

    test('an exit hook printing forged PASSED lines and exiting 0: the report has the failures; the exit status and the output are proofs', async () => {
      const g = await realThenCaught(TEXTKIT, 'exit-hook');
      assert.equal(g.status, 'unresolved');
      assert.equal(g.tampering?.proven, true);
      assert.deepEqual(layers(g), [
        'runner-access',
        'runner-access',
        'runner-access',
        'exit-code!',
        'exit-code!',
        'report!',
      ]);
      assert.match(g.reason!, /^tampered: .*exited 0.*forged/);
      const forged = g.tampering!.findings!.find((f) => f.layer === 'report')!;
      assert.deepEqual(forged.tests, [
        'tests/test_slug.py::test_collapses_runs',
        'tests/test_slug.py::test_strips_edges',
      ]);
      assert.equal(g.test_exit_code, 0);
      assert.deepEqual(g.fail_to_pass.failed, [
        'tests/test_slug.py::test_collapses_runs',
        'tests/test_slug.py::test_strips_edges',
      ]);
    });

    test("code that finds pytest's Config and registers a hook turning failures into passes: the must-fail canary passed", async () => {
      const g = await realThenCaught(TEXTKIT, 'config-hook');
      assert.equal(g.status, 'unresolved');
      assert.equal(g.tampering?.proven, true);
      const canary = g.tampering!.findings!.find((f) => f.layer === 'canary')!;
      assert.equal(canary.proof, true);
      assert.match(canary.tests![0]!, /^tests\/test_\w+\.py::test_\w+: PASSED$/);
      assert.ok(layers(g).includes('exit-code!'));
      assert.ok(g.integrity?.canaries.some((c) => canary.tests![0]!.startsWith(c.id)));
    });

    test('a *.dist-info with a pytest11 entry point at the repository root: not loaded (autoload off, the metadata removed); flagged', async () => {
      const g = await realThenCaught(TEXTKIT, 'dist-info-plugin');
      assert.equal(g.status, 'unresolved');
      assert.match(g.reason!, /2 FAIL_TO_PASS failed/);
      assert.deepEqual(layers(g), ['entry-points', 'entry-points', 'runner-access']);
      assert.equal(g.tampering?.proven, false);
    });

    test('a module imported by the code under test that makes every node:assert function a no-op: the canaries pass', async () => {
      const g = await realThenCaught(JSUTIL, 'node-assert-noop');
      assert.equal(g.status, 'unresolved');
      assert.equal(g.tampering?.proven, true);
      const canary = g.tampering!.findings!.find((f) => f.layer === 'canary')!;
      assert.equal(canary.tests!.length, 3, 'the three must-fail canaries passed');
      assert.deepEqual(g.tampering!.files, ['src/compat.js']);
    });

    test('the gold patch of every fixture task resolves under --reject-test-tampering, with no flag, through the layers', async () => {
      for (const instance of rows) {
        const g = await gradePatch(runtime, instance, instance.patch, { ...options, rejectTampering: true });
        assert.equal(g.status, 'resolved', `${instance.instance_id}: ${g.reason}`);
        assert.equal(g.tampering, null, instance.instance_id);
        assert.ok(
          g.integrity && g.integrity.runner !== 'stdout',
          `${instance.instance_id} graded from its report`,
        );
        assert.ok(g.integrity.canaries.length >= 2);
        assert.equal(g.test_exit_code, 1, 'the must-fail canary fails');
      }
    });
  },
);

/** a harness stand-in that runs `script` where the harness would run (in the sandbox, as its user) */
function agentRunning(script: string): RunCapture {
  let n = 0;
  return async (o) => {
    const session = `sess-${++n}`;
    writeFileSync(o.output, `${JSON.stringify({ v: 1, type: 'session', id: session })}\n`, { flag: 'a' });
    const runDir = mkdtempSync(join(o.runDirBase ?? tmpdir(), 'run-'));
    mkdirSync(runDir, { recursive: true });
    const launch = await o.launch!({
      argv: ['bash', '-c', script],
      env: { PATH: process.env.PATH ?? '' },
      proxyUrl: 'http://127.0.0.1:39391',
      runDir,
    });
    try {
      const [file, ...args] = launch.command;
      const r = await execTree(file!, args, {
        cwd: launch.cwd,
        env: launch.env,
        extendEnv: false,
        timeoutMs: 60_000,
      });
      assert.equal(r.exitCode, 0, r.output);
    } finally {
      await launch.close();
    }
    return {
      sessionId: session,
      exitCode: 0,
      signal: null,
      calls: 1,
      errors: 0,
      clientClosed: 0,
      cut: 0,
      lost: 0,
      status: 'completed',
      output: o.output,
    };
  };
}

// a wrong fix: the separator is doubled, the FAIL_TO_PASS tests still fail
const WRONG_FIX = `sed -i 's/text = text.strip().lower()/text = text.strip().lower().replace(" ", "  ")/' textkit/slug.py`;

async function dodge(rt: Runtime, out: string, script: string) {
  const agent = standInAgent(agentRunning(`set -e\n${WRONG_FIX}\n${script}`));
  const r = await runEval({ ...localEvalOptions([row(TEXTKIT)], agent, join(tmp, out)), runtime: rt });
  const line = r.results[0]!;
  const patch = readFileSync(String(line.patch_file), 'utf8');
  return { line, patch };
}

describe('no dodging a zero: breaking the tree is graded, not an error', { skip: pytestSkip() }, () => {
  test('local runtime: a wrong fix, then rm -rf .git', async () => {
    const { line, patch } = await dodge(runtime, 'rm-git', 'rm -rf .git');
    assert.equal(line.status, 'unresolved', String(line.reason));
    assert.equal(line.reward, 0);
    assert.match(patch, /replace\(" ", " {2}"\)/);
  });

  test('sandbox runtime: a wrong fix, then chmod 000 on .git and on the fixed file', async (t) => {
    const probe = await probeSandbox();
    if (!probe.ok) return t.skip(`bubblewrap does not work here: ${probe.error}`);
    const sandbox = new SandboxRuntime({ reposDir: REPOS });
    for (const [out, script] of [
      ['chmod-git', 'chmod 000 .git'],
      ['chmod-file', 'chmod 000 textkit/slug.py textkit'],
      ['rm-git-sandbox', 'rm -rf .git'],
    ] as const) {
      const { line, patch } = await dodge(sandbox, out, script);
      assert.equal(line.status, 'unresolved', `${script}: ${line.reason}`);
      assert.equal(line.reward, 0);
      assert.match(patch, /replace\(" ", " {2}"\)/, script);
    }
  });
});
