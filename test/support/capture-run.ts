/**
 * Runs the real `polar capture` CLI in a subprocess with a private HOME, and reads back its capture; the
 * pieces the capture tests build their own runs from: private dirs and environment, `polar capture`'s
 * arguments against the vLLM stand-in, a harness of a few lines of script, a capture read whole.
 */
import { appendFile, mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { readCapture } from '../../src/capture/reader.ts';
import type { CallRecord, CaptureRecord, SessionEndRecord, SessionRecord } from '../../src/capture/record.ts';
import { isTokenCount } from '../../src/protocols/canonical.ts';
import { POLAR, ROOT, runPolar } from './cli.ts';
import { tempDir } from './temp.ts';

export interface CaptureOutcome {
  exitCode: number | undefined;
  stdout: string;
  stderr: string;
  records: CaptureRecord[];
  session: SessionRecord;
  calls: CallRecord[];
  end: SessionEndRecord | undefined;
  file: string;
  workdir: string;
  /** with `traceConnects`: every network connection polar or the harness opened that leaves the machine */
  outsideConnects?: string[];
}

/** A fresh private home and workspace, so no harness reads or writes the user's own config. */
export async function privateDirs(): Promise<{ home: string; workdir: string; out: string }> {
  const base = tempDir('polar-test-');
  const home = join(base, 'home');
  const workdir = join(base, 'work');
  await mkdir(home, { recursive: true });
  await mkdir(workdir, { recursive: true });
  return { home, workdir, out: join(base, 'capture.jsonl') };
}

export function privateEnv(home: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined) continue;
    if (/^(OPENAI|ANTHROPIC|CODEX|CLAUDE|PI_)/.test(k)) continue;
    env[k] = v;
  }
  return {
    ...env,
    HOME: home,
    XDG_CONFIG_HOME: join(home, '.config'),
    XDG_CACHE_HOME: join(home, '.cache'),
    XDG_DATA_HOME: join(home, '.local/share'),
    NO_COLOR: '1',
    // harness binaries come from this repo's node_modules/.bin, or from the version the harness matrix
    // (scripts/harness-matrix.ts) installed: POLAR_TEST_HARNESS_BIN is put first
    PATH: [process.env.POLAR_TEST_HARNESS_BIN, join(ROOT, 'node_modules/.bin'), process.env.PATH ?? '']
      .filter(Boolean)
      .join(':'),
  };
}

/** The flags of the vLLM server (or its stand-in) at `url`, serving Qwen/Qwen3-4B. */
export function vllmFlags(url: string): string[] {
  return ['--backend', 'vllm', '--backend-url', url, '--model', 'Qwen/Qwen3-4B'];
}

/** `polar capture -o OUT [extra]` against the vLLM server at `url` (vllmFlags), the harness after `--`. */
export function captureArgs(out: string, url: string, harness: string[], extra: string[] = []): string[] {
  return ['capture', '-o', out, ...extra, ...vllmFlags(url), '--', ...harness];
}

/** What a script harness has before its own lines: `chat(content)` posts one user message to polar. */
const CHAT = `const chat = (content) => fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
  method: 'POST',
  headers: { authorization: 'Bearer ' + process.env.OPENAI_API_KEY, 'content-type': 'application/json' },
  body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content }] }),
});`;

/**
 * A harness of a few lines: node runs `script` as a module, in which `chat(content)` sends one user
 * message to polar's proxy (OPENAI_BASE_URL, OPENAI_API_KEY, as polar sets them) and resolves with
 * fetch's Response. Arguments after the script are process.argv[1..].
 */
export function scriptHarness(script: string): string[] {
  return ['node', '--input-type=module', '-e', `${CHAT}\n${script}`];
}

/** Every record of a capture file, read strictly (no line skipped). */
export async function readRecords(path: string): Promise<CaptureRecord[]> {
  const records: CaptureRecord[] = [];
  for await (const { record } of readCapture(path)) records.push(record);
  return records;
}

export async function capture(
  polarArgs: string[],
  harness: string[],
  options: {
    timeoutMs?: number;
    /** extra environment for polar and the harness */
    env?: Record<string, string>;
    /**
     * run the server set-up probe first (default false: --skip-backend-check). Its one-token requests
     * would shift the stand-in's call count and eat a scripted stand-in's replies; the probe has its
     * own tests (capture-cli.test.ts, test/unit/backends/probe.test.ts).
     */
    probe?: boolean;
    /**
     * run polar (and so the harness) under `strace -f -e trace=connect` and report the connections that
     * leave the machine: a harness must reach nothing but polar's proxy (strace is installed by .ci/run)
     */
    traceConnects?: boolean;
  } = {},
): Promise<CaptureOutcome> {
  const { home, workdir, out } = await privateDirs();
  const skip = options.probe ? [] : ['--skip-backend-check'];
  const trace = `${out}.strace`;
  const args = ['capture', '-o', out, ...skip, ...polarArgs, '--', ...harness];
  const env = { ...privateEnv(home), ...options.env };
  const timeoutMs = options.timeoutMs ?? 120_000;
  const result = options.traceConnects
    ? // (--seccomp-bpf: only connect() stops the traced processes, not every system call)
      await execa(
        'strace',
        ['-f', '--seccomp-bpf', '-qq', '-e', 'trace=connect', '-o', trace, process.execPath, POLAR, ...args],
        { cwd: workdir, env, extendEnv: false, stdin: 'ignore', reject: false, timeout: timeoutMs },
      ).then((r) => ({ exitCode: r.exitCode, stdout: String(r.stdout), stderr: String(r.stderr) }))
    : await runPolar(args, { cwd: workdir, env, extendEnv: false, timeoutMs });
  let records: CaptureRecord[];
  try {
    records = await readRecords(out);
  } catch (error) {
    throw new Error(`reading ${out} failed: ${(error as Error).message}\nstderr:\n${result.stderr}`);
  }
  if (process.env.POLAR_TEST_KINDS_LOG) await logKinds(process.env.POLAR_TEST_KINDS_LOG, records);
  const session = records.find((r): r is SessionRecord => r.type === 'session');
  if (!session)
    throw new Error(`no session record; polar stderr:\n${result.stderr}\nstdout:\n${result.stdout}`);
  return {
    ...(options.traceConnects ? { outsideConnects: outsideConnects(await readFile(trace, 'utf8')) } : {}),
    exitCode: result.exitCode,
    stdout: result.stdout,
    stderr: result.stderr,
    records,
    session,
    calls: records.filter((r): r is CallRecord => r.type === 'call'),
    end: records.find((r): r is SessionEndRecord => r.type === 'session_end'),
    file: out,
    workdir,
  };
}

/** For the harness matrix: one line per call with the kind polar recorded (an ordinary call is a turn). */
async function logKinds(file: string, records: CaptureRecord[]): Promise<void> {
  const lines = records
    .filter((r): r is CallRecord => r.type === 'call')
    .map((c) => {
      const kind =
        typeof c.harness_meta.request_kind === 'string'
          ? c.harness_meta.request_kind
          : isTokenCount(c.api)
            ? 'count_tokens'
            : 'turn';
      // the harness's own user-agent: proof of which installed version made the call
      const ua = c.request.headers['user-agent'] ?? '';
      return `${JSON.stringify({ kind, ua })}\n`;
    });
  await appendFile(file, lines.join(''));
}

/**
 * The destinations of the IP connections in an strace log that are not this machine's loopback (a DNS
 * lookup shows as a connection to port 53 of the resolver, so a name lookup counts too).
 */
export function outsideConnects(log: string): string[] {
  const out: string[] = [];
  for (const line of log.split('\n')) {
    if (!line.includes('connect(')) continue;
    const v4 = /sin_port=htons\((\d+)\), sin_addr=inet_addr\("([\d.]+)"\)/.exec(line);
    const v6 = /sin6_port=htons\((\d+)\),.*inet_pton\(AF_INET6, "([^"]+)"/.exec(line);
    const hit = v4 ?? v6;
    if (!hit) continue;
    const [, port, addr] = hit;
    if (/^127\./.test(addr!) || addr === '::1' || addr === '::ffff:127.0.0.1') continue;
    out.push(`${addr}:${port}`);
  }
  return out;
}
