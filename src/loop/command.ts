/** The body of `polar loop`: flags in, runLoop, exit code out. */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { type BackendFlags, backendOptions, parseNonNegativeInt, parseSeconds } from '../capture/options.ts';
import { UsageError } from '../errors.ts';
import { log } from '../util/log.ts';
import { runLoop } from './loop.ts';

export async function loopCommand(flags: Record<string, unknown>): Promise<number> {
  const f = flags as BackendFlags & Record<string, string | boolean | undefined>;
  log.configure({ quiet: Boolean(f.quiet) });
  const str = (k: string) => (typeof f[k] === 'string' ? (f[k] as string) : undefined);
  const int = (flag: string, k: string, min = 1) => {
    const n = parseNonNegativeInt(flag, str(k));
    if (n === undefined || n < min) throw new UsageError(`${flag} ${str(k)}: expected an integer >= ${min}`);
    return n;
  };
  const backend = backendOptions({ ...f, model: str('model') } as BackendFlags);
  const trainModel = str('trainModel') ?? backend.model;
  const lr = str('lr');
  const summaries = await runLoop({
    trainSet: str('trainSet')!,
    ...(str('evalSet') ? { evalSet: str('evalSet')! } : {}),
    harness: str('harness')!,
    ...(str('piApi') ? { piApi: str('piApi')! } : {}),
    backend,
    trainModel: existsSync(trainModel) ? resolve(trainModel) : trainModel,
    groupSize: int('--group-size', 'groupSize'),
    tasksPerStep: int('--tasks-per-step', 'tasksPerStep'),
    steps: int('--steps', 'steps'),
    evalEvery: int('--eval-every', 'evalEvery', 0),
    out: str('out')!,
    runtime: str('runtime') ?? 'docker',
    repos: str('repos') ?? 'fixtures/swe/repos',
    ...(str('image') ? { image: str('image')! } : {}),
    ...(str('network') ? { network: str('network')! } : {}),
    allowUnsandboxed: Boolean(f.allowUnsandboxed),
    concurrency: int('--concurrency', 'concurrency'),
    agentTimeoutMs: parseSeconds('--agent-timeout', str('agentTimeout')) ?? 1_800_000,
    testTimeoutMs: parseSeconds('--test-timeout', str('testTimeout')) ?? 1_800_000,
    resume: Boolean(f.resume),
    gradeEmptyPatches: Boolean(f.gradeEmptyPatches),
    ...(str('reloadCmd') ? { reloadCmd: str('reloadCmd')! } : {}),
    ...(str('trainConfig') ? { trainConfig: str('trainConfig')! } : {}),
    trainFlags: {
      device: str('device') ?? 'cuda',
      lora: Boolean(f.lora),
      ...(lr !== undefined ? { lr: Number(lr) } : {}),
    },
    exportOnnx: async (checkpoint, dir) => {
      const { runExport } = await import('../export/index.ts');
      await runExport({ checkpoint, onnx: dir });
    },
  });
  const last = summaries.at(-1);
  if (last) log.info(`loop finished at step ${last.step}: policy ${last.checkpoint}`);
  return 0;
}
