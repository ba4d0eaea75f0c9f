/** report.json read back by the cluster paths: validated with reportSchema, a bad file names its field. */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { InputError } from '../../../../src/errors.ts';
import { readRunReport } from '../../../../src/rollout/run/read-report.ts';
import { buildReport } from '../../../../src/rollout/run/report.ts';
import { tempDir } from '../../../support/temp.ts';

test('a report.json of this polar reads back; a bad one is an InputError naming the file and field', async () => {
  const dir = tempDir('polar-report-');
  const good = join(dir, 'good.json');
  const report = buildReport([], {
    dataset: 'd',
    agent: 'gold',
    model: 'gold',
    runtime: 'local',
    instances: [],
    samples: 1,
  });
  await writeFile(good, JSON.stringify(report));
  assert.deepEqual(readRunReport(good), JSON.parse(JSON.stringify(report)));

  const bad = join(dir, 'bad.json');
  await writeFile(bad, JSON.stringify({ ...report, total: 'four' }));
  assert.throws(
    () => readRunReport(bad),
    (e: unknown) => e instanceof InputError && e.file === bad && e.field === 'total',
  );
  const cut = join(dir, 'cut.json');
  await writeFile(cut, '{"dataset": ');
  assert.throws(
    () => readRunReport(cut, 'run it again'),
    (e: unknown) => e instanceof InputError && /not valid JSON/.test(e.message) && e.hint === 'run it again',
  );
});
