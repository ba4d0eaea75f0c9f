/**
 * Shows the worker's progress: on a TTY an ora spinner with a bar and the latest step's metrics; otherwise
 * (CI, pipes) one plain line per step on stderr. `--json` forwards every worker event to stdout instead.
 */
import ora, { type Ora } from 'ora';
import { eta } from '../util/eta.ts';
import { log } from '../util/log.ts';
import type { WorkerEvent } from './schema.ts';

export interface StepEvent {
  event: 'step';
  step: number;
  total_steps: number;
  loss?: number | null;
  kl?: number | null;
  clip_frac?: number | null;
  entropy?: number | null;
  grad_norm?: number | null;
  tokens_per_s?: number | null;
  gpu_mem_gb?: number | null;
  tis_mean?: number | null;
  lr?: number | null;
  /** what the step trained on, as TRL logs it (the worker's metrics.jsonl line): its rollouts' reward */
  reward_mean?: number | null;
  reward_std?: number | null;
  /** mean |advantage|: 0 when every group scored alike (nothing to learn) */
  advantage_abs_mean?: number | null;
  /** trained tokens per rollout */
  response_tokens_mean?: number | null;
}

const fmt = (v: number | null | undefined, digits = 4): string =>
  v === null || v === undefined || !Number.isFinite(v)
    ? '-'
    : Math.abs(v) >= 1e4
      ? v.toExponential(2)
      : v.toFixed(digits);

const compact = (v: number | null | undefined): string => {
  if (v === null || v === undefined || !Number.isFinite(v)) return '-';
  if (v >= 1e6) return `${(v / 1e6).toFixed(1)}M`;
  if (v >= 1e3) return `${(v / 1e3).toFixed(1)}k`;
  return v.toFixed(0);
};

export function progressBar(done: number, total: number, width = 20): string {
  const frac = total > 0 ? Math.min(1, Math.max(0, done / total)) : 0;
  const full = Math.round(frac * width);
  return `[${'#'.repeat(full)}${'-'.repeat(width - full)}]`;
}

/**
 * One line of per-step metrics: what the step trained on (reward mean and standard deviation, mean
 * |advantage|, response tokens per rollout: TRL's default log), then loss, KL, clip fraction, entropy, grad
 * norm, tokens/s, GPU memory.
 */
export function formatStep(e: StepEvent): string {
  const mem = e.gpu_mem_gb === null || e.gpu_mem_gb === undefined ? '-' : `${e.gpu_mem_gb.toFixed(1)}G`;
  const std = e.reward_std === null || e.reward_std === undefined ? '' : `±${fmt(e.reward_std, 3)}`;
  return [
    `step ${e.step}/${e.total_steps}`,
    `reward ${fmt(e.reward_mean, 3)}${std}`,
    `|adv| ${fmt(e.advantage_abs_mean, 3)}`,
    `resp ${compact(e.response_tokens_mean)}`,
    `loss ${fmt(e.loss)}`,
    `kl ${fmt(e.kl)}`,
    `clip ${fmt(e.clip_frac, 3)}`,
    `ent ${fmt(e.entropy, 3)}`,
    `gnorm ${fmt(e.grad_norm, 3)}`,
    `tok/s ${compact(e.tokens_per_s)}`,
    `mem ${mem}`,
  ].join('  ');
}

/**
 * Progress within a step, one event per micro-batch from the worker: `phase` is `reference` (the
 * pi_old / pi_ref forward passes) or `update` (forward and backward), `done` of `total` micro-batches
 * of that phase (over all PPO epochs for `update`).
 */
export type MicroEvent = Extract<WorkerEvent, { event: 'micro' }>;

export function formatMicro(e: MicroEvent): string {
  return `step ${e.step}/${e.total_steps}  ${e.phase === 'reference' ? 'reference pass' : 'update'}: micro-batch ${e.done}/${e.total}`;
}

/** true for the micro-batch that crosses a quarter of the phase (and the last one) */
export function quarterReached(done: number, total: number): boolean {
  if (total <= 0) return false;
  return Math.floor((4 * done) / total) > Math.floor((4 * (done - 1)) / total);
}

/** Keeps the spinner on one terminal line (ora redraws by counting wrapped lines). */
function fit(text: string): string {
  const width = (process.stderr.columns ?? 80) - 3;
  return text.length > width ? `${text.slice(0, Math.max(0, width - 1))}…` : text;
}

export interface ProgressOptions {
  tty?: boolean;
  json?: boolean;
  stdout?: NodeJS.WritableStream;
}

export class TrainProgress {
  private spinner: Ora | undefined;
  private firstStep: { at: number; step: number } | undefined;
  private readonly tty: boolean;
  private readonly json: boolean;
  private readonly stdout: NodeJS.WritableStream;

  constructor(options: ProgressOptions = {}) {
    // a spinner needs a real terminal width (a pty without one makes ora redraw endlessly)
    this.tty = options.tty ?? (Boolean(process.stderr.isTTY) && (process.stderr.columns ?? 0) >= 40);
    this.json = options.json ?? false;
    this.stdout = options.stdout ?? process.stdout;
  }

  start(text: string): void {
    if (this.json) return;
    if (this.tty && !log.quiet) this.spinner = ora({ text: fit(text), stream: process.stderr }).start();
    else log.info(text);
  }

  event(e: Record<string, unknown>): void {
    if (this.json) {
      this.stdout.write(`${JSON.stringify(e)}\n`);
      return;
    }
    switch (e.event) {
      case 'step': {
        const s = e as unknown as StepEvent;
        // the first step's time includes the model's loading: the ETA counts from the first step on
        this.firstStep ??= { at: performance.now(), step: s.step };
        const left =
          s.step > this.firstStep.step
            ? `  ${eta(this.firstStep.at, s.step - this.firstStep.step, s.total_steps - this.firstStep.step)}`
            : '';
        const line = `${formatStep(s)}${left}`;
        if (this.spinner) this.spinner.text = fit(`${progressBar(s.step, s.total_steps)} ${line}`);
        else log.info(line);
        break;
      }
      case 'micro': {
        // progress within a step (the worker's micro-batch event): the spinner always, a plain line at each quarter
        const m = e as unknown as MicroEvent;
        const line = formatMicro(m);
        if (this.spinner) this.spinner.text = fit(`${progressBar(m.step - 1, m.total_steps)} ${line}`);
        else if (quarterReached(m.done, m.total)) log.info(line);
        break;
      }
      case 'checkpoint':
        this.say(`checkpoint ${String(e.path)} (${String(e.format)})`);
        break;
      case 'log': {
        // the worker's warnings (e.g. the sampling check without TIS) show even under -q
        const message = String(e.message);
        if (message.startsWith('warning: ')) this.say(message.slice('warning: '.length), 'warn');
        else this.say(message);
        break;
      }
      default:
        break;
    }
  }

  private say(message: string, level: 'info' | 'warn' = 'info'): void {
    if (this.spinner) {
      const text = this.spinner.text;
      this.spinner.stop();
      log[level](message);
      this.spinner.start(text);
    } else log[level](message);
  }

  stop(ok: boolean, text?: string): void {
    if (this.spinner) {
      if (ok) this.spinner.succeed(text);
      else this.spinner.fail(text);
      this.spinner = undefined;
    } else if (text && !this.json && ok) log.info(text);
  }
}
