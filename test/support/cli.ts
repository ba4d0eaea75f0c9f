/**
 * The CLI as a user runs it, for every test that needs it: `node bin/polar ARGS` (runPolar, runPolarSync,
 * startPolar for one that runs until stopped; optionally under a file-size limit), the repository root,
 * and a loopback port nothing listens on (closedPort) for the "server is down" tests. polarInProcess runs
 * the same entry (src/cli.ts main, which bin/polar calls) in the test's own process, for the tests that
 * check parsing, refusals, exit codes and outputs: a spawned polar costs over a second of CPU (tsx and
 * the imports); the tests of the binary itself (signals, a closed stdout, stdin, limits) spawn it.
 */
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Serializer } from 'node:v8';
import { execa, execaSync, type Options, type Result, type ResultPromise } from 'execa';

/** The repository root. */
export const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
/** bin/polar */
export const POLAR = join(ROOT, 'bin/polar');

export interface PolarOptions {
  /** default: the repository root */
  cwd?: string;
  /** added to the environment (NO_COLOR=1 is always set) */
  env?: Record<string, string | undefined>;
  /** false: `env` is the whole environment */
  extendEnv?: boolean;
  /** stdin's content (default: none, stdin ignored) */
  input?: string;
  /** 'pipe': an open stdin nobody writes to (startPolar) */
  stdin?: 'ignore' | 'pipe';
  /** a file as stdin */
  inputFile?: string;
  /** kill polar after this long (default: no limit but the test runner's) */
  timeoutMs?: number;
  /** run polar under a file-size limit of this many KiB (fileSizeLimited) */
  fileSizeLimitKiB?: number;
}

/** execa's result, and the exit code as a number (-1 when polar was killed or did not start). */
export type PolarRun = Result<{ reject: false }> & { code: number; stdout: string; stderr: string };

function execaOptions(o: PolarOptions): Options {
  return {
    cwd: o.cwd ?? ROOT,
    env: { ...o.env, NO_COLOR: '1' },
    extendEnv: o.extendEnv ?? true,
    reject: false,
    ...(o.timeoutMs !== undefined ? { timeout: o.timeoutMs } : {}),
    maxBuffer: 256 << 20,
    ...(o.input !== undefined
      ? { input: o.input }
      : o.inputFile
        ? { inputFile: o.inputFile }
        : { stdin: o.stdin ?? 'ignore' }),
  };
}

/** argv run by bash under a file-size limit of `kib` KiB (`ulimit -f`; SIGXFSZ left at its default). */
export function fileSizeLimited(kib: number, argv: string[]): string[] {
  return ['bash', '-c', `ulimit -f ${kib}; exec "$@"`, 'limited', ...argv];
}

/** The command line of `node bin/polar ARGS`, under the options' limits. */
function polarArgv(args: string[], o: PolarOptions): [string, string[]] {
  const argv = [process.execPath, POLAR, ...args];
  const limited = o.fileSizeLimitKiB === undefined ? argv : fileSizeLimited(o.fileSizeLimitKiB, argv);
  return [limited[0]!, limited.slice(1)];
}

function withCode<R extends { exitCode?: number; stdout?: unknown; stderr?: unknown }>(
  r: R,
): R & { code: number; stdout: string; stderr: string } {
  return Object.assign(r, {
    code: r.exitCode ?? -1,
    stdout: String(r.stdout ?? ''),
    stderr: String(r.stderr ?? ''),
  });
}

/** Runs `node bin/polar ARGS` to the end; never throws on a non-zero exit. */
export async function runPolar(args: string[], options: PolarOptions = {}): Promise<PolarRun> {
  return withCode(await execa(...polarArgv(args, options), execaOptions(options))) as PolarRun;
}

/** runPolar, synchronously (for tests written as plain sequences of commands). */
export function runPolarSync(args: string[], options: PolarOptions = {}): PolarRun {
  return withCode(execaSync(...polarArgv(args, options), execaOptions(options) as never)) as PolarRun;
}

/** Starts `node bin/polar ARGS` (a server, or a run to interrupt): the execa child, its output piped. */
export function startPolar(args: string[], options: PolarOptions = {}): ResultPromise {
  return execa(...polarArgv(args, options), execaOptions(options));
}

/** What polarInProcess gives back: the exit code and what polar wrote on stdout and stderr. */
export interface InProcessRun {
  code: number;
  stdout: string;
  stderr: string;
}

let inProcessQueue: Promise<unknown> = Promise.resolve();

/**
 * What every message of node's test runner starts with: a test file run by `node --test` reports to the
 * runner on its stdout, in V8's serialization format (Node 20's v8-serializer reporter).
 */
const V8_HEADER = (() => {
  const serializer = new Serializer();
  serializer.writeHeader();
  return serializer.releaseBuffer();
})();

/** A chunk the test runner writes on stdout (not polar's output): it goes on to the runner. */
function isRunnerMessage(chunk: string | Uint8Array): boolean {
  return (
    typeof chunk !== 'string' && chunk.length > V8_HEADER.length && V8_HEADER.every((b, i) => chunk[i] === b)
  );
}

/**
 * Runs `polar ARGS` in this process through src/cli.ts `main` (what bin/polar runs), one at a time:
 * stdout and stderr are captured, `env` is set for the run and restored after it, polar's log starts
 * from its defaults (no -q or --debug left over from the run before). No stdin, no cwd, no signals:
 * runPolar for those.
 */
export function polarInProcess(
  args: string[],
  options: { env?: Record<string, string | undefined> } = {},
): Promise<InProcessRun> {
  const run = inProcessQueue.then(() => runInProcess(args, { NO_COLOR: '1', ...options.env }));
  inProcessQueue = run.catch(() => {});
  return run;
}

async function runInProcess(args: string[], env: Record<string, string | undefined>): Promise<InProcessRun> {
  const out: string[] = [];
  const err: string[] = [];
  const { write: stdoutWrite } = process.stdout;
  const { write: stderrWrite } = process.stderr;
  const capture = (into: string[], original: typeof process.stdout.write, stream: NodeJS.WriteStream) =>
    ((chunk: string | Uint8Array, ...rest: unknown[]) => {
      // the test runner's own messages, written while polar runs, are not polar's output
      if (isRunnerMessage(chunk))
        return (original as (...a: unknown[]) => boolean).call(stream, chunk, ...rest);
      into.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
      const done = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
      done?.();
      return true;
    }) as typeof process.stdout.write;
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  const set = (values: Record<string, string | undefined>) => {
    for (const [k, v] of Object.entries(values)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
  // imported when first used: the files that only spawn polar do not load the CLI
  const [{ main }, { log }] = await Promise.all([
    import('../../src/cli.ts'),
    import('../../src/util/log.ts'),
  ]);
  set(env);
  log.configure({ quiet: false, debug: process.env.POLAR_DEBUG === '1' });
  process.stdout.write = capture(out, stdoutWrite, process.stdout);
  process.stderr.write = capture(err, stderrWrite, process.stderr);
  try {
    const code = await main(['node', 'polar', ...args]);
    return { code, stdout: out.join(''), stderr: err.join('') };
  } finally {
    process.stdout.write = stdoutWrite;
    process.stderr.write = stderrWrite;
    set(saved);
    log.configure({ quiet: false, debug: process.env.POLAR_DEBUG === '1' });
  }
}

/** A loopback port nothing listens on: one is bound, noted and closed. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** http://127.0.0.1:PORT + path on a closed port. */
export async function closedUrl(path = '/v1'): Promise<string> {
  return `http://127.0.0.1:${await closedPort()}${path}`;
}
