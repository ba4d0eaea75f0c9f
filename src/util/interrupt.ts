/**
 * Stopping a long-running command (eval, loop, train, export) the same way whatever asks: Ctrl-C
 * (SIGINT), `timeout`, Slurm and Kubernetes (SIGTERM), a closed terminal (SIGHUP). The first signal
 * aborts `signal`: no new work starts, work in flight is stopped and set aside for `--resume`, and the
 * command returns 128 + the signal's number (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP). A second
 * signal ends the process at once with the same code. Servers (serve, gym) stop through `untilSignal`
 * (src/http/server.ts) and return the same codes. Conventions: docs/cli.md, "Exit codes".
 */
import { constants } from 'node:os';
import { PolarError } from '../errors.ts';
import { log } from './log.ts';

export const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/** 128 + the signal's number: what a shell reports for a process the signal ended. */
export function signalExitCode(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? constants.signals.SIGINT);
}

/** `{ signal }` aborted by the first of `signals` to abort, `{}` when none is given (to spread into options). */
export function eitherSignal(...signals: (AbortSignal | undefined)[]): { signal?: AbortSignal } {
  const given = signals.filter((s): s is AbortSignal => s !== undefined);
  if (given.length === 0) return {};
  return { signal: given.length === 1 ? given[0]! : AbortSignal.any(given) };
}

/** A command stopped by a signal: its exit code is 128 + the signal's number, its hint how to continue. */
export class InterruptedError extends PolarError {
  readonly signal: NodeJS.Signals;
  /** what was stopped (the message without its `interrupted by SIGNAL:` head) */
  readonly what: string;
  constructor(signal: NodeJS.Signals, message: string, hint?: string) {
    super(`interrupted by ${signal}: ${message}`, {
      exitCode: signalExitCode(signal),
      ...(hint ? { hint } : {}),
    });
    this.signal = signal;
    this.what = message;
  }

  /** The same stop with another hint: a command that runs another's phases says how to go on itself. */
  withHint(hint: string): InterruptedError {
    return new InterruptedError(this.signal, this.what, hint);
  }
}

/** The signal that aborted `signal` (an Interrupt's), or SIGINT for an abort without one. */
export function stopSignalOf(signal: AbortSignal | undefined): NodeJS.Signals {
  const reason = signal?.reason as { signal?: unknown } | undefined;
  return typeof reason?.signal === 'string' ? (reason.signal as NodeJS.Signals) : 'SIGINT';
}

/** Throws an InterruptedError when `signal` was aborted (between the phases of a long command). */
export function throwIfStopped(signal: AbortSignal | undefined, message: string, hint?: string): void {
  if (signal?.aborted) throw new InterruptedError(stopSignalOf(signal), message, hint);
}

export class Interrupt {
  private readonly controller = new AbortController();
  private readonly handlers = new Map<NodeJS.Signals, () => void>();
  private first: NodeJS.Signals | null = null;

  /** `stopping` is said once on stderr when the first signal arrives (what the command does now). */
  constructor(private readonly stopping: string) {
    for (const name of STOP_SIGNALS) {
      const handler = () => this.receive(name);
      this.handlers.set(name, handler);
      process.on(name, handler);
    }
  }

  /** aborted by the first signal; its reason carries the signal's name (`stopSignalOf`) */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** the first signal received, or null */
  get received(): NodeJS.Signals | null {
    return this.first;
  }

  /** 128 + the first signal's number (0 when none came) */
  get exitCode(): number {
    return this.first ? signalExitCode(this.first) : 0;
  }

  /** What a signal does; public so tests can deliver one without signalling the test runner. */
  receive(name: NodeJS.Signals): void {
    if (this.first) {
      log.warn(`${name} again: stopping now`);
      // the second signal is the user insisting: nothing more is waited for (exec.ts kills the trees on exit)
      process.exit(signalExitCode(this.first));
    }
    this.first = name;
    log.warn(
      `${name} received: ${this.stopping} (${name === 'SIGINT' ? 'Ctrl-C' : 'the signal'} again stops at once)`,
    );
    this.controller.abort({ signal: name });
  }

  /** Stops listening (the command is over): signals get their default behaviour again. */
  dispose(): void {
    for (const [name, handler] of this.handlers) process.off(name, handler);
    this.handlers.clear();
  }
}

/** Listens for SIGINT, SIGTERM and SIGHUP until `dispose`; see Interrupt. */
export function onStopSignals(stopping: string): Interrupt {
  return new Interrupt(stopping);
}
