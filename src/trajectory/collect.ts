/**
 * Pass 1 of `polar build`: reads the inputs in order, line by line, grouping records per session. A
 * session is handed on as soon as its `session_end` arrives, or when its input ends without one; its
 * calls are then released, so memory is bounded by the sessions open at once.
 */
import type { Readable } from 'node:stream';
import { CaptureDecoder } from '../capture/codec.ts';
import {
  type CallRecord,
  type CaptureRecord,
  type GradingRecord,
  isHangUp,
  type SessionEndRecord,
  type SessionRecord,
} from '../capture/record.ts';
import { InputError } from '../errors.ts';
import { isTokenCount } from '../protocols/canonical.ts';
import { type JsonlLine, parseJsonLine, readLines, TruncatedLine } from '../util/jsonl.ts';
import { log } from '../util/log.ts';
import { parseWithPromptIds } from '../util/prompt-ids.ts';
import { captureShaped, type ScannedInputs } from './inputs.ts';
import type { MergeCall } from './merge.ts';
import { isLengthStop, maxTokensInForce } from './overlong.ts';
import { type BuildStats, count } from './stats.ts';

/** One session's records as collected so far. */
export interface OpenSession {
  header: SessionRecord;
  calls: MergeCall[];
  callIds: Set<string>;
  seqs: Set<number>;
  maxSeq: number;
  seenCalls: number;
  textOnly: number;
  grading: GradingRecord | null;
  /** the oldest policy_version of its sampled calls (polar loop); null when none names one */
  policyVersion: number | null;
}

/** What stays of a handed-on session: grading records that come later still reach it. */
export interface ClosedSession {
  grading: GradingRecord | null;
}

/** Called once per session, when it is complete (end null: its input ended without session_end). */
export type OnSession = (session: OpenSession, end: SessionEndRecord | null) => Promise<ClosedSession>;

export interface CollectOptions {
  stdin?: Readable;
  skipInvalid?: boolean;
  onInvalid?: (error: InputError) => void;
}

function toMergeCall(call: CallRecord): MergeCall {
  const meta = call.harness_meta;
  return {
    id: call.id,
    seq: call.seq,
    prompt: call.prompt_token_ids!,
    completion: call.completion_token_ids!,
    logprobs: call.completion_logprobs,
    tokenExact: call.token_exact,
    finishReason: call.finish_reason,
    ...(call.tool_call_unparsed ? { unparsed: true } : {}),
    ...(isLengthStop(call.finish_reason) ? { lengthStop: true } : {}),
    maxTokens: maxTokensInForce(call),
    requestKind: typeof meta.request_kind === 'string' ? meta.request_kind : null,
    traceKind: typeof meta.trace_kind === 'string' ? meta.trace_kind : null,
  };
}

/** Groups capture records per session; one collector per build. */
class SessionCollector {
  private readonly open = new Map<string, OpenSession>();
  private readonly closed = new Map<string, ClosedSession>();

  constructor(
    private readonly stats: BuildStats,
    private readonly onSession: OnSession,
  ) {}

  async add(record: CaptureRecord): Promise<void> {
    switch (record.type) {
      case 'session':
        return this.session(record);
      case 'call':
        return this.call(record);
      case 'session_end':
        return this.end(record);
      case 'grading':
        return this.grading(record);
      default: {
        const never: never = record;
        void never;
      }
    }
  }

  /** The input ended: sessions without session_end are handed on now (status error). */
  async endOfInput(): Promise<void> {
    for (const state of [...this.open.values()]) await this.close(state, null);
  }

  private async close(state: OpenSession, end: SessionEndRecord | null): Promise<void> {
    this.open.delete(state.header.id);
    this.closed.set(state.header.id, await this.onSession(state, end));
  }

  private session(record: SessionRecord): void {
    const { stats } = this;
    stats.sessions++;
    if (this.open.has(record.id)) count(stats.notes, 'repeated session record (ignored)');
    else if (this.closed.has(record.id)) count(stats.sessions_skipped, 'duplicate session id');
    else
      this.open.set(record.id, {
        header: record,
        calls: [],
        callIds: new Set(),
        seqs: new Set(),
        maxSeq: -1,
        seenCalls: 0,
        textOnly: 0,
        grading: null,
        policyVersion: null,
      });
  }

  private call(record: CallRecord): void {
    const { stats } = this;
    stats.calls++;
    const state = this.open.get(record.session);
    if (state === undefined) {
      count(
        stats.calls_skipped,
        this.closed.has(record.session) ? 'session already built (after session_end)' : 'unknown session',
      );
      return;
    }
    if (state.callIds.has(record.id)) {
      count(stats.calls_skipped, 'duplicate call id');
      return;
    }
    state.callIds.add(record.id);
    state.seenCalls++;
    if (record.tool_call_unparsed) stats.calls_tool_unparsed++;
    if (isLengthStop(record.finish_reason)) stats.calls_length++;
    if (record.seq < state.maxSeq) count(stats.notes, 'out-of-order seq (sorted)');
    if (state.seqs.has(record.seq)) count(stats.notes, 'duplicate seq (arrival order kept)');
    state.seqs.add(record.seq);
    state.maxSeq = Math.max(state.maxSeq, record.seq);
    if (isTokenCount(record.api) || record.api === 'models') {
      count(stats.calls_skipped, 'not a sampling call');
    } else if (record.error !== null) {
      // a call the harness hung up on, or polar cut, is counted apart: not a failure of the backend
      count(stats.calls_skipped, isHangUp(record.error.kind) ? `call ${record.error.kind}` : 'call error');
    } else if (record.prompt_token_ids === null || record.completion_token_ids === null) {
      count(stats.calls_skipped, 'no token ids');
      state.textOnly++;
    } else {
      state.calls.push(toMergeCall(record));
      if (record.policy_version !== undefined)
        state.policyVersion = Math.min(state.policyVersion ?? record.policy_version, record.policy_version);
      const inexact = record.backend_info?.token_inexact as { cause?: unknown } | undefined;
      if (typeof inexact?.cause === 'string') count(stats.calls_inexact, inexact.cause);
    }
  }

  private async end(record: SessionEndRecord): Promise<void> {
    const state = this.open.get(record.session);
    if (state === undefined) {
      count(
        this.stats.notes,
        this.closed.has(record.session) ? 'repeated session_end' : 'session_end for unknown session',
      );
      return;
    }
    // calls the proxy served whose record a failed write lost (disk full): named, not silently absent
    if (record.lost_calls)
      count(this.stats.calls_skipped, 'lost at capture (a failed write)', record.lost_calls);
    await this.close(state, record);
  }

  private grading(record: GradingRecord): void {
    const target = this.open.get(record.session) ?? this.closed.get(record.session);
    if (target === undefined) {
      count(this.stats.notes, 'grading for unknown session');
      return;
    }
    if (target.grading !== null) count(this.stats.notes, 'repeated grading (last kept)');
    target.grading = record;
  }
}

/** Parses one line into a record; null for a line skipped under skipInvalid (counted). */
function parseRecord(
  decoder: CaptureDecoder,
  source: string,
  line: JsonlLine,
  options: CollectOptions,
  stats: BuildStats,
): CaptureRecord | null {
  try {
    return decoder.decode(line.line, parseJsonLine(source, line, undefined, parseWithPromptIds));
  } catch (error) {
    if (error instanceof TruncatedLine) {
      count(stats.notes, 'cut-off last record (ignored)');
      log.warn(`${error.message}; ignored`);
      return null;
    }
    if (options.skipInvalid && error instanceof InputError) {
      count(stats.lines_skipped, error.field === undefined ? 'invalid JSON' : 'schema-invalid');
      options.onInvalid?.(error);
      return null;
    }
    throw error;
  }
}

/** Whether a file found in a directory starts with something other than a capture record. */
function notCapture(firstLine: string): boolean {
  let value: unknown;
  try {
    value = JSON.parse(firstLine);
  } catch {}
  return !captureShaped(value);
}

/** Reads every input in order and hands each complete session to onSession. */
export async function collectSessions(
  inputs: ScannedInputs,
  options: CollectOptions,
  stats: BuildStats,
  onSession: OnSession,
): Promise<void> {
  const collector = new SessionCollector(stats, onSession);
  for (const source of inputs.files) {
    let first = true;
    // (format v2 records are rebuilt against earlier lines of the same file)
    const decoder = new CaptureDecoder(source);
    for await (const line of readLines(source, options.stdin)) {
      // a directory holds other JSONL too (polar eval's results.jsonl, predictions.jsonl): a scanned
      // file whose first line is not a capture record is skipped as a whole, and counted
      if (first && inputs.discovered.has(source) && notCapture(line.text)) {
        count(stats.files_skipped, 'not a capture file (found in a directory)');
        break;
      }
      first = false;
      stats.lines++;
      const record = parseRecord(decoder, source, line, options, stats);
      if (record !== null) await collector.add(record);
    }
    await collector.endOfInput();
  }
}
