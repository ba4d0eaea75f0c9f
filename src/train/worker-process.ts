/**
 * The training worker as a child process: runs it (python -m polar_train, or torchrun), feeds each of its
 * JSON-lines events (workerEventSchema) to the launcher, keeps stderr in worker.log, and maps how it
 * ended to success or one clear error (workerError).
 */
import { createWriteStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { execa } from 'execa';
import { EXIT, PolarError } from '../errors.ts';
import { firstIssue } from '../util/zod.ts';
import { workerEventSchema } from './schema.ts';

/** A worker process to start: the program, its arguments, its environment (src/train/launch.ts makes it). */
export interface WorkerCommand {
  file: string;
  args: string[];
  env: Record<string, string>;
}

export interface WorkerOutcome {
  exitCode: number | undefined;
  signal: string | undefined;
  error: Record<string, unknown> | undefined;
  done: Record<string, unknown> | undefined;
  stderrTail: string[];
  /** an event that does not match workerEventSchema */
  protocolError?: string;
}

/** Runs the worker, feeding each JSON event to onEvent; stderr (and stray stdout) goes to logPath. */
export async function runWorker(
  cmd: WorkerCommand,
  onEvent: (event: Record<string, unknown>) => void,
  logPath: string,
  /** stops the worker (SIGTERM, SIGKILL 10 s later): a stop signal, or the launcher refused what it reported */
  signal?: AbortSignal,
): Promise<WorkerOutcome> {
  const logFile = createWriteStream(logPath, { flags: 'a' });
  const child = execa(cmd.file, cmd.args, {
    env: cmd.env,
    reject: false,
    // a stop signal ends the worker (SIGTERM; torchrun passes it to its ranks), SIGKILL 10 s later
    ...(signal ? { cancelSignal: signal, forceKillAfterDelay: 10_000 } : {}),
    buffer: false,
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const tail: string[] = [];
  const outcome: WorkerOutcome = {
    exitCode: undefined,
    signal: undefined,
    error: undefined,
    done: undefined,
    stderrTail: tail,
  };
  const readOut = (async () => {
    if (!child.stdout) return;
    for await (const line of createInterface({ input: child.stdout, crlfDelay: Number.POSITIVE_INFINITY })) {
      let event: Record<string, unknown> | undefined;
      if (line.startsWith('{')) {
        try {
          event = JSON.parse(line) as Record<string, unknown>;
        } catch {
          event = undefined;
        }
      }
      if (!event || typeof event.event !== 'string') {
        logFile.write(`${line}\n`);
        continue;
      }
      const checked = workerEventSchema.safeParse(event);
      if (!checked.success) {
        // the worker and the launcher disagree on the protocol (src/train/schema.ts): a bug, said once
        const { field, message } = firstIssue(checked.error);
        outcome.protocolError ??= `worker event ${line.slice(0, 200)}: ${field}: ${message}`;
        logFile.write(`${line}\n`);
        continue;
      }
      if (event.event === 'error') {
        outcome.error ??= event; // under torchrun every rank may report; the first one wins
        if (typeof event.traceback === 'string') logFile.write(event.traceback);
        continue;
      }
      if (event.event === 'done') outcome.done = event;
      onEvent(event);
    }
  })();
  const readErr = (async () => {
    if (!child.stderr) return;
    for await (const line of createInterface({ input: child.stderr, crlfDelay: Number.POSITIVE_INFINITY })) {
      logFile.write(`${line}\n`);
      if (line.trim() === '') continue;
      tail.push(line);
      if (tail.length > 20) tail.shift();
    }
  })();
  const result = await child;
  await Promise.all([readOut, readErr]);
  await new Promise<void>((done) => logFile.end(done));
  outcome.exitCode = result.exitCode;
  outcome.signal = result.signal;
  if (result.exitCode === undefined && result.signal === undefined && result.failed) {
    // the command itself could not start
    tail.push(result.shortMessage ?? 'the worker could not be started');
  }
  return outcome;
}

/** Maps a worker outcome to success or one clear error. */
export function workerError(
  o: WorkerOutcome,
  ctx: { logPath: string; out: string; follower?: boolean },
): PolarError | undefined {
  if (o.protocolError) {
    return new PolarError(`training worker broke its protocol: ${o.protocolError}`, {
      hint: `the worker (src/train/worker) and src/train/schema.ts disagree; worker log: ${ctx.logPath}`,
    });
  }
  if (o.error) {
    const message = String(o.error.message ?? 'unknown error');
    if (o.error.kind === 'sampling_mismatch') {
      return new PolarError(`training refused: ${message}`, {
        exitCode: EXIT.badInput,
        hint: 'train the model that sampled these trajectories (--model); a known, larger gap (another sampling temperature, a quantised server) can be allowed with sampling_gap_limit in train.json (docs/train.md)',
      });
    }
    if (o.error.kind === 'checkpoint') {
      // the worker's CheckpointError names the checkpoint and the way out (an unknown or corrupt version)
      return new PolarError(`training refused: ${message}`, {
        exitCode: EXIT.badInput,
        hint: 'checkpoint versions and what each resumes: docs/train.md, "Checkpoints, resume and failures"',
      });
    }
    if (o.error.kind === 'non_finite') {
      return new PolarError(`training stopped: ${message}`, {
        hint: `continue from the last good checkpoint: the same command with --resume (--out ${ctx.out}); lower --lr or check the data first`,
      });
    }
    return new PolarError(`training worker failed: ${message}`, {
      hint: `worker log with the Python traceback: ${ctx.logPath}`,
    });
  }
  if (o.exitCode !== 0) {
    const how = o.signal
      ? `killed by ${o.signal}`
      : o.exitCode === undefined
        ? 'did not start'
        : `exit code ${o.exitCode}`;
    const last = o.stderrTail.at(-1) ?? 'no output';
    return new PolarError(`training worker crashed (${how}): ${last}`, {
      hint: `full worker log: ${ctx.logPath}`,
    });
  }
  // only global rank 0 reports `done`: on a node without it (a run across nodes), exit 0 is success
  if (!o.done && !ctx.follower)
    return new PolarError('training worker exited without finishing', { hint: `worker log: ${ctx.logPath}` });
  return undefined;
}
