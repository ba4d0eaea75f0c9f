/**
 * Typed errors. Commands throw these; `main` in src/cli.ts maps them to exit codes and one-line messages
 * (stacks only under --debug). Each error carries the context a user needs to fix the problem.
 */
const BRAND = Symbol.for('polar.error');

export type ExitCode = number;

export const EXIT = {
  ok: 0,
  failure: 1,
  usage: 2,
  badInput: 3,
  environment: 4,
  /** evaluation ran but fell below --fail-under */
  belowThreshold: 5,
  interrupted: 130,
} as const;

export class PolarError extends Error {
  readonly [BRAND] = true;
  readonly exitCode: ExitCode;
  readonly hint: string | undefined;

  constructor(message: string, options: { exitCode?: ExitCode; hint?: string; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.exitCode = options.exitCode ?? EXIT.failure;
    this.hint = options.hint;
  }

  static isInstance(value: unknown): value is PolarError {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
  }
}

/** A user option with a bad value: names the option, the value and the fix. */
export class UsageError extends PolarError {
  constructor(message: string, hint?: string) {
    super(message, { exitCode: EXIT.usage, hint });
  }
}

/** Bad input data: names the file, the line and the field. */
export class InputError extends PolarError {
  readonly file: string;
  readonly line: number | undefined;
  readonly field: string | undefined;

  constructor(
    file: string,
    line: number | undefined,
    field: string | undefined,
    problem: string,
    hint?: string,
  ) {
    const where = line === undefined ? file : `${file}:${line}`;
    super(`${where}: ${field ? `${field}: ` : ''}${problem}`, { exitCode: EXIT.badInput, hint });
    this.file = file;
    this.line = line;
    this.field = field;
  }
}

/** Something missing from the machine (python, torch, a harness binary). */
export class EnvironmentError extends PolarError {
  constructor(message: string, hint?: string) {
    super(message, { exitCode: EXIT.environment, hint });
  }
}

export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
