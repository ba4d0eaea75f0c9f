/**
 * The orchestrator: for every (instance, sample) run the agent in a fresh environment, take its patch,
 * grade it in another fresh environment, append a grading record to the capture, and write the run's
 * files. A bounded pool runs samples concurrently; one sample's failure is recorded as an `error`
 * result and never stops the run; --resume skips samples already graded; whole files are written
 * atomically (temp + rename) and results.jsonl grows one complete line at a time.
 * An infrastructure failure (src/rollout/outcome.ts) is an `error` with no reward and no grading record,
 * and its capture is set aside (src/rollout/run/out.ts); so is the capture of a sample cut short by an
 * interrupt, which is neither graded nor recorded and runs again on --resume.
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { CAPTURE_VERSION, type GradingRecord } from '../../capture/record.ts';
import { log } from '../../util/log.ts';
import { plural } from '../../util/plural.ts';
import { appendPrivate, mkdirPrivate, writeAtomic } from '../../util/private-files.ts';
import { insideDir } from '../../util/safe-path.ts';
import type { Agent, AgentOutcome } from '../agents.ts';
import type { SweInstance } from '../dataset.ts';
import { EnvBuildError } from '../env/types.ts';
import { killAllTrees } from '../exec.ts';
import type { GradeResult } from '../grade.ts';
import { recordFinished } from '../judge/finish.ts';
import type { RewardSetup } from '../judge/setup.ts';
import type { Runtime } from '../runtime/types.ts';
import type { EnvValidation } from '../validate.ts';
import { runAgentPhase } from './agent-phase.ts';
import { ExcludedSample, invalidEnvironment } from './excluded.ts';
import { EVAL_FILES } from './files.ts';
import { gradePhase } from './grade-phase.ts';
import { prepareOut, setAside } from './out.ts';
import { writePredictions } from './predictions.ts';
import { Progress } from './progress.ts';
import { buildReport, type Report, type ResultLine } from './report.ts';
import { readResults, sampleKey } from './results.ts';
import { type RunSettings, recordSettings } from './settings.ts';

export interface EvalOptions extends EvalPlan {
  agent: Agent;
  runtime: Runtime;
  concurrency: number;
  agentTimeoutMs: number;
  testTimeoutMs: number;
  /** 'polar' grades each sample itself; 'none' stops after the patch (the official harness grades later) */
  grade?: 'polar' | 'none';
  signal?: AbortSignal;
  /**
   * cancels this run alone (polar loop --overdue drop): each running harness is ended by its own process
   * group, a sample cut short is neither graded nor recorded, none starts after; unlike `signal` (an
   * interrupt: every process tree polar started is killed) other runs' processes are left alone
   */
  cancel?: AbortSignal;
  /**
   * a verifier grader command (src/rollout/verifier.ts) that replaces the SWE grading: it reads the rollout
   * as JSON on stdin and prints a reward in [0, 1]; a row's own `grader` field wins
   */
  verifier?: string;
  /** grade empty patches like any other instead of scoring them 0 outright */
  gradeEmpty?: boolean;
  /** grade a flagged sample 0 (src/rollout/integrity/findings.ts): loop's and gym's default, eval's option */
  rejectTampering?: boolean;
  /** the integrity layers of the test run (default on; off: the official script's run, for the benchmark) */
  hardened?: boolean;
  /** extra session meta for every capture (polar loop records the policy's step here) */
  meta?: Record<string, string>;
  /** where this run's samples run (a Slurm shard's node and job): each result line's `cluster` */
  clusterTag?: Record<string, unknown>;
  /**
   * the check that a polar-built environment works before its samples are scored (src/rollout/validate.ts);
   * default: one on the runtime's environments when polar grades the samples itself; null: none
   */
  validation?: EnvValidation | null;
}

export interface EvalOutcome {
  report: Report;
  results: ResultLine[];
  interrupted: boolean;
}

export async function appendGrading(capture: string, sessionId: string, line: ResultLine): Promise<void> {
  const record: GradingRecord & Record<string, unknown> = {
    v: CAPTURE_VERSION,
    type: 'grading',
    session: sessionId,
    task_id: line.instance_id,
    sample: line.sample,
    resolved: line.resolved,
    reward: line.reward ?? 0, // only graded samples get a grading record (and they have a reward)
    reason: line.reason,
    graded_at: new Date().toISOString(),
    status: line.status,
    suspicious: line.suspicious,
    ...(line.tampering ? { tampering: line.tampering } : {}),
  };
  await appendPrivate(capture, `${JSON.stringify(record)}\n`);
}

/** Runs and grades one sample; null when an interrupt cut it short (nothing graded, nothing recorded). */
async function runSample(
  options: EvalOptions,
  instance: SweInstance,
  sample: number,
  dirs: { captures: string; patches: string; logs: string },
): Promise<ResultLine | null> {
  const key = sampleKey(instance.instance_id, sample);
  const t0 = performance.now();
  const capturePath = insideDir(dirs.captures, `${key}.jsonl`);
  let agentMs = 0;
  let agent: AgentOutcome = { status: 'error', capture: null, sessionId: null, calls: 0, error: null };
  let patch = '';
  let grade: GradeResult | null = null;
  let verified: number | null = null;
  let failure: string | null = null;
  let excluded: { environment: string; reason: string } | null = null;
  try {
    excluded = await invalidEnvironment(options, instance);
    // an environment that failed validation: no agent run, no grade, an error counted apart
    if (excluded) throw new ExcludedSample(excluded.reason);
    const phase = await runAgentPhase(options, instance, sample, capturePath);
    if (phase === null) return null;
    ({ agent, agentMs, patch, failure } = phase);
    await writeAtomic(insideDir(dirs.patches, `${key}.diff`), patch);
    if (options.signal?.aborted || options.cancel?.aborted) return null;
    if (failure === null && options.grade !== 'none') {
      const graded = await gradePhase(options, { instance, sample, patch, agent }, { logs: dirs.logs, key });
      ({ grade, verified } = graded);
      failure = graded.failure;
    }
  } catch (error) {
    failure = (error as Error).message;
    // a failed environment build or install: its log beside the sample's (the reason names the step)
    if (error instanceof EnvBuildError && error.log)
      await writeAtomic(insideDir(dirs.logs, `${key}.env.log`), error.log);
  }
  if (options.signal?.aborted || options.cancel?.aborted) return null;
  const total = performance.now() - t0;
  const testsMs = grade?.durations_ms.tests ?? 0;
  const verdict = verified === null ? null : verified >= 1 ? 'resolved' : 'unresolved'; // a verifier's reward
  const status = failure !== null ? 'error' : (verdict ?? grade?.status ?? 'unresolved');
  const line: ResultLine = {
    instance_id: instance.instance_id,
    repo: instance.repo,
    sample,
    status,
    resolved: status === 'resolved',
    // an error is no result: no reward, no grading record (resume runs it again)
    // a verifier's reward is any number in [0, 1]; `resolved` is a full reward
    reward: status === 'error' ? null : (verified ?? (status === 'resolved' ? 1 : 0)),
    reason: failure ?? grade?.reason ?? (options.grade === 'none' ? 'not graded' : null),
    suspicious: grade?.suspicious ?? false,
    tampering: grade?.tampering ?? null,
    agent: {
      name: options.agent.name,
      status: agent.status,
      error: agent.error,
      calls: agent.calls,
      failed_calls: agent.failedCalls ?? 0,
      limit: agent.limit ?? null,
      hung_up_calls: agent.hungUpCalls ?? 0,
    },
    apply_method: grade?.apply_method ?? null,
    fail_to_pass: grade?.fail_to_pass ?? null,
    pass_to_pass: grade?.pass_to_pass ?? null,
    test_exit_code: grade?.test_exit_code ?? null,
    official_version: grade?.official_version ?? null,
    environment: grade?.environment ?? excluded?.environment ?? null,
    ...(excluded ? { excluded: 'invalid_environment' as const } : {}),
    ...(verified !== null ? { grader: 'verifier' } : {}),
    durations_ms: {
      total,
      agent: agentMs,
      tests: testsMs,
      overhead: total - agentMs - testsMs,
      grade_setup: grade?.durations_ms.setup ?? 0,
      apply: grade?.durations_ms.apply ?? 0,
      env_install: grade?.durations_ms.install ?? 0,
      parse: grade?.durations_ms.parse ?? 0,
    },
    capture: agent.capture && existsSync(agent.capture) ? agent.capture : null,
    patch_file: join(dirs.patches, `${key}.diff`),
    model_name_or_path: options.agent.modelName,
    model_patch_bytes: Buffer.byteLength(patch),
    finished_at: new Date().toISOString(),
    ...(options.clusterTag ? { cluster: options.clusterTag } : {}),
  };
  if (line.capture && status === 'error') {
    line.capture = await setAside(line.capture as string, 'error');
  } else if (line.capture && agent.sessionId && !options.rewards) {
    // (with --reward or a judge, the grading record is appended once the reward is final: runEvalWith)
    await appendGrading(line.capture as string, agent.sessionId, line).catch((error) =>
      log.warn(`${key}: cannot append the grading record to ${line.capture}: ${(error as Error).message}`),
    );
  }
  return line;
}

/** One (instance, sample) of a run. */
export type SampleJob = { instance: SweInstance; sample: number };

/** The run folder's sample folders (absolute). */
export interface EvalDirs {
  captures: string;
  patches: string;
  logs: string;
}

/**
 * Runs the jobs of an evaluation somewhere (this machine's pool, a cluster) and hands each finished
 * sample's result line to `record`, its capture, patch and logs already in `dirs` under the run's names.
 * A sample cut short by an interrupt is not recorded (resume runs it again).
 */
export type SampleExecutor = (
  jobs: SampleJob[],
  io: { dirs: EvalDirs; record: (line: ResultLine) => Promise<void> },
) => Promise<{ interrupted: boolean }>;

/** What a run folder's writer needs to know of the run, wherever its samples ran. */
export interface EvalPlan {
  instances: SweInstance[];
  out: string;
  samples: number;
  resume: boolean;
  /** clear a non-empty `out` first (without it, or resume, a non-empty `out` is refused) */
  overwrite?: boolean;
  /** label for the report */
  dataset: string;
  progress?: boolean;
  /** the agent and runtime named in the report and predictions */
  agent: Pick<Agent, 'name' | 'modelName'>;
  runtime: Pick<Runtime, 'kind'>;
  /** run only this sample index of each instance (a Ray task's one sample: the rollout job's sampleIndex) */
  sampleIndex?: number;
  /** polar eval's settings that decide the results (checked on --resume) and options given: run.json */
  settings?: RunSettings;
  config?: Record<string, unknown>;
  /** stops the judge's calls too */
  signal?: AbortSignal;
  /** the judge and the --reward expression (src/rollout/judge/setup.ts): each line's reward made final as it is recorded */
  rewards?: RewardSetup;
}

/** The samples of one run on this machine: a bounded pool of runSample. */
export function localExecutor(options: EvalOptions): SampleExecutor {
  return async (jobs, { dirs, record }) => {
    let next = 0;
    let interrupted = false;
    const onAbort = () => {
      interrupted = true;
      killAllTrees('SIGTERM');
    };
    options.signal?.addEventListener('abort', onAbort, { once: true });
    // a cancelled run: its harnesses end through `cancel` (runAgentPhase), no other run's trees are touched
    const onCancel = () => {
      interrupted = true;
    };
    options.cancel?.addEventListener('abort', onCancel, { once: true });
    if (options.cancel?.aborted) interrupted = true;
    const worker = async () => {
      while (!interrupted) {
        const job = jobs[next++];
        if (!job) return;
        const line = await runSample(options, job.instance, job.sample, dirs);
        if (interrupted || line === null) {
          // a sample cut short by the interrupt is not graded nor recorded: resume runs it again, afresh
          await setAside(
            join(dirs.captures, `${sampleKey(job.instance.instance_id, job.sample)}.jsonl`),
            'interrupted',
          );
          return;
        }
        await record(line);
      }
    };
    const width = Math.max(1, Math.min(options.concurrency, jobs.length || 1));
    await Promise.all(Array.from({ length: width }, worker));
    options.signal?.removeEventListener('abort', onAbort);
    options.cancel?.removeEventListener('abort', onCancel);
    return { interrupted };
  };
}

export async function runEval(options: EvalOptions): Promise<EvalOutcome> {
  return runEvalWith(options, localExecutor(options));
}

/**
 * A run folder written the same way wherever the samples run: --resume keeps graded samples, results.jsonl
 * grows one line per finished sample, predictions and report.json are written at the end.
 */
export async function runEvalWith(plan: EvalPlan, execute: SampleExecutor): Promise<EvalOutcome> {
  const out = resolve(plan.out);
  await prepareOut(out, plan);
  if (plan.settings) await recordSettings(out, plan.settings, plan.resume, plan.config);
  const dirs: EvalDirs = {
    captures: join(out, EVAL_FILES.captures),
    patches: join(out, EVAL_FILES.patches),
    logs: join(out, EVAL_FILES.logs),
  };
  for (const d of Object.values(dirs)) await mkdirPrivate(d);
  const resultsPath = join(out, EVAL_FILES.results);
  const previous = plan.resume ? await readResults(resultsPath) : new Map<string, ResultLine>();
  // errored samples are run again on resume; rewrite the file without them so each sample has one line,
  // and without a last line cut by a crash (new lines appended after it would be joined to it)
  const kept = new Map([...previous].filter(([, r]) => r.status !== 'error'));
  if (plan.resume) {
    await writeAtomic(resultsPath, [...kept.values()].map((r) => `${JSON.stringify(r)}\n`).join(''));
  } else {
    await writeAtomic(resultsPath, '');
  }
  const jobs: SampleJob[] = [];
  for (let j = 0; j < plan.samples; j++) {
    if (plan.sampleIndex !== undefined && j !== plan.sampleIndex) continue;
    for (const instance of plan.instances) {
      if (!kept.has(sampleKey(instance.instance_id, j))) jobs.push({ instance, sample: j });
    }
  }
  if (plan.resume && kept.size > 0)
    log.info(`resume: ${plural(kept.size, 'sample')} already graded, ${jobs.length} to run`);
  // a sample that runs again (errored, or cut short before its line was written) starts a fresh capture
  for (const job of jobs) {
    const set = await setAside(
      join(dirs.captures, `${sampleKey(job.instance.instance_id, job.sample)}.jsonl`),
      'interrupted',
    );
    if (set) log.debug(`set aside the capture of an unfinished sample: ${set}`);
  }
  const results = new Map(kept);
  const progress = new Progress(jobs.length, plan.progress ?? true);
  let writeChain = Promise.resolve();
  const recorded = new Set<string>();
  const record = async (line: ResultLine): Promise<void> => {
    const key = sampleKey(line.instance_id, line.sample);
    // a sample is recorded once: a second answer for it (a cluster retry that raced) is dropped
    if (recorded.has(key)) return;
    recorded.add(key);
    results.set(key, line);
    writeChain = writeChain.then(() => appendPrivate(resultsPath, `${JSON.stringify(line)}\n`));
    await writeChain;
    progress.tick(line);
  };
  const { interrupted } = await execute(jobs, {
    dirs,
    record: plan.rewards
      ? await recordFinished(plan.rewards, {
          out,
          jobs,
          instances: plan.instances,
          record,
          appendGrading,
          signal: plan.signal,
        })
      : record,
  });
  await writeChain;

  const ordered: ResultLine[] = [];
  for (let j = 0; j < plan.samples; j++) {
    for (const instance of plan.instances) {
      const r = results.get(sampleKey(instance.instance_id, j));
      if (r) ordered.push(r);
    }
  }
  await writePredictions(out, plan, results);
  const report = await writeReport(out, ordered, plan);
  return { report, results: ordered, interrupted };
}

/** Builds the report of a run's results and writes report.json (atomically). */
export async function writeReport(
  out: string,
  results: ResultLine[],
  run: Pick<EvalPlan, 'dataset' | 'agent' | 'runtime' | 'instances' | 'samples'>,
): Promise<Report> {
  const report = buildReport(results, {
    dataset: run.dataset,
    agent: run.agent.name,
    model: run.agent.modelName,
    runtime: run.runtime.kind,
    instances: run.instances.map((i) => i.instance_id),
    samples: run.samples,
  });
  await writeAtomic(join(out, EVAL_FILES.report), `${JSON.stringify(report, null, 2)}\n`);
  return report;
}
