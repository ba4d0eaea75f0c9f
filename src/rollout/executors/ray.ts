/**
 * The samples of a run on a Ray cluster: the driver (src/train/worker/polar_train/cluster/ray_rollouts.py,
 * Ray's Python API) runs one task per sample, each `polar eval` of that sample on its node; this side
 * writes the spec, reads the driver's events and takes each returned folder into the run folder
 * (src/rollout/executors/adopt.ts), so results.jsonl grows as samples finish, wherever they ran. Each
 * task's polar gets its sample as a rollout job on stdin (`polar job -`, src/rollout/executors/job.ts).
 */
import { createWriteStream } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { execa } from 'execa';
import { EnvironmentError, PolarError } from '../../errors.ts';
import { nodeEnv } from '../../train/cluster/polar.ts';
import { rayPython, workerEnv } from '../../train/cluster/python.ts';
import { log } from '../../util/log.ts';
import { plural } from '../../util/plural.ts';
import { mkdirPrivate, PRIVATE_FILE } from '../../util/private-files.ts';
import { redactUrl } from '../../util/redact.ts';
import type { SweInstance } from '../dataset.ts';
import type { ResultLine } from '../run/report.ts';
import { sampleKey } from '../run/results.ts';
import { type EvalOutcome, runEvalWith, type SampleExecutor } from '../run/run.ts';
import { adoptSample, lostSample } from './adopt.ts';
import { jobBackendUrls, nodeJob, type RayJob, type RolloutJob } from './job.ts';

/** The custom resource a node offers per sample it may run at once (`ray start --resources`). */
export const SLOT_RESOURCE = 'polar_slot';

export interface RayRun {
  /** HOST:PORT, or auto (RAY_ADDRESS, else a cluster this machine belongs to) */
  address: string;
  /** the job each sample's task runs, less its folder (the task's own) and its server (the driver's pick) */
  job: Omit<RolloutJob, 'out'>;
  /** how a node starts polar: [node, /path/to/bin/polar] */
  polar: string[];
  cwd: string;
  /** per sample */
  cpus: number;
  memoryBytes: number;
  /** a folder every node and the driver see: sample folders are written there, not sent back */
  shared?: string;
  /** runs of a sample lost with its node, beyond the first */
  retries: number;
  /** inference servers: each sample gets the least loaded */
  backendUrls: string[];
  out: string;
  agent: { name: string; modelName: string };
  python?: string;
  env?: Record<string, string>;
  signal?: AbortSignal;
}

interface DriverEvent {
  event: string;
  [key: string]: unknown;
}

export function rayExecutor(run: RayRun): SampleExecutor {
  return async (jobs, { dirs, record }) => {
    if (jobs.length === 0) return { interrupted: false };
    const { python, ray } = await rayPython(run.python);
    const work = join(run.out, '.cluster');
    const stage = join(work, 'stage');
    await rm(stage, { recursive: true, force: true });
    await mkdirPrivate(stage);
    const byKey = new Map(jobs.map((j) => [sampleKey(j.instance.instance_id, j.sample), j]));
    const spec = {
      address: run.address,
      cwd: run.cwd,
      polar: run.polar,
      env: run.env ?? {},
      ...(run.shared ? { shared: run.shared } : {}),
      retries: run.retries,
      stage,
      resources: { cpus: run.cpus, memory: run.memoryBytes, slot: SLOT_RESOURCE },
      backend_urls: run.backendUrls,
      samples: jobs.map((j) => ({
        key: sampleKey(j.instance.instance_id, j.sample),
        argv: ['job', '-', '--quiet'],
        job: { ...run.job, instances: [j.instance.instance_id], sampleIndex: j.sample },
      })),
    };
    const specPath = join(work, 'ray-spec.json');
    // the spec holds the servers' URLs as given (credentials included): the nodes need them
    await writeFile(specPath, `${JSON.stringify(spec, null, 2)}\n`, { mode: PRIVATE_FILE });
    log.info(`ray ${ray} at ${run.address}: ${plural(jobs.length, 'sample')}, one task each`);

    const driverLog = createWriteStream(join(work, 'ray-driver.log'), { flags: 'a', mode: PRIVATE_FILE });
    const child = execa(python, ['-m', 'polar_train.cluster.ray_rollouts', '--spec', specPath], {
      env: workerEnv(),
      cwd: run.cwd,
      reject: false,
      buffer: false,
      stdin: 'ignore',
      stdout: 'pipe',
      stderr: 'pipe',
    });
    let interrupted = false;
    const onAbort = () => {
      interrupted = true;
      child.kill('SIGTERM');
    };
    run.signal?.addEventListener('abort', onAbort, { once: true });
    const tail: string[] = [];
    const readErr = (async () => {
      for await (const line of createInterface({ input: child.stderr! })) {
        driverLog.write(`${line}\n`);
        if (line.trim()) tail.push(line);
        if (tail.length > 12) tail.shift();
      }
    })();
    const done = new Set<string>();
    let fatal: DriverEvent | undefined;
    let finished = false;
    for await (const text of createInterface({ input: child.stdout! })) {
      driverLog.write(`${text}\n`);
      let event: DriverEvent;
      try {
        event = JSON.parse(text) as DriverEvent;
      } catch {
        continue; // a stray line of a library
      }
      if (event.event === 'done') finished = true;
      else if (event.event === 'error') fatal ??= event;
      else if (event.event === 'cluster') {
        const nodes = (event.nodes as Array<{ ip: string; slots: number }>) ?? [];
        log.info(
          `ray: ${plural(nodes.length, 'node')} (${nodes.map((n) => `${n.ip} x${n.slots}`).join(', ')}), ${event.slots} ${SLOT_RESOURCE}`,
        );
      } else if (event.event === 'retry') {
        log.warn(
          `${event.key}: lost with its node or worker, runs again elsewhere (attempt ${event.attempt}): ${event.reason}`,
        );
      } else if (event.event === 'sample' || event.event === 'lost') {
        const key = String(event.key);
        const job = byKey.get(key);
        if (!job || done.has(key)) continue; // not ours, or answered already: never counted twice
        done.add(key);
        const line = await answer(event, job, dirs, run);
        await record(line);
      }
    }
    const result = await child;
    await readErr;
    await new Promise<void>((resolve) => driverLog.end(resolve));
    run.signal?.removeEventListener('abort', onAbort);
    if (interrupted) return { interrupted: true };
    if (fatal)
      throw new EnvironmentError(
        `ray: ${fatal.message}`,
        fatal.kind === 'no_slots'
          ? `start each rollout node with: ray start --address ${run.address} --resources '{"${SLOT_RESOURCE}": N}' (N samples at once on that node); docs/cluster.md`
          : fatal.kind === 'infeasible'
            ? 'ask less per sample (--cluster-cpus, --cluster-memory) or give the nodes more (ray start --num-cpus, --memory)'
            : `is a Ray cluster running at ${run.address}? (ray start --head on one node; docs/cluster.md)`,
      );
    if (!finished)
      throw new PolarError(
        `the Ray driver stopped before the run finished (${result.signal ?? `exit ${result.exitCode}`}): ${tail.at(-1) ?? 'no output'}`,
        {
          hint: `finished samples are kept: run again with --resume; driver log: ${join(work, 'ray-driver.log')}`,
        },
      );
    return { interrupted: false };
  };
}

/** The result line of a driver event: the sample's folder taken in, or its loss recorded as an error. */
async function answer(
  event: DriverEvent,
  job: Parameters<typeof lostSample>[0],
  dirs: Parameters<typeof adoptSample>[2],
  run: RayRun,
): Promise<ResultLine> {
  const key = String(event.key);
  if (event.event === 'lost')
    return lostSample(
      job,
      `lost with its node ${event.attempts} times on the cluster: ${event.reason}`,
      run.agent,
    );
  const dir = String(event.dir);
  const where = {
    engine: 'ray',
    node: String(event.node),
    node_id: String(event.node_id),
    attempt: Number(event.attempt),
    ...(event.backend_url ? { backend_url: redactUrl(String(event.backend_url)) } : {}),
  };
  const adopted = await adoptSample(dir, key, dirs);
  await rm(run.shared ? join(dir, '..') : dir, { recursive: true, force: true });
  const line =
    adopted ??
    lostSample(
      job,
      `polar on node ${where.node} ended (exit ${event.exit_code}) without a result: ${String(
        event.stderr_tail ?? '',
      )
        .split('\n')
        .at(-1)}`,
      run.agent,
    );
  return { ...line, cluster: where };
}

/**
 * `polar eval --cluster ray[=ADDRESS]` (and a loop step's rollouts on Ray): the run folder written here,
 * each sample a Ray task running the job's sample on its node (the local executor there, no server probe:
 * the driver checked the servers), the inference servers handed out by the driver, the least loaded.
 */
export async function runOnRay(
  job: RayJob,
  instances: SweInstance[],
  context: { label: { name: string; modelName: string }; signal: AbortSignal },
): Promise<EvalOutcome> {
  const { executor } = job;
  log.info(
    `${plural(instances.length, 'instance')} x ${plural(job.samples, 'sample')}, agent ${context.label.name}, runtime ${job.setup.runtime.kind}, on the Ray cluster at ${executor.address}`,
  );
  const out = resolve(job.out);
  // each task's job: the sample's, on its node's pool (its folder and server added by the driver's task)
  const { out: _out, ...template } = nodeJob(job, { resume: false });
  const execute = rayExecutor({
    address: executor.address,
    job: template,
    polar: executor.polar,
    cwd: process.cwd(),
    cpus: executor.cpus,
    memoryBytes: executor.memoryBytes,
    ...(executor.shared ? { shared: resolve(executor.shared) } : {}),
    retries: executor.retries,
    // servers are given to each sample by the driver, one per rollout (the least loaded)
    backendUrls: jobBackendUrls(job.setup.agent),
    out,
    agent: context.label,
    env: nodeEnv(),
    signal: context.signal,
  });
  return runEvalWith(
    {
      instances,
      out,
      samples: job.samples,
      resume: job.resume,
      overwrite: job.overwrite,
      dataset: job.dataset,
      progress: !log.quiet,
      agent: context.label,
      runtime: { kind: job.setup.runtime.kind },
      ...(job.settings ? { settings: job.settings } : {}),
      ...(job.config ? { config: job.config } : {}),
    },
    execute,
  );
}
