/**
 * What the tests of a training run across nodes share (train-nodes, train-srun, train-ray): the run's
 * flags and batch, `polar train` on this machine, the same run on one node (the reference), a launcher
 * command run on a test host under a time limit, and the check that the cluster run's checkpoint resumes
 * on one node with the update the one-node checkpoint makes.
 */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import { madeUpLogprobs, pythonWithTorch, smallBatch, TINY, writeJsonl } from '../../unit/train/fixtures.ts';
import { ROOT } from '../cli.ts';
import { runOnCluster } from './eval.ts';
import type { TestNet } from './netns.ts';
import { assertSameUpdate } from './train-compare.ts';

export const probe = await pythonWithTorch();
export const BIN = join(ROOT, 'bin/polar');
/** the `polar` command line a node runs (the launchers' --polar) */
export const POLAR = `${process.execPath} ${BIN}`;
export const WORKER = join(ROOT, 'src/train/worker');

/** The training run's flags (less --out), its batch and train.json written into `dir`. */
export async function trainArgs(dir: string, lr = '0.001'): Promise<string[]> {
  const traj = await writeJsonl(join(dir, 'traj.jsonl'), smallBatch());
  // smallBatch's logprobs are made up: the sampling check is off (train.json)
  const config = await madeUpLogprobs(dir);
  return [traj, '--config', config, '--model', TINY, '--device', 'cpu', '--batch-rollouts', '4', '--lr', lr];
}

/** `polar train ARGS` on this machine with the trainer's Python; killed after 400 s, never throws. */
export function polarTrain(args: string[]) {
  return execa(process.execPath, [BIN, 'train', ...args], {
    reject: false,
    env: { NO_COLOR: '1', POLAR_PYTHON: probe!.python },
    timeout: 400_000,
  });
}

/** The same run on one node (this machine), the reference. */
export async function oneNode(args: string[], out: string): Promise<void> {
  const r = await polarTrain([...args, '--out', out]);
  assert.equal(r.exitCode, 0, r.stderr);
}

/** argv in `ns` (a namespace, or this one when null); its exit code, stdout and stderr; killed after limitMs. */
export function runIn(
  net: TestNet,
  ns: string | null,
  argv: string[],
  env: NodeJS.ProcessEnv,
  limitMs = 400_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runOnCluster(net, ns ? ['ip', 'netns', 'exec', ns, ...argv] : argv, env, limitMs);
}

/** The last step-N checkpoint folder of a run. */
export function latestCheckpoint(out: string): string {
  const steps = readdirSync(out)
    .map((n) => /^step-(\d+)$/.exec(n))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]));
  assert.ok(steps.length > 0, `no checkpoint in ${out}`);
  return `step-${Math.max(...steps)}`;
}

/**
 * The checkpoints of `one` (one node) and `two` (the cluster run, FSDP across its nodes), each resumed on
 * one node for one more step, make the same update: finite weights within float tolerance (before
 * checkpoint version 2 the cluster's resumed into NaN, docs/train.md). `args` are the runs' flags (trainArgs).
 */
export async function assertResumesOnOneNode(
  tmp: string,
  args: string[],
  one: string,
  two: string,
): Promise<void> {
  const step = Number(latestCheckpoint(one).slice('step-'.length));
  assert.equal(latestCheckpoint(two), `step-${step}`, 'the cluster run wrote its checkpoint');
  // a new trajectory file, as the loop's next step has (the same file would resume at its end); one
  // step: the tiny model on made-up logprobs goes non-finite by its fourth
  const next = await writeJsonl(join(tmp, 'traj-next.jsonl'), smallBatch().reverse());
  const resumedArgs = [next, ...args.slice(1), '--max-steps', '1'];
  const more = (from: string) => join(tmp, `${from.split('/').at(-1)}-resumed`);
  await oneNode([...resumedArgs, '--resume-from', one], more(one));
  await oneNode([...resumedArgs, '--resume-from', two], more(two));
  assert.equal(latestCheckpoint(more(one)), `step-${step + 1}`, 'the resumed run made its step');
  await assertSameUpdate(probe!.python, more(one), more(two), `step-${step + 1}`);
}
