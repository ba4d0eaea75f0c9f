/**
 * A run cancelled alone (EvalOptions.cancel; polar loop --overdue drop cancels one group's run so): the
 * harness of a running sample is handed the signal (src/capture/run.ts ends its process group with it),
 * the sample it cut is neither graded nor recorded (no reward, its capture set aside as interrupted), and
 * the run says it was interrupted. A stand-in runCapture plays the harness.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import type { RunCapture } from '../../../../src/rollout/agents.ts';
import { loadDataset } from '../../../../src/rollout/dataset.ts';
import { sampleKey } from '../../../../src/rollout/run/results.ts';
import { runEval } from '../../../../src/rollout/run/run.ts';
import { standInAgent } from '../../../support/stand-in-agent.ts';
import { tempDir } from '../../../support/temp.ts';
import { fixtures, localEvalOptions, MINI } from './helpers.ts';

before(() => fixtures());

test('a cancelled run: the cut sample is handed the signal, never graded nor recorded', async () => {
  const [instance] = (await loadDataset(MINI)).filter((i) => i.instance_id === 'polar-fixtures__jsutil-5');
  const cancel = new AbortController();
  const signals: Array<AbortSignal | undefined> = [];
  const fake: RunCapture = async (o) => {
    signals.push(o.signal);
    writeFileSync(o.output, `${JSON.stringify({ v: 1, type: 'session', id: `sess-${o.sample}` })}\n`);
    const ended = { exitCode: 0, calls: 1, errors: 0, clientClosed: 0, cut: 0, lost: 0, output: o.output };
    // (without the signal the stand-in would wait forever: it ends at once, and the checks below fail)
    if (o.sample === 1 && o.signal) {
      // the harness of sample 1 runs until the run is cancelled, which happens while it runs
      const stopped = new Promise<void>((resolve) => o.signal?.addEventListener('abort', () => resolve()));
      cancel.abort(new Error('overdue'));
      await stopped;
      return { ...ended, sessionId: 'sess-1', exitCode: null, signal: 'SIGTERM', status: 'interrupted' };
    }
    return { ...ended, sessionId: `sess-${o.sample}`, signal: null, status: 'completed' };
  };
  const agent = standInAgent(fake);
  const out = join(tempDir('polar-eval-cancel-'), 'run');
  const r = await runEval(
    localEvalOptions([instance!], agent, out, { samples: 2, concurrency: 2, cancel: cancel.signal }),
  );
  assert.equal(r.interrupted, true);
  assert.ok(signals.length >= 1 && signals.every((s) => s === cancel.signal), 'each harness got the signal');
  const lines = readFileSync(join(out, 'results.jsonl'), 'utf8').split('\n').filter(Boolean);
  assert.ok(
    !lines.some((l) => JSON.parse(l).sample === 1),
    'the cut sample is not recorded (no reward, no score)',
  );
  assert.ok(!r.results.some((x) => x.sample === 1));
  const capture = join(out, 'captures', `${sampleKey(instance!.instance_id, 1)}.jsonl`);
  assert.ok(!existsSync(capture) && existsSync(`${capture}.interrupted`), 'its capture set aside');
});
