/**
 * Capture format v2's (and v3's) call records: the writer's encoder picks, for each call, the earlier call of the
 * same session it extends (its base) and writes the prompt ids, the harness request body, the canonical
 * request and the backend request body as deltas against it (src/capture/delta.ts); the reader's decoder
 * rebuilds the full record, so consumers see the same records as from a v1 file. A base is always an
 * earlier line of the same file: every record is whole given the lines before it.
 */
import { InputError } from '../errors.ts';
import {
  commonIdPrefix,
  DeltaError,
  decodeIds,
  decodeObject,
  encodeObject,
  isPlainObject,
  type ObjectDelta,
} from './delta.ts';
import type { CallRecord, CaptureRecord } from './record.ts';
import { validateCaptureRecord } from './validate.ts';

export interface CallDelta {
  base: string;
  fields: string[];
}

/** What the encoder keeps of an earlier call (full values, shared with the record it was made from). */
interface Head {
  id: string;
  api: string;
  prompt: number[] | null;
  completion: number[] | null;
  body: unknown;
  canonical: unknown;
  backendBody: unknown;
}

/** A call record encoded for the file, and the step that makes it a base for later calls. */
export interface EncodedCall {
  /** the record as written: `v: 2` or `v: 3`, and the shared fields as deltas when it extends an earlier call */
  value: Record<string, unknown>;
  /**
   * Registers the call as a chain head (a base for later deltas). Call it only once the record's line
   * is on disk: a record that failed to write must never be a base, or every later delta against it
   * would name a call the file does not hold.
   */
  commit(): void;
}

/**
 * The writer's side: per file, the session's chain heads (calls no later call has fully extended yet),
 * newest last. A head that a later call extends completely (its prompt and completion are a prefix of the
 * new prompt) is dropped: the new call matches everything it did at least as far. Encoding reads the
 * heads only; they change when a written record is committed.
 */
export class CallEncoder {
  private readonly heads = new Map<string, Head[]>();

  constructor(
    private readonly maxHeads = 8,
    /** the version written: 2, or 3 (2's encoding; call records may carry weight_versions) */
    private readonly version: 2 | 3 = 3,
  ) {}

  encode(record: CallRecord): EncodedCall {
    const heads = this.heads.get(record.session) ?? [];
    const prompt = record.prompt_token_ids;
    const { base, keep } = pickBase(heads, record);
    const out: Record<string, unknown> = { ...record, v: this.version };
    let replaces: Head | undefined;
    if (base !== undefined) {
      const fields: string[] = [];
      if (prompt !== null && base.prompt !== null && keep > 0) {
        out.prompt_token_ids = { keep, add: prompt.slice(keep) };
        fields.push('prompt_token_ids');
      }
      const body = encodeObject(base.body, record.request.body);
      if (body) {
        out.request = { ...record.request, body };
        fields.push('request.body');
      }
      const canonical = encodeObject(base.canonical, record.canonical_request);
      if (canonical) {
        out.canonical_request = canonical;
        fields.push('canonical_request');
      }
      const backend = encodeObject(base.backendBody, record.backend_request?.body);
      if (backend && record.backend_request) {
        out.backend_request = { ...record.backend_request, body: backend };
        fields.push('backend_request.body');
      }
      if (fields.length > 0) out.delta = { base: base.id, fields } satisfies CallDelta;
      const full = base.prompt === null ? -1 : base.prompt.length + (base.completion?.length ?? 0);
      if (keep === full) replaces = base;
    }
    const head: Head | null =
      record.canonical_request === null
        ? null
        : {
            id: record.id,
            api: record.api,
            prompt,
            completion: record.completion_token_ids,
            body: record.request.body,
            canonical: record.canonical_request,
            backendBody: record.backend_request?.body,
          };
    return { value: out, commit: () => this.commit(record.session, head, replaces) };
  }

  /** the written call becomes a head; the head it fully extends (still one) is dropped */
  private commit(session: string, head: Head | null, replaces: Head | undefined): void {
    const heads = this.heads.get(session) ?? [];
    this.heads.set(session, heads);
    const at = replaces ? heads.indexOf(replaces) : -1;
    if (at >= 0) heads.splice(at, 1);
    if (head === null) return;
    heads.push(head);
    if (heads.length > this.maxHeads) heads.shift();
  }

  /** Forgets a session (after its session_end). */
  end(session: string): void {
    this.heads.delete(session);
  }
}

/**
 * The head the record extends: with token ids, the longest common prefix of its prompt with a head's
 * prompt + completion (newest first; a head that cannot beat the best is not compared, and none is
 * once the whole prompt matched); without, the
 * newest head of the same API.
 */
function pickBase(heads: Head[], record: CallRecord): { base: Head | undefined; keep: number } {
  const prompt = record.prompt_token_ids;
  if (prompt !== null) {
    let best: Head | undefined;
    let keep = 0;
    for (let i = heads.length - 1; i >= 0; i--) {
      const h = heads[i]!;
      if (h.prompt === null || h.api !== record.api) continue;
      if (h.prompt.length + (h.completion?.length ?? 0) <= keep) continue;
      const n = commonIdPrefix(h.prompt, h.completion ?? [], prompt);
      if (n > keep) {
        best = h;
        keep = n;
        // the whole prompt matched: no older head can match more (a harness resending a prompt)
        if (keep === prompt.length) break;
      }
    }
    if (best) return { base: best, keep };
  }
  for (let i = heads.length - 1; i >= 0; i--) {
    if (heads[i]!.api === record.api) return { base: heads[i], keep: 0 };
  }
  return { base: undefined, keep: 0 };
}

/**
 * The reader's side: rebuilds v2 and v3 call records and validates every record. One decoder per file (bases are
 * earlier lines of the same file); a session's calls are kept until its session_end.
 */
export class CaptureDecoder {
  private readonly calls = new Map<string, Map<string, CallRecord>>();

  constructor(private readonly source: string) {}

  decode(line: number, value: unknown): CaptureRecord {
    const rebuilt =
      isPlainObject(value) && (value.v === 2 || value.v === 3) && value.type === 'call'
        ? this.rebuild(line, value)
        : value;
    const record = validateCaptureRecord(this.source, line, rebuilt);
    if (record.type === 'call') {
      const session = this.calls.get(record.session) ?? new Map<string, CallRecord>();
      this.calls.set(record.session, session);
      session.set(record.id, record);
    } else if (record.type === 'session_end') {
      this.calls.delete(record.session);
    }
    return record;
  }

  private rebuild(line: number, value: Record<string, unknown>): Record<string, unknown> {
    const delta = value.delta;
    if (delta === undefined) return value;
    const fail = (field: string, problem: string) =>
      new InputError(this.source, line, field, problem, 'see docs/capture-format.md (format v2)');
    if (!isPlainObject(delta) || typeof delta.base !== 'string' || !Array.isArray(delta.fields)) {
      throw fail('delta', 'expected {"base": "<call id>", "fields": [...]}');
    }
    const base =
      typeof value.session === 'string' ? this.calls.get(value.session)?.get(delta.base) : undefined;
    if (!base) {
      throw fail('delta.base', `call ${delta.base} is not an earlier call of this session in this file`);
    }
    const { delta: _, ...out } = value;
    try {
      for (const field of delta.fields) applyField(out, base, field);
    } catch (error) {
      if (error instanceof DeltaError) throw fail(error.field, error.message);
      throw error;
    }
    return out;
  }
}

function applyField(out: Record<string, unknown>, base: CallRecord, field: unknown): void {
  switch (field) {
    case 'prompt_token_ids':
      if (base.prompt_token_ids === null) throw new DeltaError(field, 'the base call has no prompt ids');
      out.prompt_token_ids = decodeIds(
        base.prompt_token_ids,
        base.completion_token_ids,
        out.prompt_token_ids,
        field,
      );
      return;
    case 'request.body': {
      const request = isPlainObject(out.request) ? out.request : {};
      out.request = { ...request, body: decodeObject(base.request.body, request.body as ObjectDelta, field) };
      return;
    }
    case 'canonical_request':
      out.canonical_request = decodeObject(base.canonical_request, out.canonical_request, field);
      return;
    case 'backend_request.body': {
      const backend = isPlainObject(out.backend_request) ? out.backend_request : {};
      out.backend_request = {
        ...backend,
        body: decodeObject(base.backend_request?.body, backend.body, field),
      };
      return;
    }
    default:
      throw new DeltaError('delta.fields', `unknown delta field ${JSON.stringify(field)}`);
  }
}
