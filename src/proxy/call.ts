/**
 * One model call as the proxy sees it: the state while it runs (CallInProgress) and the plain value it
 * hands to its session when it is over (CompletedCall). Turning that value into a record, redacting and
 * writing it is the session's business (src/capture/call-record.ts); the proxy knows nothing of files.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { CallRecorder } from '../backends/types.ts';
import type { ReportedWeightVersions } from '../backends/weight-updates.ts';
import type {
  ApiName,
  CanonicalRequest,
  CanonicalResponse,
  TokenCountApi,
  TokenData,
} from '../protocols/canonical.ts';

export type CallError = {
  kind: string;
  message: string;
  status: number;
};

/**
 * Why a call in flight was stopped from outside, as the abort reason of its signal: the harness hung
 * up (`client_closed`, 499), or polar cut it (`cut`, 503: its session was closed or polar shut down).
 * Neither is a failure of the backend, whatever the backend made of the abort: the call's error says
 * which it was (docs/capture-format.md).
 */
export class CallAborted extends Error {
  constructor(
    readonly kind: 'client_closed' | 'cut',
    message: string,
  ) {
    super(message);
    // an abort, as the backends' transport tells one (src/backends/http.ts transportFault)
    this.name = 'AbortError';
  }

  get status(): number {
    return this.kind === 'client_closed' ? 499 : 503;
  }
}

/** Everything known about one finished call. Times are performance.now() milliseconds. */
export interface CompletedCall {
  id: string;
  /** the front API, or the token-count endpoint's own name */
  api: ApiName | TokenCountApi;
  /** the API served a model call (not a token count): harness facts apply to it */
  modelCall: boolean;
  stream: boolean;
  startedAt: Date;
  endedAt: Date;
  ttfbMs: number | null;
  backendMs: number | null;
  totalMs: number;
  request: {
    method: string;
    path: string;
    /** as received: redacting them is the recorder's job */
    headers: IncomingHttpHeaders;
    /** the parsed JSON body; the start of the text when it did not parse; null when unread */
    body: unknown;
    /** the body bytes as received, when they parsed as JSON */
    raw: Buffer | null;
  };
  canonicalRequest: CanonicalRequest | null;
  canonicalResponse: CanonicalResponse | null;
  backendRequest: { url: string; body: unknown } | null;
  tokens: TokenData;
  /** what the harness got: status and body (for a stream, the body a non-streamed call would have had) */
  response: { status: number; body: unknown } | null;
  error: CallError | null;
  warnings: string[];
  backendInfo: Record<string, unknown>;
  /** the policy version the backend named for this call (polar loop), null when none */
  policyVersion?: number | null;
  /**
   * the weight versions that sampled the call: as the server reported them, or as polar published them
   * (polar loop); null when neither says
   */
  weightVersions?: {
    source: 'server' | 'polar';
    versions: string[];
    spans?: ReportedWeightVersions['spans'];
  } | null;
}

/** The state of one call while it runs. */
export class CallInProgress {
  readonly id = `call_${randomUUID()}`;
  readonly t0 = performance.now();
  readonly startedAt = new Date();
  readonly warnings: string[] = [];
  readonly backendInfo: Record<string, unknown> = {};
  requestBody: unknown = null;
  rawBody: Buffer | null = null;
  stream = false;
  canonical: CanonicalRequest | null = null;
  backendRequest: { url: string; body: unknown } | null = null;
  tokens: TokenData = { promptTokenIds: null, completionTokenIds: null, completionLogprobs: null };
  final: CanonicalResponse | null = null;
  response: { status: number; body: unknown } | null = null;
  error: CallError | null = null;
  ttfb: number | null = null;
  backendMs: number | null = null;
  policyVersion: number | null = null;
  /** the versions polar published that sampled the call (src/backends/weight-updates.ts versionsOf) */
  polarVersions: number[] = [];
  /** the versions the server reported for the call (its last attempt's) */
  reportedVersions: ReportedWeightVersions | null = null;
  readonly recorder: CallRecorder;

  constructor(
    readonly api: CompletedCall['api'],
    readonly modelCall: boolean,
    readonly req: IncomingMessage,
  ) {
    this.recorder = {
      backendRequest: (url, body) => {
        this.backendRequest = { url, body };
      },
      tokens: (data) => {
        this.tokens = data;
      },
      warn: (message) => {
        this.warnings.push(message);
      },
      annotate: (key, value) => {
        this.backendInfo[key] = value;
      },
      weightVersions: (reported) => {
        this.reportedVersions = reported;
      },
    };
  }

  /**
   * The call was stopped from outside (its signal's reason). Unless it had already failed, that is its
   * error, and what the backend answered to the abort is not; when nothing had reached the harness yet,
   * its response is the abort's status with no body.
   */
  aborted(reason: CallAborted, errorBefore: CallError | null, headersSentBefore: boolean): void {
    if (errorBefore !== null) return;
    this.error = { kind: reason.kind, message: reason.message, status: reason.status };
    if (!headersSentBefore) this.response = { status: reason.status, body: null };
  }

  /** the value handed to the session (call once, when the call is over) */
  completed(): CompletedCall {
    return {
      id: this.id,
      api: this.api,
      modelCall: this.modelCall,
      stream: this.stream,
      startedAt: this.startedAt,
      endedAt: new Date(),
      ttfbMs: this.ttfb,
      backendMs: this.backendMs,
      totalMs: performance.now() - this.t0,
      request: {
        method: this.req.method ?? 'POST',
        path: this.req.url ?? '/',
        headers: this.req.headers,
        body: this.requestBody,
        raw: this.rawBody,
      },
      canonicalRequest: this.canonical,
      canonicalResponse: this.final,
      backendRequest: this.backendRequest,
      tokens: this.tokens,
      response: this.response,
      error: this.error,
      warnings: this.warnings,
      backendInfo: this.backendInfo,
      policyVersion: this.policyVersion,
      weightVersions: this.weightVersions(),
    };
  }

  private weightVersions(): CompletedCall['weightVersions'] {
    const r = this.reportedVersions;
    if (r && r.versions.length > 0)
      return { source: 'server', versions: r.versions, ...(r.spans?.length ? { spans: r.spans } : {}) };
    if (this.polarVersions.length > 0) return { source: 'polar', versions: this.polarVersions.map(String) };
    return null;
  }
}
