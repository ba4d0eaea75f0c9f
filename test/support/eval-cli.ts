/** Runs the real `polar eval` CLI on the fixture dataset with a private HOME, and reads its results. */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { privateDirs, privateEnv } from './capture-run.ts';
import { POLAR, ROOT } from './cli.ts';

/** the fields of a results.jsonl line the tests read (docs/eval.md) */
export interface SampleLine {
  status: string;
  reward: number | null;
  capture: string;
  agent: { name: string; status: string; calls: number; failed_calls: number; limit: string | null };
  [key: string]: unknown;
}

export interface EvalCliRun {
  exitCode: number | undefined;
  stderr: string;
  /** results.jsonl, one object per sample */
  results: SampleLine[];
  home: string;
  workdir: string;
}

/**
 * `polar eval --dataset fixtures/swe/mini.jsonl ARGS --out <private dir>/out`; `before` runs with the
 * private dirs first (to plant files in the private HOME).
 */
export async function evalCli(
  args: string[],
  options: { timeoutMs?: number; before?: (dirs: { home: string; workdir: string }) => void } = {},
): Promise<EvalCliRun> {
  const { home, workdir } = await privateDirs();
  options.before?.({ home, workdir });
  const out = join(workdir, 'eval-out');
  const r = await execa(
    process.execPath,
    [POLAR, 'eval', '--dataset', join(ROOT, 'fixtures/swe/mini.jsonl'), ...args, '--out', out, '--quiet'],
    {
      cwd: workdir,
      env: privateEnv(home),
      extendEnv: false,
      reject: false,
      stdin: 'ignore',
      timeout: options.timeoutMs ?? 300_000,
    },
  );
  const results = (await readFile(join(out, 'results.jsonl'), 'utf8').catch(() => ''))
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as SampleLine);
  return { exitCode: r.exitCode, stderr: String(r.stderr), results, home, workdir };
}
