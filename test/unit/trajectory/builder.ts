/**
 * Hand-built capture records for the trajectory tests: a session, its calls, its end and grading,
 * with every required field of capture record v1 filled with plausible values.
 */
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type {
  CallRecord,
  GradingRecord,
  SessionEndRecord,
  SessionRecord,
} from '../../../src/capture/record.ts';
import { type BuildOptions, buildTrajectories } from '../../../src/trajectory/build.ts';
import type { BuildStats } from '../../../src/trajectory/stats.ts';
import { tempDir } from '../../support/temp.ts';

export const EOT = 151645;
const T = '2026-01-01T00:00:00.000Z';

export function session(id: string, over: Partial<SessionRecord> = {}): SessionRecord {
  return {
    v: 1,
    type: 'session',
    id,
    harness: 'codex',
    argv: ['codex', 'exec', 'fix it'],
    cwd: '/work',
    started_at: T,
    polar_version: '0.1.0',
    backend: { kind: 'vllm', url: 'http://127.0.0.1:8000', token_exact: true },
    model: 'qwen3-4b',
    task_id: 'task-1',
    sample: 0,
    meta: {},
    ...over,
  };
}

export interface CallSpec {
  id?: string;
  seq?: number;
  prompt: number[] | null;
  completion: number[] | null;
  logprobs?: number[] | null;
  finish?: string | null;
  kind?: string;
  error?: boolean;
  tokenExact?: boolean;
}

let counter = 0;

/** A call record; logprobs default to -(i+1)/10 for completion token i so they are easy to check. */
export function call(sessionId: string, spec: CallSpec): CallRecord {
  counter++;
  const completion = spec.completion;
  const logprobs =
    spec.logprobs !== undefined
      ? spec.logprobs
      : completion === null
        ? null
        : completion.map((_, i) => -(i + 1) / 10);
  return {
    v: 1,
    type: 'call',
    id: spec.id ?? `call-${counter}`,
    session: sessionId,
    seq: spec.seq ?? counter,
    api: 'openai-responses',
    harness: 'codex',
    stream: true,
    started_at: T,
    ended_at: T,
    timings: { ttfb_ms: 1, backend_ms: 1, total_ms: 2 },
    request: { method: 'POST', path: '/v1/responses', headers: {}, body: {} },
    response: { status: spec.error ? 500 : 200, body: null },
    canonical_request: null,
    backend_request: null,
    prompt_token_ids: spec.prompt,
    completion_token_ids: completion,
    completion_logprobs: logprobs,
    finish_reason: spec.finish === undefined ? 'stop' : spec.finish,
    usage: null,
    token_exact: spec.tokenExact ?? (spec.prompt !== null && completion !== null),
    warnings: [],
    harness_meta: spec.kind ? { request_kind: spec.kind } : {},
    error: spec.error ? { kind: 'upstream', message: 'boom', status: 500 } : null,
  };
}

export function sessionEnd(
  sessionId: string,
  status: SessionEndRecord['status'] = 'completed',
  calls = 0,
): SessionEndRecord {
  return {
    v: 1,
    type: 'session_end',
    session: sessionId,
    ended_at: T,
    duration_ms: 10,
    exit_code: status === 'completed' ? 0 : 1,
    signal: null,
    calls,
    errors: 0,
    status,
  };
}

export function grading(sessionId: string, reward: number, over: Partial<GradingRecord> = {}): GradingRecord {
  return {
    v: 1,
    type: 'grading',
    session: sessionId,
    task_id: 'task-1',
    sample: 0,
    resolved: reward > 0,
    reward,
    reason: null,
    graded_at: T,
    ...over,
  };
}

/** JSONL text of records. */
export function jsonl(records: readonly unknown[]): string {
  return records.map((r) => JSON.stringify(r)).join('\n') + '\n';
}

/** A range of distinct token ids [from, from + n). */
export function ids(from: number, n: number): number[] {
  return Array.from({ length: n }, (_, i) => from + i);
}

/** Runs buildTrajectories on records written to a temp capture file; returns the report and the lines. */
export async function buildFrom(
  records: readonly unknown[] | string,
  options: Partial<BuildOptions> = {},
): Promise<{ stats: BuildStats; out: Record<string, unknown>[]; file: string }> {
  const dir = tempDir('polar-traj-test-');
  const file = join(dir, 'capture.jsonl');
  await writeFile(file, typeof records === 'string' ? records : jsonl(records));
  const chunks: string[] = [];
  const output = new Writable({
    write(chunk, _enc, cb) {
      chunks.push(String(chunk));
      cb();
    },
  });
  try {
    const stats = await buildTrajectories({ inputs: [file], output, ...options });
    const out = chunks
      .join('')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    return { stats, out, file };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
