/**
 * `polar loop` publishing full weights to a running vLLM without a restart (issue 48), end to end: real Pi
 * against the vLLM stand-in started in dev mode with the disk weight-transfer backend
 * (test/support/vllm-weight-transfer.ts), the tiny Llama trained on the CPU, 2 steps, no --reload-cmd. Each
 * step's checkpoint goes in through vLLM's control plane (pause, start, update from the checkpoint folder,
 * finish with the step as the weight version, resume) on the same server; the next step's rollouts were
 * sampled by it (the stand-in says which weights answered each call) and every call record names the version
 * that sampled it (capture format 3, `weight_versions`, with its `policy_version`).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ensureFixtureRepos } from '../../scripts/swe-fixtures.ts';
import { readCapture } from '../../src/capture/reader.ts';
import type { CallRecord } from '../../src/capture/record.ts';
import { findPython } from '../../src/train/env.ts';
import { privateDirs, vllmFlags } from '../support/capture-run.ts';
import { runPolar } from '../support/cli.ts';
import { coinLoopArgs, loopEnv, standinTrainConfig, TINY_LLAMA } from '../support/coin-loop.ts';
import { startStandin } from '../support/vllm-standin.ts';

const python = await findPython(process.env.POLAR_PYTHON).catch(() => null);
const SKIP = python?.transformers ? false : 'no Python with torch and transformers (npm run setup:python)';

/** The model calls recorded under `dir` (a step's eval/captures). */
async function modelCalls(dir: string): Promise<CallRecord[]> {
  const out: CallRecord[] = [];
  for (const f of readdirSync(dir).filter((x) => x.endsWith('.jsonl'))) {
    for await (const { record } of readCapture(join(dir, f)))
      if (record.type === 'call' && record.api !== 'models') out.push(record);
  }
  return out;
}

describe('polar loop publishing to vLLM in place', { skip: SKIP }, () => {
  test('2 steps: each checkpoint loaded into the running server, the next rollouts name its version', async () => {
    ensureFixtureRepos();
    const { home, workdir } = await privateDirs();
    const standin = await startStandin({ devMode: true, weightTransfer: { backend: 'disk' } });
    try {
      const run = join(workdir, 'run');
      const policy = [
        ...vllmFlags(standin.url),
        '--train-model',
        TINY_LLAMA,
        '--train-config',
        await standinTrainConfig(workdir),
      ];
      const r = await runPolar(
        coinLoopArgs(policy, { steps: 2, tasksPerStep: 1, lr: '0.001', concurrency: 2, out: run }, [
          '--eval-every',
          '0',
          '--grade-empty-patches',
        ]),
        { cwd: workdir, env: loopEnv(home, python!.executable), extendEnv: false, timeoutMs: 500_000 },
      );
      assert.equal(r.exitCode, 0, String(r.stderr));
      const stderr = String(r.stderr);
      assert.match(stderr, /publishing: vLLM weight transfer \(disk, pause wait\)/);
      assert.match(
        stderr,
        /publishing: vLLM took .*step-1.* in place \(disk, pause wait\) in [\d.]+ s, weight version 1/,
      );

      const engine = standin.engine!;
      const publish = [
        '/pause',
        '/start_weight_update',
        '/update_weights',
        '/finish_weight_update',
        '/resume',
      ];
      assert.deepEqual(
        engine.log.filter((l) => l.startsWith('POST')).map((l) => l.slice('POST '.length).split('?')[0]),
        ['/init_weight_transfer_engine', '/update_weight_version', ...publish, ...publish],
        'the server was labelled, then updated in place after each step: never restarted',
      );
      const checkpoint = (n: number) =>
        JSON.parse(readFileSync(join(run, `step-${n}`, 'step.json'), 'utf8')).checkpoint as string;
      assert.equal(engine.weights, checkpoint(2), 'the server serves the last step');
      assert.equal(engine.label, '2');

      for (const [n, version] of [
        [1, '0'],
        [2, '1'],
      ] as const) {
        const calls = await modelCalls(join(run, `step-${n}`, 'eval', 'captures'));
        assert.ok(calls.length >= 2, `step ${n} made model calls`);
        for (const c of calls) {
          assert.deepEqual(c.weight_versions, { source: 'polar', versions: [version] }, `step ${n}: ${c.id}`);
          assert.equal(c.policy_version, Number(version));
          assert.equal(c.v, 3);
        }
      }
      // what the server says: every call it answered under version 1 was the step-1 checkpoint's
      const underOne = standin.calls.filter((c) => c.weightVersions?.[0] === '1');
      assert.ok(underOne.length >= 2);
      for (const c of underOne) assert.equal(c.weights, checkpoint(1));
    } finally {
      await standin.close();
    }
  });
});
