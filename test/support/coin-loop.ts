/**
 * The `polar loop` runs of the end-to-end loop tests (loop, loop-report, cluster-loop, cluster-loop-slurm):
 * the coin tasks of fixtures/loop with real Pi, 2 samples a task, graded on the local runtime over the
 * fixture repositories, trained on the CPU, under the harness's and the tests' time limits. The policy is
 * the tiny Llama in polar's own process (EMBEDDED_TINY) or a model the vLLM stand-in serves, with the tiny
 * Llama trained (servedPolicy); each test adds its own flags. loopEnv is the environment such a run gets.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tinyLlamaSpec } from '../../src/export/export.ts';
import { privateEnv, vllmFlags } from './capture-run.ts';
import { ROOT } from './cli.ts';

/** A tiny Llama with the real Qwen3 vocabulary (random weights, seed 1). */
export const TINY_LLAMA = tinyLlamaSpec({ seed: 1 });

export interface CoinLoop {
  steps: number;
  tasksPerStep: number;
  lr: string;
  /** samples at once (left out: the test's own flags give it) */
  concurrency?: number;
  out: string;
}

/** `polar loop` on the coin tasks with `policy`, `o`'s sizes and folder, then `extra`. */
export function coinLoopArgs(policy: string[], o: CoinLoop, extra: string[] = []): string[] {
  return [
    'loop',
    '--train-set',
    join(ROOT, 'fixtures/loop/coin.jsonl'),
    '--agent',
    'pi',
    ...policy,
    '--group-size',
    '2',
    '--tasks-per-step',
    String(o.tasksPerStep),
    '--steps',
    String(o.steps),
    '--runtime',
    'local',
    '--allow-unsandboxed',
    '--repos',
    join(ROOT, 'fixtures/swe/repos'),
    '--device',
    'cpu',
    '--lr',
    o.lr,
    ...(o.concurrency === undefined ? [] : ['--concurrency', String(o.concurrency)]),
    '--agent-timeout',
    '120',
    '--test-timeout',
    '60',
    ...extra,
    '--out',
    o.out,
  ];
}

/**
 * The tiny Llama served by polar itself. Every answer of the random model stops at the cap of 12
 * tokens: --overlong mask (the default) would leave nothing to train on, --overlong keep trains them.
 */
export const EMBEDDED_TINY = [
  '--backend',
  'embedded',
  '--model',
  TINY_LLAMA,
  '--max-tokens-cap',
  '12',
  '--overlong',
  'keep',
];

/**
 * The model the vLLM stand-in at `url` serves (vllmFlags), the tiny Llama trained with `trainConfig`
 * (standinTrainConfig), each step's weights published by a --reload-cmd that does nothing.
 */
export function servedPolicy(url: string, trainConfig: string): string[] {
  return [
    ...vllmFlags(url),
    '--train-model',
    TINY_LLAMA,
    '--train-config',
    trainConfig,
    '--reload-cmd',
    'true',
  ];
}

/** dir/train.json for a policy the stand-in serves: its logprobs are made up, the trainer's check of them is off. */
export async function standinTrainConfig(dir: string): Promise<string> {
  const config = join(dir, 'train.json');
  await writeFile(config, `${JSON.stringify({ sampling_gap_limit: 0 })}\n`);
  return config;
}

/** A loop run's environment: the harness's private `home`, offline, the trainer's `python`; then `extra`. */
export function loopEnv(
  home: string,
  python: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  return { ...privateEnv(home), POLAR_OFFLINE: '1', POLAR_PYTHON: python, ...extra };
}
