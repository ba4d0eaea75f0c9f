import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { gradingRecordSchema } from '../../../../src/capture/record.ts';
import type { RunCapture } from '../../../../src/rollout/agents.ts';
import { loadDataset } from '../../../../src/rollout/dataset.ts';
import { gradePatch } from '../../../../src/rollout/grade.ts';
import { runEval } from '../../../../src/rollout/run/run.ts';
import { LocalRuntime } from '../../../../src/rollout/runtime/local.ts';
import { standInAgent } from '../../../support/stand-in-agent.ts';
import { tempDir } from '../../../support/temp.ts';
import {
  fixtures,
  gitHead,
  localEval,
  localEvalOptions,
  MINI,
  makePatch,
  miniRows,
  polar,
  pytestSkip,
  REPOS,
  runnableIds,
} from './helpers.ts';

const tmp = tempDir('polar-evaltest-');
const ids = () => runnableIds().join(',');
const readJsonl = (p: string) =>
  readFileSync(p, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));

before(() => fixtures());

test('fixture repos are built with the base_commit the dataset names', () => {
  for (const row of miniRows()) assert.equal(gitHead(join(REPOS, String(row.repo))), row.base_commit);
});

test('--agent gold resolves 100% (exit 0, official predictions format)', () => {
  const out = join(tmp, 'gold');
  const r = localEval('gold', out, [
    '--concurrency',
    '4',
    '--instances',
    ids(),
    '--json',
    '--fail-under',
    '1',
  ]);
  assert.equal(r.code, 0, r.stderr);
  const report = JSON.parse(r.stdout);
  assert.equal(report.pass_at_1.mean, 1);
  assert.equal(report.counts.resolved, runnableIds().length);
  assert.match(r.stderr, /unsandboxed, with your rights/);
  const preds = readJsonl(join(out, 'predictions.jsonl'));
  assert.deepEqual(Object.keys(preds[0]).sort(), ['instance_id', 'model_name_or_path', 'model_patch']);
  assert.ok(preds.every((p) => p.model_patch.startsWith('diff --git')));
  const results = readJsonl(join(out, 'results.jsonl'));
  assert.ok(results.every((x) => x.resolved === true && x.reward === 1 && x.reason === null));
});

test('--agent empty: 0%, empty patches, --fail-under exits 5', () => {
  const out = join(tmp, 'empty');
  const r = localEval('empty', out, ['--json', '--fail-under', '0.25', '--samples', '2']);
  assert.equal(r.code, 5, r.stderr);
  const report = JSON.parse(r.stdout);
  assert.equal(report.pass_at_1.mean, 0);
  assert.equal(report.counts.empty_patch, 16);
  assert.deepEqual(report.pass_at_1.per_sample, [0, 0]);
});

test(
  'every FAIL_TO_PASS fails before the fix (a no-op patch), and PASS_TO_PASS pass',
  { skip: pytestSkip() },
  async () => {
    const runtime = new LocalRuntime({ reposDir: REPOS });
    for (const instance of await loadDataset(MINI)) {
      const noop =
        'diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n' +
        '-# ' +
        instance.repo.split('/')[1] +
        '\n+# ' +
        instance.repo.split('/')[1] +
        ' (edited)\n';
      const g = await gradePatch(runtime, instance, noop, { testTimeoutMs: 60_000 });
      assert.equal(g.status, 'unresolved', `${instance.instance_id}: ${g.reason} ${g.log.slice(-500)}`);
      assert.deepEqual(g.fail_to_pass.failed, instance.FAIL_TO_PASS, instance.instance_id);
      assert.deepEqual(g.pass_to_pass.failed, [], instance.instance_id);
    }
  },
);

test('predictions: a P2P-breaking patch, a patch that does not apply, and a hanging test', async () => {
  const rows = miniRows();
  const js5 = rows.find((r) => r.instance_id === 'polar-fixtures__jsutil-5')!;
  const js6 = rows.find((r) => r.instance_id === 'polar-fixtures__jsutil-6')!;
  const qs7 = rows.find((r) => r.instance_id === 'polar-fixtures__qs-lite-7')!;
  // fixes the tail but breaks "chunk rejects a bad size"
  const breakingPatch = makePatch('polar-fixtures/jsutil', {
    'src/chunk.js': (t) =>
      t
        .replace('throw new RangeError', 'throw new TypeError')
        .replace('i + size <= items.length', 'i < items.length'),
  });
  assert.match(breakingPatch, /TypeError/);
  const hanging = String(js6.patch).replace(
    'for (let i = start; step > 0 ? i < stop : i > stop; i += step)',
    // a real hang: a busy loop that allocates nothing (an endless push would die of OOM instead,
    // sooner or later than the timeout depending on the machine)
    'for (;;) {} for (let i = start; step > 0 ? i < stop : i > stop; i += step)',
  );
  const preds = [
    { instance_id: js5.instance_id, model_name_or_path: 'm', model_patch: breakingPatch },
    { instance_id: js6.instance_id, model_name_or_path: 'm', model_patch: hanging },
    {
      instance_id: qs7.instance_id,
      model_name_or_path: 'm',
      model_patch: String(qs7.patch).replaceAll('decodeURIComponent(text)', 'decodeURIComponent(txt)'),
    },
  ];
  const file = join(tmp, 'preds.jsonl');
  writeFileSync(file, preds.map((p) => JSON.stringify(p)).join('\n'));
  // Two runs: only the hanging test gets the short --test-timeout. Under it, the other samples' real
  // tests would time out too on a loaded machine (a node test run took over 3 s at load 30), and their
  // verdicts would then depend on the machine, not on the patch.
  const run = (out: string, instances: string[], extra: string[]) => {
    const r = localEval('predictions', out, [
      '--predictions',
      file,
      '--instances',
      instances.join(','),
      '--json',
      ...extra,
    ]);
    assert.equal(r.code, 0, r.stderr);
    return new Map(readJsonl(join(out, 'results.jsonl')).map((x) => [x.instance_id, x]));
  };
  const results = run(join(tmp, 'preds-out'), [String(js5.instance_id), String(qs7.instance_id)], []);
  const a = results.get(js5.instance_id)!;
  assert.equal(a.status, 'unresolved');
  assert.deepEqual(a.pass_to_pass.failed, ['chunk rejects a bad size']);
  assert.match(a.reason, /PASS_TO_PASS/);
  const c = results.get(qs7.instance_id)!;
  assert.equal(c.status, 'unresolved');
  assert.equal(c.reason, 'patch does not apply');
  // a test that never ends is cut at --test-timeout: unresolved, not an error (it hangs on any machine)
  const hung = run(join(tmp, 'preds-hang'), [String(js6.instance_id)], ['--test-timeout', '3']);
  const b = hung.get(js6.instance_id)!;
  assert.equal(b.status, 'unresolved');
  assert.match(b.reason, /timed out after 3s/);
});

test('--resume skips graded samples; a harness on local needs --allow-unsandboxed', () => {
  const out = join(tmp, 'resume');
  const first = localEval('gold', out, ['--instances', 'polar-fixtures__jsutil-5', '-q']);
  assert.equal(first.code, 0, first.stderr);
  const second = localEval('gold', out, [
    '--instances',
    'polar-fixtures__jsutil-5,polar-fixtures__jsutil-6',
    '--resume',
    '--json',
  ]);
  assert.equal(second.code, 0, second.stderr);
  assert.match(second.stderr, /1 sample already graded, 1 to run/);
  assert.equal(readJsonl(join(out, 'results.jsonl')).length, 2);
  assert.equal(JSON.parse(second.stdout).counts.resolved, 2);
  const refused = polar([
    'eval',
    '--dataset',
    MINI,
    '--harness',
    'pi',
    '--model',
    'm',
    '--runtime',
    'local',
    '--out',
    join(tmp, 'refused'),
  ]);
  assert.equal(refused.code, 2);
  assert.match(refused.stderr, /--allow-unsandboxed/);
});

test('--resume after a crash mid-line: the cut result runs again and results.jsonl stays whole', () => {
  const out = join(tmp, 'resume-cut');
  const ids = 'polar-fixtures__jsutil-5,polar-fixtures__jsutil-6';
  const first = localEval('gold', out, ['--instances', ids, '-q']);
  assert.equal(first.code, 0, first.stderr);
  const path = join(out, 'results.jsonl');
  const text = readFileSync(path, 'utf8');
  // the second line cut halfway, as a killed polar leaves it
  const firstEnd = text.indexOf('\n') + 1;
  writeFileSync(path, text.slice(0, firstEnd + Math.floor((text.length - firstEnd) / 2)));
  const second = localEval('gold', out, ['--instances', ids, '--resume', '--json']);
  assert.equal(second.code, 0, second.stderr);
  assert.match(second.stderr, /1 sample already graded, 1 to run/);
  const lines = readJsonl(path);
  assert.deepEqual(lines.map((l) => l.instance_id).sort(), ids.split(','));
  assert.equal(JSON.parse(second.stdout).counts.resolved, 2);
});

test('harness agent seam: runCapture runs in the instance env, the capture gets a grading record', async () => {
  const [instance] = (await loadDataset(MINI)).filter((i) => i.instance_id === 'polar-fixtures__jsutil-5');
  const seen: Array<{ cwd: string; taskId?: string; sample?: number }> = [];
  // stands in for src/capture/run.ts: writes a session record and makes the gold change in cwd
  const fake: RunCapture = async (o) => {
    seen.push({ cwd: o.cwd, taskId: o.taskId, sample: o.sample });
    writeFileSync(o.output, `${JSON.stringify({ v: 1, type: 'session', id: 'sess-1' })}\n`);
    const gold = String(instance!.patch);
    const { execFileSync } = await import('node:child_process');
    execFileSync('git', ['apply', '-'], { cwd: o.cwd, input: gold });
    writeFileSync(join(o.cwd, '.pi-junk'), 'x');
    return {
      sessionId: 'sess-1',
      exitCode: 0,
      signal: null,
      status: 'completed',
      calls: 3,
      errors: 0,
      clientClosed: 0,
      cut: 0,
      lost: 0,
      output: o.output,
    };
  };
  const agent = standInAgent(fake);
  const out = join(tmp, 'harness');
  const { report, results } = await runEval(localEvalOptions([instance!], agent, out));
  assert.equal(report.counts.resolved, 1);
  assert.equal(seen[0]!.taskId, instance!.instance_id);
  assert.match(seen[0]!.cwd, /polar-eval-/);
  const capture = String(results[0]!.capture);
  const lines = readJsonl(capture);
  const grading = gradingRecordSchema.parse(lines.at(-1));
  assert.equal(grading.resolved, true);
  assert.equal(grading.reward, 1);
  assert.equal(grading.session, 'sess-1');
  assert.ok(readdirSync(join(out, 'captures')).length === 1);
});

test('a cancelled sample (polar loop --overdue drop) ends its grading: the hanging test run is cut at once', async () => {
  const js6 = miniRows().find((r) => r.instance_id === 'polar-fixtures__jsutil-6')!;
  const hanging = String(js6.patch).replace(
    'for (let i = start; step > 0 ? i < stop : i > stop; i += step)',
    'for (;;) {} for (let i = start; step > 0 ? i < stop : i > stop; i += step)',
  );
  const instance = (await loadDataset(MINI)).find((i) => i.instance_id === js6.instance_id)!;
  const cancel = new AbortController();
  const t0 = Date.now();
  // cancelled 2 s in: the tests are running by then on any machine, or are cancelled before they start
  setTimeout(() => cancel.abort(new Error('cancelled')), 2000);
  const g = await gradePatch(new LocalRuntime({ reposDir: REPOS }), instance, hanging, {
    testTimeoutMs: 120_000,
    signal: cancel.signal,
  });
  assert.equal(g.status, 'error');
  assert.equal(g.reason, 'grading cancelled');
  // before the cancel, the run would have gone on to the 120 s test timeout
  assert.ok(Date.now() - t0 < 60_000, `grading ended ${Date.now() - t0} ms after it started`);
});
