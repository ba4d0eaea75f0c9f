/**
 * The samples a run does not score: those of an environment polar built that failed validation
 * (src/rollout/validate.ts). Each is an `error` line marked `excluded: invalid_environment`, with no agent
 * run and no grade; the report counts them apart (report.ts).
 */
import type { SweInstance } from '../dataset.ts';
import { EnvValidation } from '../validate.ts';
import type { EvalOptions } from './run.ts';

/** a sample of an environment that failed validation (its line says so: `excluded`) */
export class ExcludedSample extends Error {}

/**
 * The validation of the instance's environment (default: on the runtime's environments, when polar
 * grades the row itself): why its samples are excluded, or null. A build that fails is not decided
 * here: the sample reports it as it always did.
 */
export async function invalidEnvironment(
  options: EvalOptions,
  instance: SweInstance,
): Promise<{ environment: string; reason: string } | null> {
  const validation = options.validation === undefined ? defaultValidation(options) : options.validation;
  if (
    !validation ||
    options.grade === 'none' ||
    instance.grader !== undefined ||
    options.verifier !== undefined
  )
    return null;
  if (options.rewards?.primary === 'judge') return null;
  return validation.problem(instance).catch(() => null);
}

const validations = new WeakMap<EvalOptions, EnvValidation | null>();
function defaultValidation(options: EvalOptions): EnvValidation | null {
  if (!validations.has(options)) {
    const environments = options.runtime.environments;
    validations.set(
      options,
      environments
        ? new EnvValidation(options.runtime, environments, {
            testTimeoutMs: options.testTimeoutMs,
            ...(options.signal ? { signal: options.signal } : {}),
          })
        : null,
    );
  }
  return validations.get(options) ?? null;
}
