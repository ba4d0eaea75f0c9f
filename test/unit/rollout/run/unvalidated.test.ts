/**
 * A sample is never scored from an environment whose validation could not finish (issue 46 item 2): the
 * validation's own failure (the verdict could not be read or written: a read-only or full cache) made
 * polar run the sample unvalidated and score it; now the sample is an `error` naming why (retried by
 * --resume). A build that fails stays the sample's to report (its prepare meets it again).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { GoldAgent } from '../../../../src/rollout/agents.ts';
import { loadDataset, type SweInstance } from '../../../../src/rollout/dataset.ts';
import { EnvBuildError } from '../../../../src/rollout/env/types.ts';
import { runEval } from '../../../../src/rollout/run/run.ts';
import type { EnvValidation } from '../../../../src/rollout/validate.ts';
import { tempDir } from '../../../support/temp.ts';
import { fixtures, localEvalOptions, MINI } from './helpers.ts';

const tmp = tempDir('polar-unvalidated-');
let instance: SweInstance;

before(async () => {
  fixtures();
  [instance] = (await loadDataset(MINI)).filter((i) => i.instance_id === 'polar-fixtures__jsutil-5') as [
    SweInstance,
  ];
});

/** a validation whose check fails with `error` */
const failing = (error: Error) => ({ problem: () => Promise.reject(error) }) as unknown as EnvValidation;

test('a validation that cannot finish makes the sample an error, not a score', async () => {
  const { results } = await runEval(
    localEvalOptions([instance], new GoldAgent(), join(tmp, 'erofs'), {
      validation: failing(new Error("EROFS: read-only file system, open '/cache/env/polar-validation.json'")),
    }),
  );
  assert.equal(results[0]?.status, 'error');
  assert.equal(results[0]?.reward, null);
  assert.match(
    String(results[0]?.reason),
    /^environment validation could not finish: EROFS: read-only file system/,
  );
});

test("a build that fails in validation stays the sample's to report: it runs on, and meets it in its own prepare", async () => {
  const { results } = await runEval(
    localEvalOptions([instance], new GoldAgent(), join(tmp, 'build'), {
      validation: failing(new EnvBuildError('pip install failed', 'log')),
    }),
  );
  // the fixture needs no built environment: the sample's own path succeeds
  assert.equal(results[0]?.status, 'resolved', String(results[0]?.reason));
});
