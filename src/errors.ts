/**
 * Typed errors. Commands throw these; `main` in src/cli.ts maps them to exit codes and one-line messages
 * (stacks only under --debug). Each error carries the context a user needs to fix the problem.
 */
const BRAND = Symbol.for('polar.error');

export type ExitCode = number;

/**
 * polar's exit codes, the one table every command returns from (docs/cli.md, "Exit codes", shows the same
 * rows; `--help` says them through EXIT_CODES_HELP in src/cli.ts; test/unit/cli/exit-codes.test.ts runs
 * every command against it). `short` is the words `--help` uses, `meaning` the docs' column.
 */
export const EXIT_TABLE = [
  { name: 'ok', code: 0, short: 'ok', meaning: 'success (also `--help`, `--version`)' },
  { name: 'failure', code: 1, short: 'failure', meaning: 'failure (a run failed; an internal error)' },
  {
    name: 'usage',
    code: 2,
    short: 'usage error',
    meaning:
      'usage error: an unknown or bad flag or value, a missing option, an unknown command; `polar` alone',
  },
  {
    name: 'badInput',
    code: 3,
    short: 'bad or missing input',
    meaning:
      "bad input data: an input file or directory (an argument or a flag's) that is missing, unreadable or malformed, named with the line and field; an empty result (`build` that writes no trajectory)",
  },
  {
    name: 'environment',
    code: 4,
    short: 'environment (missing tool or engine)',
    meaning:
      'environment: a tool, engine or GPU is missing (a harness or a Python with torch that is not installed); an inference server that is down or set up wrong',
  },
  {
    name: 'belowThreshold',
    code: 5,
    short: 'below --fail-under (eval)',
    meaning: '`polar eval --fail-under`: pass@1 below the threshold',
  },
  {
    name: 'hangup',
    code: 129,
    short: 'SIGHUP',
    meaning: 'stopped by SIGHUP (a closed terminal): 128 + 1',
  },
  {
    name: 'interrupted',
    code: 130,
    short: 'Ctrl-C (SIGINT)',
    meaning: 'stopped by SIGINT (Ctrl-C): 128 + 2',
  },
  {
    name: 'terminated',
    code: 143,
    short: 'SIGTERM',
    meaning:
      'stopped by SIGTERM (`timeout`, Slurm, Kubernetes): 128 + 15; `serve` and `gym` exit 0 (a server asked to stop)',
  },
] as const;

type ExitName = (typeof EXIT_TABLE)[number]['name'];

/** The exit codes by name: `EXIT.badInput` is 3. */
export const EXIT = Object.fromEntries(EXIT_TABLE.map((row) => [row.name, row.code])) as {
  readonly [K in ExitName]: Extract<(typeof EXIT_TABLE)[number], { name: K }>['code'];
};

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

/**
 * An input file or directory polar cannot read (missing, a directory where a file belongs, no permission):
 * bad input, exit 3, in every command alike. `what` names where the path came from (`--instance`,
 * `checkpoint`); the message reads `--instance row.json: no such file or directory`.
 */
export function unreadableInput(
  path: string,
  error: unknown,
  options: { what?: string; hint?: string } = {},
): InputError {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  const problem =
    code === 'ENOENT'
      ? 'no such file or directory'
      : code === 'EISDIR'
        ? 'is a directory, not a file'
        : code === 'EACCES'
          ? 'permission denied'
          : `cannot be read (${errorMessage(error)})`;
  const e = new InputError(path, undefined, undefined, problem, options.hint);
  if (options.what) e.message = `${options.what} ${e.message}`;
  return e;
}

/** Something missing from the machine (python, torch, a harness binary). */
export class EnvironmentError extends PolarError {
  constructor(message: string, hint?: string) {
    super(message, { exitCode: EXIT.environment, hint });
  }
}

/**
 * An environment could not be set up (a checkout or a container start failed). An expected failure of
 * one sample: the orchestrator records it as that sample's error, and the CLI reports it as one line.
 * Thrown by the runtimes and the environments they build (src/rollout/runtime/, src/rollout/env/).
 */
export class RuntimeError extends PolarError {
  constructor(message: string, hint?: string) {
    super(message, { hint });
  }
}

export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
