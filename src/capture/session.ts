/**
 * One capture session: its key, its capture file, its `session` and `session_end` records. Shared by
 * `polar capture` (one session around one process) and `polar serve` (sessions over an admin API).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import type { Backend } from '../backends/types.ts';
import type { HarnessProfile } from '../harnesses/types.ts';
import type { ProxySession } from '../proxy/server.ts';
import { redactUrl } from '../util/redact.ts';
import { POLAR_VERSION } from '../version.ts';
import { type CallCounters, newCounters, recordCalls } from './call-record.ts';
import type { CallRecord, SessionEndRecord, SessionRecord } from './record.ts';
import { type CaptureFormat, type CaptureWriteError, CaptureWriter } from './writer.ts';

export interface OpenSessionOptions {
  profile: HarnessProfile;
  backend: Backend;
  model: string;
  output: string;
  /** capture format version (default 2) */
  format?: CaptureFormat;
  argv: string[];
  cwd: string;
  proxyUrl: string;
  taskId?: string;
  sample?: number;
  meta?: Record<string, string>;
  onCall?: (record: CallRecord) => void;
}

export interface CaptureSession {
  /** what the proxy serves this session with; its `complete` records each call */
  proxy: ProxySession;
  /** calls recorded so far, and how many of them failed (the harness hanging up or a cut call aside) */
  readonly calls: number;
  readonly errors: number;
  /** the counts session_end states (src/capture/call-record.ts) */
  readonly counters: Readonly<CallCounters>;
  startedAt: Date;
  output: string;
  /** writes the session record (call once the argv is final) */
  begin(argv: string[], extra?: Record<string, unknown>): void;
  /** the first capture write that failed (the file was cut back to its last whole record) */
  readonly writeError: CaptureWriteError | null;
  /**
   * Writes the calls still queued, session_end, and closes the file. `unfinished`: calls still running
   * whose records can no longer be written (counted as lost).
   */
  end(outcome: {
    exitCode: number | null;
    signal: string | null;
    status: SessionEndRecord['status'];
    unauthorized?: number;
    unfinished?: number;
  }): void;
}

export function newSessionKey(): string {
  return `polar-${randomBytes(24).toString('hex')}`;
}

export function openSession(options: OpenSessionOptions): CaptureSession {
  const output = resolve(options.output);
  const writer = new CaptureWriter(output, options.format ? { format: options.format } : {});
  const startedAt = new Date();
  const id = `sess_${randomUUID()}`;
  const key = newSessionKey();
  const counters = newCounters();
  const complete = recordCalls(
    {
      id,
      key,
      harness: options.profile.name,
      tokenExact: options.backend.tokenExact,
      writer,
      callMeta: (h, b) => options.profile.callMeta(h, b),
      ...(options.onCall ? { onCall: options.onCall } : {}),
    },
    counters,
  );
  const proxy: ProxySession = {
    id,
    key,
    model: options.model,
    backend: options.backend,
    state: new Map(),
    complete,
  };
  let ended = false;
  return {
    proxy,
    get calls() {
      return counters.calls;
    },
    get errors() {
      return counters.errors;
    },
    counters,
    get writeError() {
      return writer.failure;
    },
    startedAt,
    output,
    begin(argv, extra = {}) {
      const record: SessionRecord = {
        v: 1,
        type: 'session',
        id: proxy.id,
        harness: options.profile.name,
        argv,
        cwd: resolve(options.cwd),
        started_at: startedAt.toISOString(),
        polar_version: POLAR_VERSION,
        backend: {
          kind: options.backend.kind,
          url: options.backend.url === null ? null : redactUrl(options.backend.url),
          token_exact: options.backend.tokenExact,
        },
        model: options.model,
        task_id: options.taskId ?? null,
        sample: options.sample ?? null,
        meta: options.meta ?? {},
        proxy_url: options.proxyUrl,
        ...extra,
      };
      writer.write(record);
    },
    end({ exitCode, signal, status, unauthorized, unfinished }) {
      if (ended) return;
      ended = true;
      // the calls still queued are written first, so the counts below are those of the file
      try {
        complete.flush();
      } catch {}
      const endedAt = new Date();
      const record: SessionEndRecord = {
        v: 1,
        type: 'session_end',
        session: proxy.id,
        ended_at: endedAt.toISOString(),
        duration_ms: endedAt.getTime() - startedAt.getTime(),
        exit_code: exitCode,
        signal,
        calls: counters.calls,
        errors: counters.errors,
        client_closed: counters.clientClosed,
        cut_calls: counters.cut,
        lost_calls: counters.lost + (unfinished ?? 0),
        status,
        unauthorized_requests: unauthorized ?? 0,
      };
      try {
        complete.flush();
        if (writer.records > 0) writer.write(record);
      } catch (error) {
        // (kept on writer.failure, reported by whoever ends the session)
        if (!writer.failure) throw error;
      } finally {
        writer.close();
      }
    },
  };
}
