import assert from 'node:assert/strict';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { regradeRun } from '../../../src/eval/regrade.ts';
import { loadDataset } from '../../../src/rollout/dataset.ts';
import { tempDir } from '../../support/temp.ts';
import { fixtures, localEval, MINI, polar } from '../rollout/run/helpers.ts';

before(() => fixtures());

const readJsonl = (p: string) =>
  readFileSync(p, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));

test('polar eval --regrade grades the logs of a run again, in place', async () => {
  const out = join(tempDir('polar-regrade-'), 'run');
  const ids = 'polar-fixtures__jsutil-5,polar-fixtures__qs-lite-7';
  const run = localEval('gold', out, ['--instances', ids, '-q']);
  assert.equal(run.code, 0, run.stderr);
  const before = readJsonl(join(out, 'results.jsonl'));
  assert.deepEqual(
    before.map((r) => r.status),
    ['resolved', 'resolved'],
  );
  // a run graded by an older, wrong parser: its line says unresolved although the log shows a pass
  const wrong = before.map((r, i) =>
    i === 0 ? { ...r, status: 'unresolved', resolved: false, reward: 0 } : r,
  );
  writeFileSync(join(out, 'results.jsonl'), wrong.map((r) => `${JSON.stringify(r)}\n`).join(''));
  // and a log whose content says a FAIL_TO_PASS test failed, from a run without the integrity layers'
  // record (graded before them): the log decides
  const second = join(out, 'logs', `${before[1].instance_id}__s0.test.log`);
  writeFileSync(second, readFileSync(second, 'utf8').replace(/^ok (\d+) - /gm, 'not ok $1 - '));
  rmSync(join(out, 'logs', `${before[1].instance_id}__s0.integrity.json`));
  // the first one's log says so too, but its run saved the runner's report: the report decides
  const first = join(out, 'logs', `${before[0].instance_id}__s0.test.log`);
  writeFileSync(first, readFileSync(first, 'utf8').replace(/^ok (\d+) - /gm, 'not ok $1 - '));

  const instances = await loadDataset(MINI);
  const outcome = await regradeRun({ out, instances, dataset: MINI });
  assert.equal(outcome.regraded, 2);
  assert.equal(outcome.changed, 2);
  const after = readJsonl(join(out, 'results.jsonl'));
  assert.deepEqual(
    after.map((r) => r.status),
    ['resolved', 'unresolved'],
  );
  assert.match(after[1].reason, /FAIL_TO_PASS failed/);
  assert.ok(after.every((r) => typeof r.regraded_at === 'string'));
  const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8'));
  assert.equal(report.counts.resolved, 1);
  assert.equal(report.pass_at_1.mean, 0.5);
  assert.equal(report.agent, 'gold');
  // rows without an eval_script are graded by the v4.1.0 rules
  assert.deepEqual(report.official_versions, { '4.1': 2 });

  // through the CLI flag: idempotent
  const cli = polar(['eval', '--dataset', MINI, '--regrade', '--out', out, '--json', '-q']);
  assert.equal(cli.code, 0, cli.stderr);
  assert.equal(JSON.parse(cli.stdout).counts.resolved, 1);
  const none = polar(['eval', '--dataset', MINI, '--regrade', '--out', join(out, 'nope'), '-q']);
  assert.equal(none.code, 2);
  assert.match(none.stderr, /no results.jsonl/);
});

test('--regrade: a log that cannot be graded is an error with no reward (null), never a 0', async () => {
  const out = join(tempDir('polar-regrade-'), 'run');
  const id = 'polar-fixtures__jsutil-5';
  const run = localEval('gold', out, ['--instances', id, '-q']);
  assert.equal(run.code, 0, run.stderr);
  // the row now names a log parser polar does not know: its log cannot be read
  const instances = (await loadDataset(MINI)).map((i) =>
    i.instance_id === id ? { ...i, eval_script: 'true', log_parser: 'no-such-parser' } : i,
  );
  const outcome = await regradeRun({ out, instances, dataset: MINI });
  assert.ok(outcome.regraded >= 1);
  const line = readJsonl(join(out, 'results.jsonl')).find((r) => r.instance_id === id);
  assert.equal(line.status, 'error');
  assert.equal(line.reward, null);
  assert.match(line.reason, /unknown log parser "no-such-parser"/);
});
