/**
 * Runs the real `polar eval` CLI on the fixture dataset with a private HOME, and reads its results; and
 * the set-up the harness eval end-to-end files share (test/e2e/eval-pi.test.ts,
 * eval-gemini-opencode.test.ts): a vLLM stand-in that "fixes" one fixture task by applying its gold patch
 * through the harness's shell tool, that task's eval, and the trajectories `polar build` makes of it.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { privateDirs, privateEnv } from './capture-run.ts';
import { type PolarOptions, type PolarRun, ROOT, runPolar } from './cli.ts';
import { fixtureTask } from './fixture-task.ts';
import { type ChatBody, type Standin, startStandin } from './vllm-standin.ts';

/** the fields of a results.jsonl line the tests read (docs/eval.md) */
export interface SampleLine {
  status: string;
  reward: number | null;
  resolved?: boolean;
  capture: string;
  agent: { name: string; status: string; calls: number; failed_calls: number; limit: string | null };
  [key: string]: unknown;
}

export interface EvalCliRun {
  exitCode: number | undefined;
  stdout: string;
  stderr: string;
  /** results.jsonl, one object per sample */
  results: SampleLine[];
  home: string;
  workdir: string;
  /** the run's --out */
  out: string;
  /** the same command again in the same folders, with `more` flags after it (--resume) */
  again: (more: string[]) => Promise<PolarRun>;
}

/** results.jsonl of an eval folder, one object per sample (none when there is no file). */
export async function readResults(out: string): Promise<SampleLine[]> {
  return (await readFile(join(out, 'results.jsonl'), 'utf8').catch(() => ''))
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as SampleLine);
}

/**
 * `polar eval --dataset fixtures/swe/mini.jsonl ARGS --out <private dir>/out --quiet`; `before` runs with
 * the private dirs first (to plant files in the private HOME).
 */
export async function evalCli(
  args: string[],
  options: { timeoutMs?: number; before?: (dirs: { home: string; workdir: string }) => void } = {},
): Promise<EvalCliRun> {
  const { home, workdir } = await privateDirs();
  options.before?.({ home, workdir });
  const out = join(workdir, 'eval-out');
  const argv = ['eval', '--dataset', join(ROOT, 'fixtures/swe/mini.jsonl'), ...args, '--out', out, '--quiet'];
  const polarOptions: PolarOptions = {
    cwd: workdir,
    env: privateEnv(home),
    extendEnv: false,
    timeoutMs: options.timeoutMs ?? 300_000,
  };
  const r = await runPolar(argv, polarOptions);
  return {
    exitCode: r.exitCode,
    stdout: r.stdout,
    stderr: r.stderr,
    results: await readResults(out),
    home,
    workdir,
    out,
    again: (more) => runPolar([...argv, ...more], polarOptions),
  };
}

/** the fixture task the harness evals run (jsutil: its tests run under node) */
export const TASK = 'polar-fixtures__jsutil-5';

/**
 * A stand-in model that fixes TASK: to a request offering the shell tool that `shellTool(body)` names,
 * it answers with that tool applying the gold patch; once the tool has answered, "The fix is in place.";
 * a request without the tool (a harness's side call, such as OpenCode's title) gets `sideAnswer`.
 */
export async function goldPatchStandin(
  shellTool: (body: ChatBody) => string | undefined,
  sideAnswer = 'Done',
): Promise<Standin> {
  const b64 = Buffer.from(String((await fixtureTask(TASK)).patch)).toString('base64');
  return startStandin({
    policy: (body) => {
      if (body.messages.at(-1)?.role === 'tool') return { content: 'The fix is in place.' };
      const shell = shellTool(body);
      if (!shell) return { content: sideAnswer };
      return { toolCalls: [{ name: shell, arguments: { command: `echo ${b64} | base64 -d | git apply` } }] };
    },
  });
}

/**
 * `polar eval --agent HARNESS` on TASK against the vLLM server at `backendUrl` (Qwen/Qwen3-4B), on the
 * local runtime (unsandboxed) with the fixture repositories; `extra` flags after these.
 */
export function evalTask(
  harness: string,
  backendUrl: string,
  extra: string[] = [],
  timeoutMs = 420_000,
): Promise<EvalCliRun> {
  return evalCli(
    [
      '--instances',
      TASK,
      '--agent',
      harness,
      '--runtime',
      'local',
      '--allow-unsandboxed',
      '--repos',
      join(ROOT, 'fixtures/swe/repos'),
      '--backend',
      'vllm',
      '--backend-url',
      backendUrl,
      '--model',
      'Qwen/Qwen3-4B',
      ...extra,
    ],
    { timeoutMs },
  );
}

/** `polar build OUT` as a user runs it: the run, and the trajectories it printed. */
export async function buildFolder(
  out: string,
): Promise<{ built: PolarRun; trajectories: Array<{ reward: number; task_id: string }> }> {
  const built = await runPolar(['build', out]);
  const trajectories = built.stdout
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { reward: number; task_id: string });
  return { built, trajectories };
}
