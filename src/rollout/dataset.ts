/**
 * SWE-bench datasets: local .jsonl / .json / .parquet in the SWE-bench schema (4.x fields, plus 5.x
 * image / eval_script / log_parser when present, plus polar's test_cmd for other datasets), or a hub
 * id (`princeton-nlp/SWE-bench_Verified`) fetched through the Hugging Face datasets-server parquet
 * listing. FAIL_TO_PASS / PASS_TO_PASS arrive as JSON-encoded strings and are decoded here.
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { extname, join } from 'node:path';
import { z } from 'zod';
import { InputError, UsageError } from '../errors.ts';
import { Deadline, request, trimSlash } from '../http/client.ts';
import { DEFAULTS } from '../options/defaults.ts';
import { parseJsonLine, splitLines } from '../util/jsonl.ts';
import { log } from '../util/log.ts';
import { checkRequirements } from '../util/requirement.ts';
import { insideDir, isRepoName, isSafeName, SAFE_NAME_RULE } from '../util/safe-path.ts';
import { firstIssue } from '../util/zod.ts';

export interface SweInstance {
  instance_id: string;
  repo: string;
  base_commit: string;
  patch: string;
  test_patch: string;
  problem_statement: string;
  hints_text: string;
  created_at: string;
  version: string;
  FAIL_TO_PASS: string[];
  PASS_TO_PASS: string[];
  environment_setup_commit?: string;
  difficulty?: string;
  /** 5.x: the instance image */
  image?: string;
  /** 5.x: the full evaluation script (reset, apply test_patch, markers, test command) */
  eval_script?: string;
  /** 5.x, or polar: the log parser name */
  log_parser?: string;
  eval_type?: string;
  /** polar: the test command for datasets outside the 12 Verified repositories */
  test_cmd?: string;
  /**
   * polar: this row's verifier grader command (src/rollout/verifier.ts), instead of the run's --grader
   * (a row's `polar` is read as no grader of its own: the run's applies)
   */
  grader?: string;
  /** polar: the environment's Python version ("3.9") or interpreter path, over the official spec's (src/rollout/env/) */
  python?: string;
  /** polar: what pip installs into the environment, instead of the official spec's packages and pip_packages */
  pip_packages?: string[];
  /** polar: steps run against the sample's tree before install, instead of the official spec's */
  pre_install?: string[];
  /** polar: the repository's install step, run against the sample's tree, instead of the official spec's */
  install?: string;
  /** the row's other fields, kept for a verifier grader (a task's expected answer, its checks, ...) */
  extra?: Record<string, unknown>;
}

/** How rows are read: `verifier` when a verifier grades them, so FAIL_TO_PASS may be empty. */
export interface RowOptions {
  verifier?: boolean;
}

const optionalText = z
  .union([z.string(), z.null(), z.undefined()])
  .transform((v) => (v === null || v === undefined || v === '' ? undefined : v));

/** a row's own grader: a verifier command; `polar` leaves the run's --grader; swebench grades a whole run */
const rowGrader = optionalText
  .refine(
    (v) => v?.trim() !== 'swebench',
    'swebench grades a whole run (--grader swebench), not one row: give a verifier command, or polar',
  )
  .transform((v) => (v === undefined || v.trim() === '' || v.trim() === 'polar' ? undefined : v));

const stringList = z.union([z.string(), z.array(z.string()), z.null(), z.undefined()]);
const rowSchema = z.looseObject({
  // (both become file and folder names: src/util/safe-path.ts)
  instance_id: z.string().refine(isSafeName, `must be a file name: ${SAFE_NAME_RULE}`),
  repo: z.string().refine(isRepoName, 'must be owner/name, each part letters, digits, ".", "_" or "-"'),
  base_commit: z.string().regex(/^[0-9a-f]{7,64}$/, 'must be a commit hash'),
  patch: z.string(),
  test_patch: z.string(),
  problem_statement: z.string(),
  hints_text: optionalText,
  created_at: optionalText,
  version: z.union([z.string(), z.number()]).optional().nullable(),
  FAIL_TO_PASS: stringList,
  PASS_TO_PASS: stringList,
  environment_setup_commit: optionalText,
  difficulty: optionalText,
  image: optionalText,
  image_name: optionalText,
  eval_script: optionalText,
  log_parser: optionalText,
  eval_type: optionalText,
  test_cmd: optionalText,
  grader: rowGrader,
  python: optionalText,
  pip_packages: stringList,
  pre_install: stringList,
  install: optionalText,
});

function decodeList(value: unknown, fail: (problem: string) => never, what = 'test ids'): string[] {
  if (value === null || value === undefined || value === '') return [];
  if (Array.isArray(value)) return value;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value as string);
  } catch {
    fail(`not a JSON-encoded list of ${what}`);
  }
  if (!Array.isArray(parsed) || !parsed.every((t) => typeof t === 'string')) {
    fail('must decode to a list of strings');
  }
  return parsed as string[];
}

/** Normalises values parquet readers hand back (bigint, Date, typed arrays) to JSON-ish ones. */
function plain(value: unknown): unknown {
  if (typeof value === 'bigint') return String(value);
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.map(plain);
  return value;
}

const KNOWN_FIELDS = new Set(Object.keys(rowSchema.shape));

/** Validates one row; errors name the file, the row, the instance and the field. */
export function parseRow(
  source: string,
  line: number | undefined,
  raw: unknown,
  options: RowOptions = {},
): SweInstance {
  const row =
    typeof raw === 'object' && raw !== null
      ? Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, plain(v)]))
      : raw;
  const id =
    typeof row === 'object' &&
    row !== null &&
    typeof (row as { instance_id?: unknown }).instance_id === 'string'
      ? (row as { instance_id: string }).instance_id
      : '(no instance_id)';
  const parsed = rowSchema.safeParse(row);
  if (!parsed.success) {
    const { field, message } = firstIssue(parsed.error, '(row)');
    throw new InputError(
      source,
      line,
      field,
      `instance ${id}: ${message}`,
      'rows need the SWE-bench fields: instance_id, repo, base_commit, patch, test_patch, problem_statement, FAIL_TO_PASS, PASS_TO_PASS',
    );
  }
  const r = parsed.data;
  const failOn = (field: string) => (problem: string) => {
    throw new InputError(source, line, field, `instance ${id}: ${problem}`);
  };
  const instance: SweInstance = {
    instance_id: r.instance_id,
    repo: r.repo,
    base_commit: r.base_commit,
    patch: r.patch,
    test_patch: r.test_patch,
    problem_statement: r.problem_statement,
    hints_text: r.hints_text ?? '',
    created_at: r.created_at ?? '',
    version: r.version === null || r.version === undefined ? '' : String(r.version),
    FAIL_TO_PASS: decodeList(r.FAIL_TO_PASS, failOn('FAIL_TO_PASS')),
    PASS_TO_PASS: decodeList(r.PASS_TO_PASS, failOn('PASS_TO_PASS')),
  };
  const optional = {
    environment_setup_commit: r.environment_setup_commit,
    difficulty: r.difficulty,
    image: r.image ?? r.image_name,
    eval_script: r.eval_script,
    log_parser: r.log_parser,
    eval_type: r.eval_type,
    test_cmd: r.test_cmd,
    grader: r.grader,
    python: r.python,
    install: r.install,
    // (lists: absent stays absent, so a row without them keeps the official spec's)
    pip_packages:
      r.pip_packages == null ? undefined : decodeList(r.pip_packages, failOn('pip_packages'), 'requirements'),
    pre_install:
      r.pre_install == null ? undefined : decodeList(r.pre_install, failOn('pre_install'), 'shell commands'),
  };
  if (optional.pip_packages) checkRequirements(optional.pip_packages, failOn('pip_packages'));
  for (const [k, v] of Object.entries(optional))
    if (v !== undefined) (instance as unknown as Record<string, unknown>)[k] = v;
  const extra = Object.entries(r).filter(([k]) => !KNOWN_FIELDS.has(k));
  if (extra.length) instance.extra = Object.fromEntries(extra);
  if (instance.FAIL_TO_PASS.length === 0 && !instance.eval_script && !instance.grader && !options.verifier) {
    throw new InputError(
      source,
      line,
      'FAIL_TO_PASS',
      `instance ${id}: empty; nothing would show the fix works`,
      'give the tests the fix must make pass, or grade the rows with a verifier (--grader CMD, or a row `grader`)',
    );
  }
  return instance;
}

async function readParquetRows(buffer: ArrayBuffer): Promise<unknown[]> {
  const { parquetReadObjects } = await import('hyparquet');
  return parquetReadObjects({ file: buffer });
}

function toArrayBuffer(data: Buffer): ArrayBuffer {
  return data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength) as ArrayBuffer;
}

/** Reads and validates a local dataset file. */
export async function loadLocalDataset(path: string, options: RowOptions = {}): Promise<SweInstance[]> {
  const ext = extname(path).toLowerCase();
  let data: Buffer;
  try {
    data = await readFile(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new InputError(path, undefined, undefined, code === 'EISDIR' ? 'is a directory' : 'cannot be read');
  }
  const rows: Array<{ line: number | undefined; value: unknown }> = [];
  if (ext === '.parquet') {
    let values: unknown[];
    try {
      values = await readParquetRows(toArrayBuffer(data));
    } catch (error) {
      throw new InputError(
        path,
        undefined,
        undefined,
        `not a readable parquet file (${(error as Error).message})`,
      );
    }
    values.forEach((value, i) => {
      rows.push({ line: i + 1, value });
    });
  } else if (ext === '.json') {
    let value: unknown;
    try {
      value = JSON.parse(data.toString('utf8'));
    } catch (error) {
      throw new InputError(path, undefined, undefined, `not valid JSON (${(error as Error).message})`);
    }
    if (!Array.isArray(value))
      throw new InputError(path, undefined, undefined, 'must be a JSON array of instances');
    value.forEach((v, i) => {
      rows.push({ line: i + 1, value: v });
    });
  } else if (ext === '.jsonl' || ext === '.ndjson') {
    for (const line of splitLines(data.toString('utf8'))) {
      rows.push({
        line: line.line,
        value: parseJsonLine(path, line, 'each line must be one instance (a JSON object)'),
      });
    }
  } else {
    throw new InputError(
      path,
      undefined,
      undefined,
      `unknown dataset format "${ext}"`,
      'use .jsonl, .json or .parquet',
    );
  }
  const seen = new Set<string>();
  return rows.map(({ line, value }) => {
    const instance = parseRow(path, line, value, options);
    if (seen.has(instance.instance_id)) {
      throw new InputError(path, line, 'instance_id', `instance ${instance.instance_id}: appears twice`);
    }
    seen.add(instance.instance_id);
    return instance;
  });
}

export interface HubOptions extends RowOptions {
  split?: string;
  /** datasets-server base URL (default https://datasets-server.huggingface.co, or POLAR_HF_DATASETS_SERVER) */
  endpoint?: string;
  /** where downloaded parquet files are kept (default ~/.cache/polar/datasets, or POLAR_CACHE_DIR) */
  cacheDir?: string;
  token?: string;
}

const HUB_ID = /^[A-Za-z0-9][\w.-]*\/[\w.-]+$/;

export function isHubId(spec: string): boolean {
  return HUB_ID.test(spec) && !existsSync(spec) && !/\.(jsonl|json|parquet|ndjson)$/i.test(spec);
}

const parquetListing = z.looseObject({
  parquet_files: z.array(
    z.looseObject({ split: z.string(), url: z.string(), filename: z.string().optional() }),
  ),
});

/** The listing answers at once; a download may be long, but never silent for a minute. */
const LIST_TIMEOUT_MS = 60_000;
const DOWNLOAD_TOTAL_MS = 30 * 60_000;
const DOWNLOAD_IDLE_MS = 60_000;

/** GET through the one HTTP client, redirects followed (the hub sends files on to its CDN). */
async function hubGet(url: string, headers: Record<string, string>, deadline: Deadline): Promise<Buffer> {
  try {
    const response = await request(url, { headers, deadline, maxRedirects: 5 });
    if (!response.ok) {
      await response.bytes().catch(() => undefined);
      throw new Error(`HTTP ${response.status}`);
    }
    return await response.bytes();
  } catch (error) {
    if (deadline.timedOut)
      throw new Error(
        `${deadline.expired === 'idle' ? 'stalled' : 'timed out'} (${(error as Error).message})`,
      );
    throw error;
  } finally {
    deadline.dispose();
  }
}

/** Lists a hub dataset's parquet files for one split and downloads them (cached), then reads them. */
export async function loadHubDataset(id: string, options: HubOptions = {}): Promise<SweInstance[]> {
  const split = options.split ?? DEFAULTS.split.value;
  const endpoint = trimSlash(
    options.endpoint ?? process.env.POLAR_HF_DATASETS_SERVER ?? 'https://datasets-server.huggingface.co',
  );
  const cacheRoot =
    options.cacheDir ?? process.env.POLAR_CACHE_DIR ?? join(homedir(), '.cache', 'polar', 'datasets');
  const token = options.token ?? process.env.HF_TOKEN;
  const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  const cacheDir = join(cacheRoot, id.replace('/', '__'), split);
  const listUrl = `${endpoint}/parquet?dataset=${encodeURIComponent(id)}`;
  let listing: z.infer<typeof parquetListing>;
  try {
    const text = (await hubGet(listUrl, headers, new Deadline(LIST_TIMEOUT_MS))).toString('utf8');
    listing = parquetListing.parse(JSON.parse(text));
  } catch (error) {
    throw new InputError(
      id,
      undefined,
      undefined,
      `cannot list the dataset's parquet files at ${listUrl} (${(error as Error).message})`,
      'check the id and the network, or download the parquet file and pass its path',
    );
  }
  const files = listing.parquet_files.filter((f) => f.split === split);
  if (files.length === 0) {
    const splits = [...new Set(listing.parquet_files.map((f) => f.split))].join(', ') || 'none';
    throw new UsageError(
      `dataset ${id} has no split "${split}" (splits: ${splits})`,
      'choose one with --split',
    );
  }
  await mkdir(cacheDir, { recursive: true });
  const all: SweInstance[] = [];
  for (const [i, file] of files.entries()) {
    // (the listing names the file: a name that is not a plain file name is not used)
    const name = file.filename && isSafeName(file.filename) ? file.filename : `${i}.parquet`;
    const local = insideDir(cacheDir, name);
    if (!existsSync(local)) {
      log.info(`downloading ${id} ${split} (${name})`);
      let body: Buffer;
      try {
        body = await hubGet(file.url, headers, new Deadline(DOWNLOAD_TOTAL_MS, DOWNLOAD_IDLE_MS));
      } catch (error) {
        throw new InputError(
          id,
          undefined,
          undefined,
          `download of ${file.url} failed: ${(error as Error).message}`,
        );
      }
      const tmp = `${local}.${process.pid}.tmp`;
      await writeFile(tmp, body);
      await rename(tmp, local);
    }
    all.push(...(await loadLocalDataset(local, options)));
  }
  return all;
}

/** Neither a hub id nor a file here: missing input (exit 3), said before slow checks (polar loop). */
export function checkDatasetSpec(spec: string): void {
  if (isHubId(spec) || existsSync(spec)) return;
  throw new InputError(
    spec,
    undefined,
    undefined,
    'no such file',
    'give a .jsonl/.json/.parquet path or a hub id (owner/name)',
  );
}

export async function loadDataset(spec: string, options: HubOptions = {}): Promise<SweInstance[]> {
  if (isHubId(spec)) return loadHubDataset(spec, options);
  checkDatasetSpec(spec);
  return loadLocalDataset(spec, options);
}

export interface Selection {
  instances?: string[];
  limit?: number;
  /** 1-based shard index and count */
  shard?: { index: number; count: number };
}

export function parseShard(text: string): { index: number; count: number } {
  const m = /^(\d+)\/(\d+)$/.exec(text.trim());
  const index = m ? Number(m[1]) : Number.NaN;
  const count = m ? Number(m[2]) : Number.NaN;
  if (!m || count < 1 || index < 1 || index > count) {
    throw new UsageError(
      `--shard ${text}: expected i/n with 1 <= i <= n`,
      'for example --shard 2/4 runs the second of four shards',
    );
  }
  return { index, count };
}

/** --instances, then --shard (round robin, so shards get a mix of repositories), then --limit. */
export function selectInstances(all: SweInstance[], selection: Selection): SweInstance[] {
  let chosen = all;
  if (selection.instances && selection.instances.length > 0) {
    const byId = new Map(all.map((i) => [i.instance_id, i]));
    const missing = selection.instances.filter((id) => !byId.has(id));
    if (missing.length > 0) {
      throw new UsageError(
        `--instances: not in the dataset: ${missing.slice(0, 5).join(', ')}${missing.length > 5 ? ', ...' : ''}`,
      );
    }
    const wanted = new Set(selection.instances);
    chosen = all.filter((i) => wanted.has(i.instance_id));
  }
  if (selection.shard) {
    const { index, count } = selection.shard;
    chosen = chosen.filter((_, i) => i % count === index - 1);
  }
  if (selection.limit !== undefined) chosen = chosen.slice(0, selection.limit);
  return chosen;
}
