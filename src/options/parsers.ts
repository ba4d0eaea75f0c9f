/**
 * commander argument parsers: each turns a flag's text into its typed value once, at parse time, or
 * throws commander's InvalidArgumentError. The message is a predicate on the value ("expected a positive
 * integer", "is not one of a, b"); src/cli.ts prefixes it with the flag and the value, so every bad value
 * reads `polar: error: --samples 0: expected a positive integer`.
 */
import { resolve } from 'node:path';
import { InvalidArgumentError } from 'commander';
import { accumulating } from './accumulate.ts';
import { type Grader, type GroupBy, OVERLONG_MODES, type OverlongMode } from './defaults.ts';
import { didYouMean } from './suggest.ts';

export type Parser<T> = (value: string) => T;

function integer(value: string, what: string, ok: (n: number) => boolean): number {
  const n = value.trim() === '' ? Number.NaN : Number(value);
  if (!Number.isInteger(n) || !ok(n)) throw new InvalidArgumentError(`expected ${what}`);
  return n;
}

/** any integer */
export const int: Parser<number> = (v) => integer(v, 'an integer', () => true);
/** 1, 2, ... */
export const positiveInt: Parser<number> = (v) => integer(v, 'a positive integer', (n) => n > 0);
/** 0, 1, ... */
export const nonNegativeInt: Parser<number> = (v) => integer(v, 'a non-negative integer', (n) => n >= 0);
/** an integer from min to max */
export const intIn =
  (min: number, max: number): Parser<number> =>
  (v) =>
    integer(v, `an integer from ${min} to ${max}`, (n) => n >= min && n <= max);

/** a positive integer, or `all` (no limit) */
export const positiveIntOrAll: Parser<number | 'all'> = (v) => {
  if (v === 'all') return 'all';
  return integer(v, 'a positive integer or "all"', (n) => n > 0);
};

/** a TCP port; 0 asks for an ephemeral one */
export const port: Parser<number> = intIn(0, 65535);

/**
 * A number in a range; `open` makes the lower bound exclusive (top-p is in (0, 1]).
 * `what` overrides the wording, e.g. 'a fraction between 0 and 1'.
 */
export function floatIn(
  min: number,
  max: number,
  options: { open?: 'min'; what?: string } = {},
): Parser<number> {
  const what =
    options.what ??
    (max === Number.POSITIVE_INFINITY
      ? `a number ${options.open === 'min' ? '>' : '>='} ${min}`
      : `a number in ${options.open === 'min' ? '(' : '['}${min}, ${max}]`);
  return (v) => {
    const n = v.trim() === '' ? Number.NaN : Number(v);
    const ok = Number.isFinite(n) && (options.open === 'min' ? n > min : n >= min) && n <= max;
    if (!ok) throw new InvalidArgumentError(`expected ${what}`);
    return n;
  };
}

/** seconds > 0 given on the command line, as milliseconds */
export const seconds: Parser<number> = (v) => {
  const n = v.trim() === '' ? Number.NaN : Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('expected seconds > 0');
  return n * 1000;
};

const UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1024,
  kb: 1000,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1000 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1000 ** 3,
  gib: 1024 ** 3,
};

/** a byte count: 67108864, 64MiB, 64M (binary), 64MB (decimal) */
export const bytes: Parser<number> = (v) => {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(v);
  const unit = m ? UNITS[m[2]!.toLowerCase()] : undefined;
  const n = m && unit !== undefined ? Number(m[1]) * unit : Number.NaN;
  if (!Number.isInteger(n) || n < 0)
    throw new InvalidArgumentError('expected a byte count (e.g. 67108864, 64MiB, 512KiB)');
  return n;
};

/** a repeatable flag (commas also separate, as NeMo Gym's launcher joins a list): every value parsed, in order */
export function collect<T>(parse: Parser<T>): (value: string, previous: T[] | undefined) => T[] {
  return accumulating((value: string, previous: T[] | undefined) => [
    ...(previous ?? []),
    ...value
      .split(',')
      .filter((v) => v.trim() !== '')
      .map((v) => parse(v.trim())),
  ]);
}

/** one of a fixed set of words; a near miss gets "did you mean" (src/options/suggest.ts) */
export function oneOf<const T extends string>(values: readonly T[]): Parser<T> {
  return (v) => {
    if (!(values as readonly string[]).includes(v))
      throw new InvalidArgumentError(`is not one of ${values.join(', ')}${didYouMean(v, values)}`);
    return v as T;
  };
}

/**
 * --overlong: mask, penalty or keep (OVERLONG_MODES); for polar build, also its old values truncate and
 * drop (now --over-max-trace-tokens), which the build turns into the new flag with a warning. The error
 * names the current values only.
 */
export function overlongMode<const Old extends string>(old: readonly Old[] = []): Parser<OverlongMode | Old> {
  const modes = oneOf(OVERLONG_MODES);
  return (v) => ((old as readonly string[]).includes(v) ? (v as Old) : modes(v));
}

/**
 * --grader: polar (the SWE grader), swebench (the official harness), judge (a model with --rubric,
 * src/rollout/judge/) or a verifier command (src/rollout/verifier.ts), classified once, here. A bare
 * word is taken for a misspelt kind, not a command on PATH.
 */
export const grader: Parser<Grader> = (v) => {
  const text = v.trim();
  if (text === 'polar' || text === 'swebench' || text === 'judge') return { kind: text };
  if (text === '' || /^[A-Za-z_-]+$/.test(text))
    throw new InvalidArgumentError(
      "is not polar, swebench, judge or a verifier command (a command with arguments or a path: 'python3 verify.py', './verify.sh')",
    );
  return { kind: 'verifier', command: text };
};

/** --group-by of polar build: task_id, none, or meta:KEY (a key of the session record's meta) */
export const groupBy: Parser<GroupBy> = (v) => {
  if (v === 'task_id' || v === 'none' || /^meta:.+/.test(v)) return v as GroupBy;
  throw new InvalidArgumentError('is not task_id, none or meta:KEY');
};

/** the experiment trackers --report-to names (src/train/tracking/) */
export const REPORT_TARGETS = ['tensorboard', 'wandb'] as const;
export type ReportTarget = (typeof REPORT_TARGETS)[number];

/** --report-to: tensorboard, wandb, both (comma-separated) or none */
export const reportTargets: Parser<ReportTarget[]> = (v) => {
  const items = list(v);
  if (items.length === 1 && items[0] === 'none') return [];
  if (items.length === 0) throw new InvalidArgumentError('expected tensorboard, wandb, both or none');
  for (const item of items)
    if (!(REPORT_TARGETS as readonly string[]).includes(item))
      throw new InvalidArgumentError(`${item} is not one of ${REPORT_TARGETS.join(', ')}, none`);
  return [...new Set(items)] as ReportTarget[];
};

/** a capture format version: v1 | v2 | v3 (or 1 | 2 | 3) */
export const captureFormat: Parser<1 | 2 | 3> = (v) => {
  const m = /^v?([123])$/.exec(v.trim());
  if (!m) throw new InvalidArgumentError('is not a capture format: use v1, v2 or v3');
  return Number(m[1]) as 1 | 2 | 3;
};

/** a JSON object */
export const jsonObject: Parser<Record<string, unknown>> = (v) => {
  let value: unknown;
  try {
    value = JSON.parse(v);
  } catch {
    throw new InvalidArgumentError(`not valid JSON (for example '{"enable_thinking": false}')`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new InvalidArgumentError('expected a JSON object');
  return value as Record<string, unknown>;
};

/** an http(s) URL */
export const url: Parser<string> = (v) => {
  let parsed: URL;
  try {
    parsed = new URL(v);
  } catch {
    throw new InvalidArgumentError('expected an http(s) URL, e.g. http://127.0.0.1:8000/v1');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new InvalidArgumentError('expected an http(s) URL, e.g. http://127.0.0.1:8000/v1');
  return v;
};

/**
 * a folder or file, made absolute against the working directory once, here: a path that reaches
 * commands in other working directories (a sandbox's bind, a sample's temp dir) must not move with them
 */
export const absolutePath: Parser<string> = (v) => {
  if (v.trim() === '') throw new InvalidArgumentError('expected a path');
  return resolve(v);
};

/** comma-separated words, empty items dropped */
export const list: Parser<string[]> = (v) =>
  v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

/** a comma-separated list of at least one item, each parsed by `item` (`--eot-id 151645,151643`) */
export function listOf<T>(item: Parser<T>): Parser<T[]> {
  return (v) => {
    const items = list(v);
    if (items.length === 0) throw new InvalidArgumentError('expected a comma-separated list');
    return items.map((text) => {
      try {
        return item(text);
      } catch (error) {
        if (!(error instanceof InvalidArgumentError)) throw error;
        const problem = error.message;
        throw new InvalidArgumentError(
          problem.startsWith('is ') ? `${text} ${problem}` : `${text}: ${problem}`,
        );
      }
    });
  };
}

/** a repeatable flag: every use appends its value (`--sbatch-arg A --sbatch-arg B`) */
export const repeatable = accumulating((value: string, previous: string[] = []): string[] => [
  ...previous,
  value,
]);

/** `key=value`, repeatable, into a record */
export const keyValue = accumulating(
  (v: string, previous: Record<string, string> = {}): Record<string, string> => {
    const eq = v.indexOf('=');
    if (eq <= 0) throw new InvalidArgumentError('expected key=value');
    return { ...previous, [v.slice(0, eq)]: v.slice(eq + 1) };
  },
);

/** `i/n`: the i-th of n shards, 1-based */
export const shard: Parser<{ index: number; count: number }> = (v) => {
  const m = /^(\d+)\/(\d+)$/.exec(v.trim());
  const index = m ? Number(m[1]) : Number.NaN;
  const count = m ? Number(m[2]) : Number.NaN;
  if (!m || count < 1 || index < 1 || index > count)
    throw new InvalidArgumentError(
      'expected i/n with 1 <= i <= n (for example 2/4: the second of four shards)',
    );
  return { index, count };
};

/** `--cluster ray`, `ray=HOST:PORT` (a running Ray cluster; default RAY_ADDRESS, else auto) or `slurm` */
export interface ClusterChoice {
  engine: 'ray' | 'slurm';
  /** ray: the cluster's address (HOST:PORT or auto) */
  address?: string;
}
export const cluster: Parser<ClusterChoice> = (v) => {
  const m = /^(ray|slurm)(?:=(.+))?$/.exec(v.trim());
  if (!m || (m[1] === 'slurm' && m[2] !== undefined))
    throw new InvalidArgumentError('expected ray, ray=HOST:PORT or slurm');
  return m[2] ? { engine: 'ray', address: m[2].trim() } : { engine: m[1] as 'ray' | 'slurm' };
};

/** URLs, comma-separated and/or repeated (each use appends): several inference servers */
export const urlList = accumulating((value: string, previous: string[] = []): string[] => [
  ...previous,
  ...listOf(url)(value),
]);

/** HOST:PORT (a rendezvous endpoint, an address to forward) */
export const hostPort: Parser<string> = (v) => {
  const m = /^(\[[^\]]+\]|[^:\s]+):(\d+)$/.exec(v.trim());
  if (!m || Number(m[2]) < 1 || Number(m[2]) > 65535)
    throw new InvalidArgumentError('expected HOST:PORT (for example 10.0.0.1:29400)');
  return v.trim();
};

/** HOST:PORT split into its host and port (an address the sandbox forwards: --network-allow) */
export const hostAndPort: Parser<{ host: string; port: number }> = (v) => {
  const endpoint = hostPort(v);
  const colon = endpoint.lastIndexOf(':');
  return {
    host: endpoint.slice(0, colon).replace(/^\[(.*)\]$/, '$1'),
    port: Number(endpoint.slice(colon + 1)),
  };
};

/** HOST[:PORT] (--weight-sync-address): a host name or IPv4 address, an optional port */
export const hostMaybePort: Parser<{ host: string; port?: number }> = (v) => {
  const m = /^([A-Za-z0-9.-]+)(?::(\d{1,5}))?$/.exec(v.trim());
  const port = m?.[2] === undefined ? undefined : Number(m[2]);
  if (!m || (port !== undefined && (port < 1 || port > 65535)))
    throw new InvalidArgumentError('expected HOST or HOST:PORT (for example 10.0.0.5:29600)');
  return { host: m[1]!, ...(port !== undefined ? { port } : {}) };
};
