/**
 * The samples a run does not score: those of an environment polar built that failed validation
 * (src/rollout/validate.ts). Each is an `error` line marked `excluded: invalid_environment`, with no agent
 * run and no grade; the report counts them apart (report.ts).
 */
import { errorMessage, PolarError, RuntimeError } from '../../errors.ts';
import type { SweInstance } from '../dataset.ts';
import { EnvValidation } from '../validate.ts';
import type { EvalOptions } from './run.ts';

/** a sample of an environment that failed validation (its line says so: `excluded`) */
export class ExcludedSample extends Error {}

/**
 * The validation of the instance's environment (default: on the runtime's environments, when polar
 * grades the row itself): why its samples are excluded, or null. A build that fails is not decided
 * here: the sample reports it as it always did. A validation that cannot finish for another reason
 * throws: the sample is an error (retried by --resume), not scored unvalidated.
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
  return validation.problem(instance).catch((error: unknown) => {
    // a build or set-up that fails (a PolarError: a failed step, a missing interpreter) is the sample's
    // to report, as it always did: its own prepare meets it again
    if (error instanceof PolarError) return null;
    // anything else (the verdict could not be read or written) left the environment unchecked: the
    // sample is an error, never a score from an environment nobody showed to work
    throw new RuntimeError(`environment validation could not finish: ${errorMessage(error)}`);
  });
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
