/**
 * An environment polar built is shown to work before a score from it counts (reward-integrity.md §3:
 * SWE-bench's gold runs, R2E-Gym's reward 1 after the ground truth, NeMo Gym's golden rollouts). The
 * check grades, through the very path a sample is graded by (gradePatch: the runtime, the per-sample
 * install, the test run, the import guard, the log), the row's gold patch: it must resolve. A row
 * without one gets its base tree graded instead (an empty patch, run): its PASS_TO_PASS must pass.
 * Either way the verdict is a fact about the environment as the samples will use it: a test runner
 * that crashes on the environment's Python before collecting (pytest 5.4 on 3.11), a missing package,
 * an install that fails.
 *
 * The verdict is kept with the cached environment (`<environment>/polar-validation.json`, keyed by the
 * environment's key: a rebuilt environment is a new folder, checked again; one verdict per set of
 * per-sample steps, pre_install and install, which the key leaves out), made once per machine under
 * a lock (`<environment>.validate.lock`), by the first instance of the environment that asks. Samples of
 * an environment that failed are `error`s naming the environment and the failing tests, counted apart in
 * the report (`excluded`), never a reward of 0.
 */
import { createHash } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { log } from '../util/log.ts';
import type { SweInstance } from './dataset.ts';
import type { Environments } from './env/build.ts';
import { withLock } from './env/lock.ts';
import type { CachedEnv, EnvRecipe } from './env/types.ts';
import { type GradeStatus, gradePatch } from './grade.ts';
import { END_MARKER, START_MARKER } from './resolve.ts';
import type { Runtime } from './runtime/types.ts';

export const VALIDATION_FILE = 'polar-validation.json';

export interface EnvVerdict {
  v: 1;
  /** the environment's key and name (the cache entry it is kept in) */
  key: string;
  /** the hash of the per-sample steps checked with it (pre_install, install: not part of the key) */
  steps: string;
  environment: string;
  repo: string;
  version: string;
  valid: boolean;
  /** gold: the row's gold patch graded; pass_to_pass: the base tree graded, its PASS_TO_PASS checked */
  mode: 'gold' | 'pass_to_pass';
  instance_id: string;
  base_commit: string;
  /** the grade the check got */
  status: GradeStatus;
  reason: string | null;
  /** the tests that should have passed and did not */
  failing: string[];
  /** the test run's last error line (a runner that crashed before collecting says why), or null */
  said: string | null;
  runtime: string;
  validated_at: string;
  duration_ms: number;
}

/** A verdict in words: why the environment's samples get no score (null when valid). */
export function verdictProblem(v: EnvVerdict): string | null {
  if (v.valid) return null;
  const what = v.mode === 'gold' ? `the gold patch of ${v.instance_id}` : `the base tree of ${v.instance_id}`;
  const failing = v.failing.length
    ? `; failing: ${v.failing.slice(0, 5).join(', ')}${v.failing.length > 5 ? `, ... (${v.failing.length})` : ''}`
    : '';
  const said = v.said ? `; the test run said: ${v.said}` : '';
  return `environment ${v.environment} failed validation: ${what} was ${v.status} (${v.reason ?? 'no reason given'})${failing}${said}`;
}

/** The last `SomethingError: ...` line of a test run's output (between the markers when they are there). */
export function lastErrorLine(log: string): string | null {
  const start = log.lastIndexOf(START_MARKER);
  const end = log.lastIndexOf(END_MARKER);
  const run = start !== -1 ? log.slice(start, end > start ? end : undefined) : log;
  const lines = run.split('\n').filter((l) => /^[A-Za-z_][\w.]*(Error|Exception|Exit)\w*: \S/.test(l));
  return lines.at(-1)?.trim().slice(0, 300) ?? null;
}

/** the per-sample steps of a recipe, hashed: a verdict holds for the environment with these steps */
export const stepsKey = (recipe: Pick<EnvRecipe, 'preInstall' | 'install'>) =>
  createHash('sha256')
    .update(JSON.stringify([recipe.preInstall, recipe.install]))
    .digest('hex')
    .slice(0, 16);

/** the verdicts kept with an environment, one per set of per-sample steps */
type VerdictFile = { v: 1; key: string; verdicts: Record<string, EnvVerdict> };

async function readVerdicts(cached: Pick<CachedEnv, 'dir' | 'key'>): Promise<VerdictFile> {
  try {
    const f = JSON.parse(await readFile(join(cached.dir, VALIDATION_FILE), 'utf8')) as VerdictFile;
    if (f.v === 1 && f.key === cached.key && f.verdicts) return f;
  } catch {
    // none yet
  }
  return { v: 1, key: cached.key, verdicts: {} };
}

/** The verdict kept with a cached environment for its recipe's per-sample steps, or null when it has none. */
export async function readVerdict(
  cached: Pick<CachedEnv, 'dir' | 'key' | 'recipe'>,
): Promise<EnvVerdict | null> {
  return (await readVerdicts(cached)).verdicts[stepsKey(cached.recipe)] ?? null;
}

export interface EnvValidationOptions {
  testTimeoutMs: number;
  signal?: AbortSignal;
}

export class EnvValidation {
  private readonly verdicts = new Map<string, Promise<EnvVerdict | null>>();

  constructor(
    readonly runtime: Runtime,
    readonly environments: Environments,
    readonly options: EnvValidationOptions,
  ) {}

  /**
   * The verdict of the instance's environment, checked with this instance if the environment has none
   * yet; null when the instance gets no polar-built environment, or when the check could not finish
   * (the environment did not build: its samples get that error themselves; an interrupt).
   */
  async verdict(instance: SweInstance): Promise<EnvVerdict | null> {
    const cached = await this.environments.forInstance(instance);
    if (!cached) return null;
    const key = `${cached.key}\0${stepsKey(cached.recipe)}`;
    let promise = this.verdicts.get(key);
    if (!promise) {
      promise = this.kept(cached, instance);
      this.verdicts.set(key, promise);
      promise.then(
        (v) => v === null && this.verdicts.delete(key),
        () => this.verdicts.delete(key),
      );
    }
    return promise;
  }

  /** why a sample of `instance` gets no score (its environment failed validation), or null */
  async problem(instance: SweInstance): Promise<{ environment: string; reason: string } | null> {
    const v = await this.verdict(instance);
    const reason = v ? verdictProblem(v) : null;
    return v && reason ? { environment: v.environment, reason } : null;
  }

  private async kept(cached: CachedEnv, instance: SweInstance): Promise<EnvVerdict | null> {
    const stored = await readVerdict(cached);
    if (stored) return stored;
    return withLock(`${cached.dir}.validate.lock`, async () => {
      const again = await readVerdict(cached);
      if (again) return again;
      const v = await this.check(cached, instance);
      if (v) {
        const file = await readVerdicts(cached);
        file.verdicts[v.steps] = v;
        await writeFile(join(cached.dir, VALIDATION_FILE), `${JSON.stringify(file, null, 2)}\n`);
        const problem = verdictProblem(v);
        if (problem) log.warn(problem);
        else
          log.info(
            `environment ${cached.name}: validated (${v.mode === 'gold' ? 'gold patch resolved' : 'PASS_TO_PASS passed'} on ${v.instance_id})`,
          );
      }
      return v;
    });
  }

  /** grades the gold patch (or the base tree) of `instance` as a sample is graded */
  private async check(cached: CachedEnv, instance: SweInstance): Promise<EnvVerdict | null> {
    const mode = instance.patch.trim() === '' ? 'pass_to_pass' : 'gold';
    log.info(
      `environment ${cached.name}: validating (${mode === 'gold' ? 'the gold patch' : 'PASS_TO_PASS on the base tree'} of ${instance.instance_id})`,
    );
    const started = performance.now();
    const grade = await gradePatch(this.runtime, instance, mode === 'gold' ? instance.patch : '', {
      testTimeoutMs: this.options.testTimeoutMs,
      gradeEmpty: true,
      ...(this.options.signal ? { signal: this.options.signal } : {}),
    });
    // no verdict when the environment was never reached (a build error: the samples report it) or the
    // check was cut short
    if (this.options.signal?.aborted || (grade.status === 'error' && grade.environment === null)) return null;
    const failing =
      mode === 'gold'
        ? [...grade.fail_to_pass.failed, ...grade.pass_to_pass.failed]
        : grade.pass_to_pass.failed;
    const valid =
      mode === 'gold' ? grade.status === 'resolved' : grade.status !== 'error' && failing.length === 0;
    return {
      v: 1,
      key: cached.key,
      steps: stepsKey(cached.recipe),
      environment: cached.name,
      repo: cached.recipe.repo,
      version: cached.recipe.version,
      valid,
      mode,
      instance_id: instance.instance_id,
      base_commit: instance.base_commit,
      status: grade.status,
      reason: grade.reason,
      failing,
      said: valid ? null : lastErrorLine(grade.log),
      runtime: this.runtime.kind,
      validated_at: new Date().toISOString(),
      duration_ms: Math.round(performance.now() - started),
    };
  }
}
