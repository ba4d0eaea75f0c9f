/**
 * The loop learns (issue 14 part 3; at --max-staleness 1, issue 27 part 3), on CPU, offline, through a real harness: a tiny random Qwen3 (the
 * real Qwen3ForCausalLM class and vocabulary) is warmed up with a few plain supervised steps on the
 * prompts Pi really sends, so that it answers "Flip a coin. Answer with one word: heads or tails." with
 * heads about 70% and tails about 30% of the time. A verifier grader rewards tails. The tasks, the
 * verifier and the warm-up are the quickstart's (examples/quickstart/: test/e2e/quickstart.test.ts runs it
 * as documented); this suite measures the learning itself, with the model. `polar loop` then runs Pi through the embedded backend, grades with the verifier, builds
 * GRPO trajectories, trains with the transformers worker, exports and reloads, for 2 steps.
 *
 * What must hold: the probability of the rewarded answer, computed with the model on a held-out prompt
 * (not sampled), rises by a clear margin from the warmed-up model to the last step's, and the held-out
 * mean reward of the last step beats the starting policy's (step-0/heldout). Model, warm-up, trainer and
 * sampling (--seed) are seeded; the margins leave room for the sampling order that concurrency changes.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { before, describe, type TestContext, test } from 'node:test';
import { execa } from 'execa';
import { readCapture } from '../../src/capture/reader.ts';
import type { CallRecord } from '../../src/capture/record.ts';
import { tinyLlamaSpec } from '../../src/export/export.ts';
import { findPython } from '../../src/train/env.ts';
import { privateDirs, privateEnv } from '../support/capture-run.ts';
import { ROOT, runPolar } from '../support/cli.ts';
import { rescore } from '../support/tiny-model.ts';

const python = await findPython(process.env.POLAR_PYTHON).catch(() => null);
const SKIP = python?.transformers ? false : 'no Python with torch and transformers (npm run setup:python)';

const TAILS = 39960; // "tails" in the Qwen3 vocabulary
const IM_END = 151645; // <|im_end|>
const QUICKSTART = join(ROOT, 'examples/quickstart');
const VERIFIER = `node ${join(QUICKSTART, 'reward.mjs')}`;
const SPEC = tinyLlamaSpec({ arch: 'qwen3', layers: 2, seed: 1 });
const TRAIN_SET = join(QUICKSTART, 'tasks.jsonl');
const HELDOUT_SET = join(QUICKSTART, 'heldout.jsonl');

/** The successful calls of every capture in a folder. */
async function calls(dir: string): Promise<CallRecord[]> {
  const out: CallRecord[] = [];
  for (const f of (await readdir(dir)).filter((x) => x.endsWith('.jsonl')).sort()) {
    for await (const { record } of readCapture(join(dir, f)))
      if (record.type === 'call' && record.error === null) out.push(record);
  }
  return out;
}

const meanReward = async (evalDir: string): Promise<number> =>
  JSON.parse(await readFile(join(evalDir, 'report.json'), 'utf8')).pass_at_1.mean;

/**
 * The suite at one --max-staleness: its own file each (loop-learns.test.ts: 0, loop-learns-async.test.ts:
 * 1), since the warm-up and one loop take most of a test file's 600 s on 2 cores.
 */
export function loopLearns(staleness: number): void {
  describe(
    `the loop learns: Pi through the embedded backend, a verifier grader, 2 GRPO steps on CPU, --max-staleness ${staleness}`,
    {
      skip: SKIP,
    },
    () => {
      let work: string;
      let env: Record<string, string>;
      let warm: string;
      const common = () => [
        '--agent',
        'pi',
        '--backend',
        'embedded',
        '--prompt-template',
        join(QUICKSTART, 'prompt.txt'),
        '--grader',
        VERIFIER,
        '--max-tokens-cap',
        '8',
        '--runtime',
        'local',
        '--allow-unsandboxed',
        '--repos',
        join(work, 'repos'),
        '--agent-timeout',
        '120',
        '--test-timeout',
        '60',
        '--concurrency',
        '4',
        // call k samples with seed 7 + k: the draws are the same in every run, so the counts of rewarded
        // answers move only when a draw falls at the edge of the two answers' probabilities
        '--seed',
        '7',
      ];
      const polar = (args: string[]) =>
        runPolar(args, { cwd: work, env, extendEnv: false, timeoutMs: 570_000 });

      before(async () => {
        const { home, workdir } = await privateDirs();
        work = workdir;
        env = { ...privateEnv(home), POLAR_OFFLINE: '1', POLAR_PYTHON: python!.executable };
      });

      test('warm-up: a few supervised steps on the prompts Pi sends give tails about 30%', async (t) => {
        // the prompts: what Pi sends the untrained model, recorded by polar eval (its cwd differs per sample)
        const exported = await polar(['export', SPEC, '--out', join(work, 'init-onnx')]);
        assert.equal(exported.exitCode, 0, String(exported.stderr));
        const probe = await polar([
          'eval',
          '--dataset',
          TRAIN_SET,
          '--model',
          join(work, 'init-onnx'),
          '--samples',
          '2',
          '--out',
          join(work, 'probe'),
          ...common(),
        ]);
        assert.equal(probe.exitCode, 0, String(probe.stderr));
        const prompts = (await calls(join(work, 'probe', 'captures'))).map((c) => c.prompt_token_ids!);
        assert.equal(prompts.length, 4, 'one call per sample');
        assert.deepEqual(
          prompts[0]!.slice(-3),
          [151644, 77091, 198],
          'the prompt ends <|im_start|>assistant\\n',
        );

        // the quickstart's warm-up (examples/quickstart/run.sh): the prompts of the probe as a verl file
        const verl = join(work, 'probe-prompts.jsonl');
        const built = await polar([
          'build',
          join(work, 'probe', 'captures'),
          '--format',
          'verl',
          '-o',
          verl,
          '-q',
        ]);
        assert.equal(built.exitCode, 0, String(built.stderr));
        warm = join(work, 'warm');
        const r = await execa(
          python!.executable,
          [
            join(QUICKSTART, 'warmup.py'),
            ...['--spec', SPEC, '--verl', verl, '--tokenizer', join(work, 'init-onnx'), '--out', warm],
            ...['--answer', 'heads=0.7', '--answer', 'tails=0.3'],
          ],
          { reject: false, stdin: 'ignore', timeout: 300_000 },
        );
        assert.equal(r.exitCode, 0, String(r.stderr));
        const probs = String(r.stdout)
          .split('\n')
          .filter((l) => l.includes('"answer"'))
          .map((l) => JSON.parse(l) as { answer: number[]; probability: number });
        const tails = probs.find((p) => p.answer[0] === TAILS)!.probability;
        assert.ok(tails > 0.2 && tails < 0.4, `tails after the warm-up: ${tails}`);
        t.diagnostic(`p(tails) on the warm-up prompts: ${tails.toFixed(3)}`);
        assert.ok(existsSync(join(warm, 'model.safetensors')));
      });

      const learns = (staleness: number) => async (t: TestContext) => {
        assert.ok(warm, 'the warm-up ran');
        const run = join(work, `run-${staleness}`);
        const loop = await polar([
          'loop',
          ...(staleness > 0 ? ['--max-staleness', String(staleness)] : []),
          '--train-set',
          TRAIN_SET,
          '--eval-set',
          HELDOUT_SET,
          '--model',
          warm,
          '--group-size',
          '8',
          '--tasks-per-step',
          '2',
          '--steps',
          '2',
          '--eval-every',
          '2',
          '--device',
          'cpu',
          '--lr',
          '0.005',
          '--out',
          run,
          ...common(),
        ]);
        assert.equal(loop.exitCode, 0, String(loop.stderr));
        const stderr = String(loop.stderr);

        // measured with the model, not sampled: p(tails <|im_end|>) on a held-out prompt, before and after
        const [heldoutCall] = await calls(join(run, 'step-2', 'heldout', 'captures'));
        const prompt = heldoutCall!.prompt_token_ids!;
        const p = async (onnx: string) =>
          Math.exp((await rescore(onnx, prompt, [TAILS, IM_END])).reduce((a, b) => a + b, 0));
        const before = await p(join(run, 'step-0', 'onnx'));
        const after = await p(join(run, 'step-2', 'onnx'));
        const steps = await Promise.all(
          [1, 2].map(async (n) => JSON.parse(await readFile(join(run, `step-${n}`, 'step.json'), 'utf8'))),
        );
        const trace = `p(tails) ${before.toFixed(3)} -> ${after.toFixed(3)}; rollout reward by step ${steps
          .map((s) => s.rollouts.pass_at_1.toFixed(2))
          .join(', ')}\n${stderr.slice(-3000)}`;
        assert.ok(before > 0.15 && before < 0.5, `the warmed-up model says tails about 30% (${trace})`);
        assert.ok(after > before + 0.3, `the rewarded answer became much likelier (${trace})`);

        const heldoutBefore = await meanReward(join(run, 'step-0', 'heldout'));
        const heldoutAfter = await meanReward(join(run, 'step-2', 'heldout'));
        t.diagnostic(`${trace.split('\n')[0]}; held-out reward ${heldoutBefore} -> ${heldoutAfter}`);
        assert.ok(
          heldoutAfter >= 0.625 && heldoutAfter >= heldoutBefore + 0.25,
          `held-out mean reward ${heldoutBefore} -> ${heldoutAfter} (${trace})`,
        );
        assert.match(stderr, /held-out pass@1 of the starting policy/);
        // every reward came from the verifier: no infrastructure failure was scored
        const rollouts =
          staleness > 0
            ? (await readdir(join(run, 'groups'))).map((g) => `groups/${g}`)
            : ['step-1/eval', 'step-2/eval'];
        for (const dir of [...rollouts, 'step-0/heldout', 'step-2/heldout']) {
          const report = JSON.parse(await readFile(join(run, dir, 'report.json'), 'utf8'));
          assert.equal(report.counts.error, 0, `${dir}: no sample errored`);
        }
        if (staleness === 0) return;
        // with --max-staleness 1 both steps' samples ran under the starting policy: step 2 trained them
        // one version late, which its step.json, its trajectories and its trainer metrics say
        const step2 = steps[1];
        assert.equal(step2.staleness.max, 1, JSON.stringify(step2.staleness));
        assert.equal(step2.staleness.dropped, 0);
        const versions: number[] = [];
        for (const line of (await readFile(join(run, 'step-2', 'traj.jsonl'), 'utf8')).trim().split('\n'))
          versions.push(JSON.parse(line).policy_version);
        assert.ok(versions.length > 0 && versions.every((v) => v === 0), `policy_version ${versions}`);
        const metrics = (await readFile(join(run, 'step-2', 'train', 'metrics.jsonl'), 'utf8'))
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l));
        const last = metrics.at(-1);
        assert.equal(last.staleness_max, 1);
        assert.equal(typeof last.tis_mean, 'number');
        assert.ok(last.tis_max <= 2, 'the importance weights are truncated at tis_cap');
        const [call] = await calls(join(run, 'step-2', 'heldout', 'captures'));
        assert.equal(call!.policy_version, 2, 'the held-out eval after step 2 ran on version 2');
      };

      test(
        staleness === 0
          ? 'polar loop raises the probability of the rewarded answer and the held-out reward'
          : `with --max-staleness ${staleness} too, training on samples a version late`,
        learns(staleness),
      );
    },
  );
}
