/**
 * The rollout job: what a run of samples is, typed and without any command's flags: the dataset and the
 * selected instances, the agent and its backend, the runtime, the grading, the time limits, the run
 * folder, and the executor that runs it (this machine's pool, Ray, Slurm). `polar eval` makes one from its
 * flags; `polar loop --cluster` makes one per step; a cluster node gets its share as one (`polar eval
 * --job FILE|-`): the Ray executor hands each sample's to the driver's task (which adds `out` and
 * `backendUrl`, src/train/worker/polar_train/cluster/ray_rollouts.py), the Slurm executor writes one file
 * per shard and one for the merge job. Read back through rolloutJobSchema; an unknown field is refused.
 *
 * What a machine resolves for itself stays out of a job unless given: the backend's key (a job made from
 * POLAR_BACKEND_API_KEY leaves it out; each machine reads its own, the driver passes its value in the
 * node's environment) and the environments' cache (DEFAULTS.envCache: each machine's own).
 */
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { z } from 'zod';
import { BACKEND_KINDS } from '../../backends/kinds.ts';
import { InputError, unreadableInput } from '../../errors.ts';
import type { BackendOptions } from '../../options/backend.ts';
import { DEFAULTS, type Grader } from '../../options/defaults.ts';
import { PRIVATE_FILE } from '../../util/private-files.ts';
import { firstIssue } from '../../util/zod.ts';
import { AGENT_NAMES, isHarness } from '../agent-names.ts';
import { loadDataset, type SweInstance, selectInstances } from '../dataset.ts';
import type { RuntimeSetup } from '../runtime/create.ts';
import { RUNTIME_KINDS } from '../runtime/types.ts';
import type { AgentSetup, EvaluationSetup } from '../setup.ts';

export const ROLLOUT_JOB_VERSION = 1;

const count = z.number().int().positive();
const ms = z.number().positive();

const backendSchema = z.strictObject({
  kind: z.enum(BACKEND_KINDS),
  url: z.string().optional(),
  model: z.string(),
  apiKey: z.string().optional(),
  timeoutMs: ms.optional(),
  idleTimeoutMs: z.number().nonnegative().optional(),
  requireTokenIds: z.boolean().optional(),
  tokenizer: z.string().optional(),
  chatTemplateKwargs: z.record(z.string(), z.unknown()).optional(),
  temperature: z.number().optional(),
  topP: z.number().optional(),
  maxTokens: count.optional(),
  seed: z.number().int().nonnegative().optional(),
  maxTokensCap: count.optional(),
  skipCheck: z.boolean().optional(),
}) satisfies z.ZodType<BackendOptions>;

const agentSchema = z.strictObject({
  agent: z.enum(AGENT_NAMES),
  agentCmd: z.string().optional(),
  predictions: z.string().optional(),
  promptTemplate: z.string().optional(),
  piApi: z.string().optional(),
  passEnv: z.array(z.string()).optional(),
  backend: backendSchema.optional(),
  backendUrls: z.array(z.string()).optional(),
}) satisfies z.ZodType<AgentSetup>;

const runtimeSchema = z.strictObject({
  kind: z.enum(RUNTIME_KINDS),
  repos: z.string(),
  image: z.string().optional(),
  network: z.string().optional(),
  networkAllow: z.array(z.strictObject({ host: z.string(), port: z.number().int() })).optional(),
  allowUnsandboxed: z.boolean().optional(),
  keepEnvs: z.boolean().optional(),
  limits: z
    .strictObject({
      memoryBytes: count.optional(),
      pids: count.optional(),
      diskBytes: count.optional(),
    })
    .optional(),
  envDirs: z.array(z.string()).optional(),
  cgroupParent: z.string().optional(),
  /** absent cacheDir: the machine's own default (DEFAULTS.envCache) */
  environments: z
    .strictObject({ cacheDir: z.string().optional(), pythons: z.record(z.string(), z.string()) })
    .nullable()
    .optional(),
});

const graderSchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('polar') }),
  z.strictObject({ kind: z.literal('swebench') }),
  z.strictObject({ kind: z.literal('verifier'), command: z.string().min(1) }),
  z.strictObject({ kind: z.literal('judge') }),
]) satisfies z.ZodType<Grader>;

/** Where the job's samples run. `polar` is how a node starts polar ([node, bin/polar] by default). */
const executorSchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('local') }),
  z.strictObject({
    kind: z.literal('ray'),
    /** HOST:PORT, or auto */
    address: z.string(),
    cpus: count,
    memoryBytes: count,
    /** a folder every node and the driver see: sample folders are written there, not sent back */
    shared: z.string().optional(),
    /** runs of a sample lost with its node, beyond the first */
    retries: z.number().int().nonnegative(),
    polar: z.array(z.string()).min(1),
  }),
  z.strictObject({
    kind: z.literal('slurm'),
    cpus: count,
    memoryBytes: count,
    /** array tasks; absent: the instances, at most 8 (inside an allocation: its tasks or nodes) */
    shards: count.optional(),
    /** one more #SBATCH line each */
    sbatch: z.array(z.string()),
    polar: z.array(z.string()).min(1),
  }),
]);

export const rolloutJobSchema = z.strictObject({
  v: z.literal(ROLLOUT_JOB_VERSION),
  /** the dataset file or hub id, and its split */
  dataset: z.string(),
  split: z.string(),
  /** the selected instance ids (in the dataset's order): the run is these, or a shard of them */
  instances: z.array(z.string()).min(1),
  /** a Slurm shard: the i-th of n of `instances`, round robin */
  shard: z.strictObject({ index: count, count: count }).optional(),
  samples: count,
  /** only this sample of each instance (a Ray task's one sample) */
  sampleIndex: z.number().int().nonnegative().optional(),
  setup: z.strictObject({ agent: agentSchema, runtime: runtimeSchema }),
  grader: graderSchema,
  gradeEmpty: z.boolean(),
  rejectTampering: z.boolean(),
  agentTimeoutMs: ms,
  testTimeoutMs: ms,
  concurrency: count,
  /** the run folder */
  out: z.string(),
  resume: z.boolean(),
  overwrite: z.boolean(),
  /** the settings that decide the results, by flag (src/eval/settings.ts): run.json, checked on resume */
  settings: z.record(z.string(), z.unknown()).optional(),
  /** the options the run was given, by long flag name (src/options/config.ts): run.json's `config` */
  config: z.record(z.string(), z.unknown()).optional(),
  /** more session meta for every capture (polar loop: the policy's step) */
  meta: z.record(z.string(), z.string()).optional(),
  /** the one inference server of this job's samples, over the setup's (the Ray driver's pick) */
  backendUrl: z.string().optional(),
  executor: executorSchema,
  /** instead of running samples: the run folders of the shards, merged into `out` (Slurm's merge job) */
  merge: z.array(z.string()).min(1).optional(),
});

export type RolloutJob = z.infer<typeof rolloutJobSchema>;
export type JobExecutor = RolloutJob['executor'];
export type RayJob = RolloutJob & { executor: { kind: 'ray' } };
export type SlurmJob = RolloutJob & { executor: { kind: 'slurm' } };

/** Writes a job for another process (owner only: it may hold a server URL's credentials). */
export async function writeJob(path: string, job: RolloutJob): Promise<void> {
  await writeFile(path, `${JSON.stringify(job, null, 2)}\n`, { mode: PRIVATE_FILE });
}

/** A job from its text (a file's, or stdin's for `-`), validated; a bad one is an InputError naming the field. */
export function parseJob(text: string, where: string): RolloutJob {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new InputError(where, undefined, undefined, `not valid JSON (${(error as Error).message})`);
  }
  const parsed = rolloutJobSchema.safeParse(value);
  if (parsed.success) return parsed.data;
  const { field, message } = firstIssue(parsed.error, '(job)');
  throw new InputError(where, undefined, field, message, 'a job is written by this polar for itself');
}

/** A job file (`-`: stdin) read and validated. */
export function readJob(path: string): RolloutJob {
  let text: string;
  try {
    text = readFileSync(path === '-' ? 0 : path, 'utf8');
  } catch (error) {
    throw unreadableInput(path, error, { what: 'job' });
  }
  return parseJob(text, path === '-' ? '(stdin)' : path);
}

/** The job's setup as this machine runs it: its own key and environments' cache where the job gives none. */
export function jobSetup(job: RolloutJob): EvaluationSetup {
  const { agent, runtime } = job.setup;
  const key = process.env.POLAR_BACKEND_API_KEY;
  let backend = agent.backend;
  if (backend && !backend.apiKey && key) backend = { ...backend, apiKey: key };
  if (backend && job.backendUrl) backend = { ...backend, url: job.backendUrl };
  const { backendUrls, ...rest } = agent;
  const environments = runtime.environments
    ? { ...runtime.environments, cacheDir: runtime.environments.cacheDir ?? DEFAULTS.envCache.value }
    : runtime.environments;
  return {
    agent: {
      ...rest,
      ...(backend ? { backend } : {}),
      ...(backendUrls && !job.backendUrl ? { backendUrls } : {}),
    },
    runtime: { ...runtime, ...(environments !== undefined ? { environments } : {}) } as RuntimeSetup,
  };
}

/** A setup as a job holds it: the key only when given by flag, the environments' cache only when not the default. */
export function jobOfSetup(setup: EvaluationSetup, given: { apiKey?: string }): RolloutJob['setup'] {
  const { backend, ...agent } = setup.agent;
  const environments = setup.runtime.environments;
  return {
    agent: {
      ...agent,
      ...(backend ? { backend: given.apiKey ? backend : (({ apiKey: _key, ...b }) => b)(backend) } : {}),
    },
    runtime: {
      ...setup.runtime,
      ...(environments
        ? {
            environments:
              environments.cacheDir === DEFAULTS.envCache.value
                ? { pythons: environments.pythons }
                : environments,
          }
        : {}),
    },
  };
}

/**
 * A job as a cluster node runs its share: on the node's own pool, without probing the servers (the
 * driver checked them before anything was queued); `resume`: a Slurm shard's (a requeued task keeps what
 * it finished), never a Ray task's (each starts in a fresh folder).
 */
export function nodeJob(job: RolloutJob, { resume }: { resume: boolean }): RolloutJob {
  const backend = job.setup.agent.backend;
  return {
    ...job,
    executor: { kind: 'local' },
    resume,
    overwrite: false,
    setup: {
      ...job.setup,
      agent: { ...job.setup.agent, ...(backend ? { backend: { ...backend, skipCheck: true } } : {}) },
    },
  };
}

/** The instances of a job: its dataset, its selection, its shard. */
export async function jobInstances(
  job: RolloutJob,
): Promise<{ all: SweInstance[]; instances: SweInstance[] }> {
  const all = await loadDataset(job.dataset, {
    split: job.split,
    verifier: job.grader.kind === 'verifier' || job.grader.kind === 'judge',
  });
  const instances = selectInstances(all, {
    instances: job.instances,
    ...(job.shard ? { shard: job.shard } : {}),
  });
  return { all, instances };
}

/** The name and model a run's report and predictions give its agent (as the agent classes name them). */
export function agentLabel(
  setup: AgentSetup,
  predictionsModel?: string,
): { name: string; modelName: string } {
  if (setup.agent === 'predictions') return { name: 'predictions', modelName: predictionsModel ?? '' };
  if (isHarness(setup.agent)) return { name: setup.agent, modelName: setup.backend?.model ?? '' };
  return { name: setup.agent, modelName: setup.agent };
}

/** The inference servers of a harness job: several, the one, or none. */
export function jobBackendUrls(setup: AgentSetup): string[] {
  if (!setup.backend) return [];
  return setup.backendUrls ?? (setup.backend.url ? [setup.backend.url] : []);
}
