/**
 * The session's recorder without a proxy, for the tests of src/capture/call-record.ts: `completedCall(id)`
 * is a finished, non-streamed chat call as the proxy hands it over (src/proxy/call.ts CompletedCall), with
 * a small JSON body unless `over` gives another request or field; `startRecording(file)` opens a
 * CaptureWriter on FILE and gives it, fresh counters and the session's `complete` (recordCalls).
 */
import {
  type CallCounters,
  newCounters,
  type RecordCalls,
  recordCalls,
} from '../../src/capture/call-record.ts';
import { type CaptureFormat, CaptureWriter } from '../../src/capture/writer.ts';
import type { CompletedCall } from '../../src/proxy/call.ts';

export function completedCall(id: string, over: Partial<CompletedCall> = {}): CompletedCall {
  const now = new Date();
  const body = { model: 'm', messages: [{ role: 'user', content: `hello ${id}` }] };
  return {
    id,
    api: 'openai-chat',
    modelCall: true,
    stream: false,
    startedAt: now,
    endedAt: now,
    ttfbMs: 1,
    backendMs: 1,
    totalMs: 2,
    request: {
      method: 'POST',
      path: '/v1/chat/completions',
      headers: { 'content-type': 'application/json' },
      body,
      raw: Buffer.from(JSON.stringify(body)),
    },
    canonicalRequest: null,
    canonicalResponse: null,
    backendRequest: null,
    tokens: { promptTokenIds: null, completionTokenIds: null, completionLogprobs: null },
    response: { status: 200, body: { ok: true } },
    error: null,
    warnings: [],
    backendInfo: {},
    ...over,
  };
}

export interface Recording {
  writer: CaptureWriter;
  counters: CallCounters;
  complete: RecordCalls;
}

/** A session `s` (generic harness, not token-exact) recording into FILE under `key`. */
export function startRecording(
  file: string,
  options: { format?: CaptureFormat; key?: string } = {},
): Recording {
  const writer = new CaptureWriter(file, options.format ? { format: options.format } : {});
  const counters = newCounters();
  const key = options.key ?? 'polar-key-0123456789';
  const complete = recordCalls({ id: 's', key, harness: 'generic', tokenExact: false, writer }, counters);
  return { writer, counters, complete };
}
