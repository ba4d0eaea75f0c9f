/**
 * From the proxy's completed call to one line of the capture file: the CallRecord (format in
 * docs/capture-format.md), the session key scrubbed, written as one append. The harness's request body
 * goes in as the bytes it arrived as (valid JSON: it parsed) instead of being serialised and encoded
 * again, spliced into the line and written with one writev.
 */

import type { CompletedCall } from '../proxy/call.ts';
import { hasUnparsedToolCall } from '../tokenizer/unparsed.ts';
import { stringifyJson } from '../util/json-text.ts';
import { log } from '../util/log.ts';
import { redactUrl } from '../util/redact.ts';
import type { EncodedCall } from './codec.ts';
import type { CallRecord } from './record.ts';
import { redactHeaders, redactSecrets } from './redact.ts';
import type { CaptureWriter } from './writer.ts';

/** What the recorder knows of the session a call belongs to. */
export interface RecordingSession {
  id: string;
  key: string;
  harness: string;
  tokenExact: boolean;
  writer: CaptureWriter;
  /** harness-specific facts about a model call (request kind, thread id) from its headers and body */
  callMeta?: (headers: Record<string, string>, body: unknown) => Record<string, unknown>;
  onCall?: (record: CallRecord) => void;
}

/**
 * Counts a session's calls as its session_end states them, and numbers its records in the order calls
 * end (a lost call keeps its number: the gap in `seq` shows where it was).
 */
export interface CallCounters {
  seq: number;
  /** records written */
  calls: number;
  /** of those, failed calls (the backend's or polar's doing; not the two kinds below) */
  errors: number;
  /** of those, calls the harness hung up on (`client_closed`) */
  clientClosed: number;
  /** of those, calls cut short because their session was closed or polar shut down (`cut`) */
  cut: number;
  /** calls whose record could not be written (a failed write: disk full, a file-size limit) */
  lost: number;
  /**
   * of all records (whatever their kind), calls a weight update of polar loop cut after part of the answer
   * had reached the harness (`backend_info.weight_update_cut`, --weight-sync-pause abort): polar's doing
   */
  weightUpdateCut: number;
}

export function newCounters(): CallCounters {
  return { seq: 0, calls: 0, errors: 0, clientClosed: 0, cut: 0, lost: 0, weightUpdateCut: 0 };
}

function count(counters: CallCounters, record: CallRecord): void {
  counters.calls++;
  const kind = record.error?.kind;
  if (kind === 'client_closed') counters.clientClosed++;
  else if (kind === 'cut') counters.cut++;
  else if (kind !== undefined) counters.errors++;
  if (record.backend_info?.weight_update_cut === true) counters.weightUpdateCut++;
}

export function toCallRecord(
  call: CompletedCall,
  session: Pick<RecordingSession, 'id' | 'harness' | 'tokenExact' | 'callMeta'>,
  seq: number,
): CallRecord {
  const headers = redactHeaders(call.request.headers);
  const final = call.canonicalResponse;
  const tokenExact =
    session.tokenExact &&
    call.error === null &&
    call.tokens.promptTokenIds !== null &&
    call.tokens.completionTokenIds !== null &&
    call.tokens.inexact === undefined;
  // a model call whose body parsed as JSON: the harness profile reads its facts from it
  const harnessMeta =
    call.modelCall && call.request.raw !== null ? (session.callMeta?.(headers, call.request.body) ?? {}) : {};
  return {
    v: 1,
    type: 'call',
    id: call.id,
    session: session.id,
    seq,
    api: call.api,
    harness: session.harness,
    stream: call.stream,
    started_at: call.startedAt.toISOString(),
    ended_at: call.endedAt.toISOString(),
    timings: {
      ttfb_ms: call.ttfbMs === null ? null : round(call.ttfbMs),
      backend_ms: call.backendMs === null ? null : round(call.backendMs),
      total_ms: round(call.totalMs),
    },
    request: {
      method: call.request.method,
      path: redactUrl(call.request.path),
      headers,
      body: call.request.body,
    },
    response: call.response ?? { status: 0, body: null },
    canonical_request: call.canonicalRequest,
    canonical_response: final,
    backend_request: call.backendRequest && {
      ...call.backendRequest,
      url: redactUrl(call.backendRequest.url),
    },
    prompt_token_ids: call.tokens.promptTokenIds,
    completion_token_ids: call.tokens.completionTokenIds,
    completion_logprobs: call.tokens.completionLogprobs,
    finish_reason: final?.finishReason ?? (call.error ? 'error' : null),
    usage: final
      ? { prompt_tokens: final.usage.promptTokens, completion_tokens: final.usage.completionTokens }
      : null,
    token_exact: tokenExact,
    warnings: call.warnings,
    harness_meta: harnessMeta,
    backend_info: call.backendInfo,
    // (a backend's message may quote its URL)
    error: call.error && { ...call.error, message: redactUrl(call.error.message) },
    // only in a loop (docs/capture-format.md): the oldest policy version that sampled the call
    ...policyVersionOf(call),
    // format 3: the weight versions that sampled it, as the server reported them or polar published them
    ...(call.weightVersions ? { weight_versions: call.weightVersions } : {}),
    // only when true: older readers and records without it read as false
    ...(hasUnparsedToolCall(final) ? { tool_call_unparsed: true } : {}),
  };
}

/** A label polar sets on the server (a loop step, src/loop/publish*.ts) as the version it names. */
function loopVersion(label: string): number | null {
  return /^(0|[1-9]\d{0,8})$/.test(label) ? Number(label) : null;
}

/**
 * `policy_version`: the oldest version that sampled the call. The server's labels when it reported them
 * and they are polar's (whole numbers: a server polar loop publishes to carries them); else the versions
 * polar published (the one when the call started first); absent outside a loop.
 */
function policyVersionOf(call: CompletedCall): { policy_version?: number } {
  const w = call.weightVersions;
  if (w) {
    const versions = w.versions.map(loopVersion);
    if (versions.every((v) => v !== null) && (w.source === 'polar' || call.policyVersion != null))
      return { policy_version: Math.min(...(versions as number[])) };
  }
  return call.policyVersion != null ? { policy_version: call.policyVersion } : {};
}

/**
 * The line object (a v1 record, or its v2 encoding) as the pieces of one JSONL line: the raw body
 * spliced in when the line holds the body literally, unless it spans lines or holds the session key
 * (then the record is serialised whole).
 */
export function serialiseRecord(
  line: Record<string, unknown>,
  record: CallRecord,
  raw: Buffer | null,
  key: string,
): Buffer[] | string {
  const request = line.request as CallRecord['request'];
  if (
    raw === null ||
    request.body !== record.request.body ||
    raw.includes(10) ||
    raw.includes(13) ||
    raw.includes(key)
  )
    return stringifyJson(line);
  const text = stringifyJson({ ...line, request: { ...request, body: RAW_BODY } });
  const at = text.indexOf(RAW_BODY_JSON);
  if (at < 0) return stringifyJson(line);
  return [Buffer.from(text.slice(0, at)), raw, Buffer.from(text.slice(at + RAW_BODY_JSON.length))];
}

/**
 * One call's record, encoded in the writer's format, scrubbed and appended. It never throws into the
 * call path: a record that cannot be serialised as it is (a value too deep for JSON.stringify) is written
 * degraded (the request body as text, the canonical forms left out, a warning saying so); a failed write
 * is logged and counted as a lost call (the harness already has its answer; the writer keeps the failure
 * for the session's end). The counts are those of the records written, so the session_end record agrees
 * with the file, and names the calls that are not in it.
 */
function writeCall(
  session: RecordingSession,
  call: CompletedCall,
  seq: number,
  counters: CallCounters,
): void {
  let out: { line: Buffer[] | string; record: CallRecord; encoded?: EncodedCall };
  try {
    out = fullLine(call, session, seq);
  } catch (error) {
    out = degradedLine(call, session, seq, error);
  }
  try {
    session.writer.writeLine(out.line, out.encoded);
    count(counters, out.record);
  } catch (error) {
    counters.lost++;
    log.error(`could not write the call record to ${session.writer.path}: ${(error as Error).message}`);
    return;
  }
  try {
    session.onCall?.(out.record);
  } catch (error) {
    log.error(`call record ${call.id}: ${(error as Error).message}`);
  }
}

/** The session's `complete`, and `flush` to write what is queued now (before session_end). */
export type RecordCalls = ((call: CompletedCall) => void) & { flush(): void };

/**
 * The session's `complete`: numbers each call at once, in the order calls end; building, encoding and
 * writing its record happens on the next turn of the event loop, off the response path (the answer's
 * last bytes leave first).
 */
export function recordCalls(session: RecordingSession, counters: CallCounters): RecordCalls {
  const queue: Array<{ call: CompletedCall; seq: number }> = [];
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    for (let next = queue.shift(); next; next = queue.shift())
      writeCall(session, next.call, next.seq, counters);
  };
  const complete = (call: CompletedCall) => {
    queue.push({ call, seq: counters.seq++ });
    if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  };
  return Object.assign(complete, { flush });
}

function fullLine(
  call: CompletedCall,
  session: RecordingSession,
  seq: number,
): { line: Buffer[] | string; record: CallRecord; encoded: EncodedCall } {
  const record = toCallRecord(call, session, seq);
  // serialise once; the per-session key is scrubbed from the text only if it appears at all (rare:
  // a harness echoing its own env), which keeps the hot path to one JSON.stringify
  const encoded = session.writer.encodeCall(record);
  const line = serialiseRecord(encoded.value, record, call.request.raw, session.key);
  const leaked = Array.isArray(line)
    ? line[0]!.includes(session.key) || line[2]!.includes(session.key)
    : line.includes(session.key);
  if (!leaked) return { line, record, encoded };
  return {
    line: JSON.stringify(redactSecrets(encoded.value, [session.key])),
    record: redactSecrets(record, [session.key]),
    encoded,
  };
}

/**
 * The record of a call whose full record could not be serialised: the request body as the text it
 * arrived as, no canonical request, backend request or harness facts; failing that, no answer body
 * either. Shallow by construction, so it serialises; the key is scrubbed from the text.
 */
function degradedLine(
  call: CompletedCall,
  session: RecordingSession,
  seq: number,
  cause: unknown,
): { line: string; record: CallRecord } {
  const why = `record degraded: ${(cause as Error)?.message ?? cause}`;
  log.warn(`call ${call.id}: ${why}`);
  const bodyText = call.request.raw ? call.request.raw.toString('utf8') : null;
  const plain: CompletedCall = {
    ...call,
    request: { ...call.request, body: bodyText ?? String(call.request.body), raw: null },
    canonicalRequest: null,
    backendRequest: null,
    warnings: [...call.warnings, `${why}: the request body is stored as text`],
  };
  const bare = { id: session.id, harness: session.harness, tokenExact: session.tokenExact };
  const scrub = (text: string) => text.split(session.key).join('<redacted>');
  let record = toCallRecord(plain, bare, seq);
  try {
    const line = scrub(JSON.stringify(record));
    return { line, record: JSON.parse(line) as CallRecord };
  } catch {
    record = toCallRecord(
      {
        ...plain,
        canonicalResponse: null,
        response: call.response && { status: call.response.status, body: null },
      },
      bare,
      seq,
    );
    record.warnings.push('the answer body is left out too');
    const line = scrub(JSON.stringify(record));
    return { line, record: JSON.parse(line) as CallRecord };
  }
}

const RAW_BODY = '\u0000polar-raw-body\u0000';
const RAW_BODY_JSON = JSON.stringify(RAW_BODY);

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}
