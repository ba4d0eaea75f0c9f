/**
 * `polar loop --cluster ray[=ADDRESS]|slurm`: a step's rollouts (and held-out evals) are a `polar eval
 * --cluster` of that step's tasks, run as a child process into the step's eval folder, so they fan out
 * through exactly the path `polar eval --cluster` takes (src/eval/cluster.ts, slurm.ts): one Ray task per
 * sample, or Slurm array shards and a merge job. The child gets the loop's own words less the loop's
 * flags (runtime, backend, grader and cluster flags pass as the user typed them, as argv.ts does for a
 * node), plus the step's dataset, instances, samples, folder and session meta (the policy's step, as a
 * local loop records it). The loop reads back its report through the report's schema.
 */
import { join } from 'node:path';
import { execa } from 'execa';
import { PolarError, UsageError } from '../errors.ts';
import type { ClusterChoice } from '../options/parsers.ts';
import { wordsAfter } from '../rollout/executors/argv.ts';
import { EVAL_FILES } from '../rollout/run/files.ts';
import { readRunReport } from '../rollout/run/read-report.ts';
import { readResults } from '../rollout/run/results.ts';
import type { EvalOutcome } from '../rollout/run/run.ts';
import { POLAR_BIN } from '../train/cluster/polar.ts';
import { throwIfStopped } from '../util/interrupt.ts';
import { log } from '../util/log.ts';

/** The loop's flags that a step's `polar eval` must not get (true = takes a value, false = a switch). */
const LOOP_ONLY: Record<string, boolean> = {
  '--train-set': true,
  '--eval-set': true,
  '--train-model': true,
  '--group-size': true,
  '--tasks-per-step': true,
  '--steps': true,
  '--eval-every': true,
  '--out': true,
  '--concurrency': true,
  '--reload-cmd': true,
  '--train-config': true,
  '--train-nodes': true,
  '--device': true,
  '--lr': true,
  '--max-staleness': true,
  '--overdue': true,
  '--oversample': true,
  '--overlong': true,
  '--overlong-buffer': true,
  '--dynamic-sampling': true,
  // the loop's one tracking writer logs each step's figures (src/loop/observe.ts): a step's eval logs none
  '--report-to': true,
  '--run-name': true,
  '--project': true,
  '--tensorboard-dir': true,
  '--lora': false,
  '--no-lora': false,
  '--resume': false,
  '--quiet': false,
  '-q': false,
};

export interface LoopCluster {
  choice: ClusterChoice;
  /** the words every step's `polar eval` starts with (loopEvalWords) */
  evalWords: string[];
  /** how the step's `polar eval` is started: [node, bin/polar] of this checkout */
  polar: string[];
}

/**
 * The `polar eval` words of a loop's command line (`argv`: node, script, ..., loop, words...): the loop's
 * own flags dropped, `--harness X` as eval's `--agent X`. Everything else (the runtime and its flags, the
 * backend, --grader, --grade-empty-patches, --cluster and its sizing flags) passes as typed.
 */
export function loopEvalWords(argv: readonly string[]): string[] {
  const words = wordsAfter(argv, 'loop');
  const kept: string[] = [];
  for (let i = 0; i < words.length; i++) {
    const word = words[i]!;
    if (word === '--') {
      kept.push(...words.slice(i));
      break;
    }
    const eq = word.startsWith('--') ? word.indexOf('=') : -1;
    const name = eq > 0 ? word.slice(0, eq) : word;
    if (name === '--harness') {
      if (eq > 0) kept.push('--agent', word.slice(eq + 1));
      else {
        kept.push('--agent', words[i + 1] ?? '');
        i++;
      }
      continue;
    }
    const takesValue = LOOP_ONLY[name];
    if (takesValue === undefined) {
      kept.push(word);
      continue;
    }
    if (takesValue && eq < 0) i++; // its value is the next word
  }
  return kept;
}

/**
 * The loop's cluster from its flags and command line. Recorded in the loop's config.json as the engine
 * and address only: the words may hold a server's key or a URL's credentials. The step's eval is this
 * polar (bin/polar of this checkout, this node binary).
 */
export function loopCluster(choice: ClusterChoice, argv: readonly string[]): LoopCluster {
  return {
    choice,
    evalWords: loopEvalWords(argv),
    polar: [process.execPath, POLAR_BIN],
    toJSON: () => ({ engine: choice.engine, ...(choice.address ? { address: choice.address } : {}) }),
  } as LoopCluster;
}

/** What a step asks of its cluster rollouts. */
export interface ClusterRolloutRun {
  instanceIds: string[];
  samples: number;
  out: string;
  dataset: string;
  concurrency: number;
  meta: Record<string, string>;
  quiet: boolean;
  signal?: AbortSignal;
}

/** The argv of a step's `polar eval` (after the polar command itself). */
export function stepEvalArgv(c: LoopCluster, run: ClusterRolloutRun): string[] {
  // the step's flags first: the user's words may end in `--` and what follows it
  return [
    'eval',
    '--dataset',
    run.dataset,
    '--instances',
    run.instanceIds.join(','),
    '--samples',
    String(run.samples),
    '--concurrency',
    String(run.concurrency),
    '--out',
    run.out,
    '--session-meta',
    JSON.stringify(run.meta),
    ...(run.quiet ? ['--quiet'] : []),
    ...c.evalWords,
  ];
}

/** A step's rollouts on the cluster: `polar eval --cluster` as a child; its report read back. */
export async function clusterRollouts(c: LoopCluster, run: ClusterRolloutRun): Promise<EvalOutcome> {
  const [file, ...pre] = c.polar;
  if (!file) throw new UsageError('--cluster-polar is empty');
  const args = [...pre, ...stepEvalArgv(c, run)];
  log.info(
    `rollouts on ${c.choice.engine}${c.choice.address ? ` at ${c.choice.address}` : ''}: polar eval --out ${run.out}`,
  );
  const child = execa(file, args, {
    reject: false,
    stdin: 'ignore',
    // the eval's progress and warnings are the loop's; its printed report is not needed (report.json is)
    stdout: 'ignore',
    stderr: ['inherit', 'pipe'],
    buffer: { stderr: true },
  });
  const onAbort = () => child.kill('SIGTERM');
  run.signal?.addEventListener('abort', onAbort, { once: true });
  let result: Awaited<typeof child>;
  try {
    result = await child;
  } finally {
    run.signal?.removeEventListener('abort', onAbort);
  }
  throwIfStopped(
    run.signal,
    `the rollouts in ${run.out} were stopped`,
    'run the same command with --resume to continue (an unfinished step is redone)',
  );
  if (result.exitCode !== 0) {
    const last = String(result.stderr ?? '')
      .trim()
      .split('\n')
      .filter((l) => l.trim())
      .slice(-3)
      .join(' | ');
    throw new PolarError(
      `the rollouts on ${c.choice.engine} (polar eval --out ${run.out}) ended with ${result.signal ?? `exit ${result.exitCode}`}: ${last || 'no output'}`,
      { hint: `the step is redone by --resume; the eval's own logs are under ${join(run.out, '.cluster')}` },
    );
  }
  const report = readRunReport(join(run.out, EVAL_FILES.report));
  const results = [...(await readResults(join(run.out, EVAL_FILES.results))).values()];
  return { report, results, interrupted: false };
}
