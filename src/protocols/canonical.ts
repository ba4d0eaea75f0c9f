/**
 * The one canonical chat form every wire API converts to and from (no pairwise converters).
 * Shape follows the Vercel AI SDK's provider design (one internal form, four pure functions per wire
 * format: request in, request out, stream in, stream out), see docs/architecture.md.
 */
import { redactUrl } from '../util/redact.ts';

export type ApiName = 'openai-responses' | 'anthropic-messages' | 'openai-chat' | 'gemini';

/** The token-count endpoints (Anthropic's /v1/messages/count_tokens, Gemini's :countTokens): no sampling. */
export type TokenCountApi = 'anthropic-count-tokens' | 'gemini-count-tokens';

export const TOKEN_COUNT_APIS: readonly TokenCountApi[] = ['anthropic-count-tokens', 'gemini-count-tokens'];

/** whether a recorded call's `api` is a token count (not a sampling call) */
export function isTokenCount(api: string): api is TokenCountApi {
  return (TOKEN_COUNT_APIS as readonly string[]).includes(api);
}

export interface TextPart {
  type: 'text';
  text: string;
}
export interface ImagePart {
  type: 'image';
  /** data: URL or http(s) URL */
  url: string;
}
export type UserPart = TextPart | ImagePart;

export interface ToolCall {
  /** the id the harness sees (call_id / tool_use.id / tool_calls[].id) */
  id: string;
  name: string;
  /** JSON text of the arguments, exactly as sampled or sent */
  arguments: string;
}

export interface SystemMessage {
  role: 'system';
  content: string;
}
export interface UserMessage {
  role: 'user';
  content: UserPart[];
}
export interface AssistantMessage {
  role: 'assistant';
  content: string;
  /** reasoning text (thinking), when the harness sent it back */
  reasoning?: string;
  /** opaque round-trip token the proxy minted (Responses encrypted_content / Anthropic signature) */
  reasoningSignature?: string;
  toolCalls: ToolCall[];
}
export interface ToolMessage {
  role: 'tool';
  toolCallId: string;
  name?: string;
  content: string;
  isError?: boolean;
}
export type CanonicalMessage = SystemMessage | UserMessage | AssistantMessage | ToolMessage;

export interface CanonicalTool {
  name: string;
  description: string;
  /** JSON Schema of the arguments */
  parameters: Record<string, unknown>;
}

export type ToolChoice = 'auto' | 'none' | 'required' | { name: string };

export interface CanonicalRequest {
  model: string;
  messages: CanonicalMessage[];
  tools: CanonicalTool[];
  toolChoice?: ToolChoice;
  parallelToolCalls?: boolean;
  maxTokens?: number;
  temperature?: number;
  topP?: number;
  stop?: string[];
  /** whether the harness asked for a stream (the backend call may differ) */
  stream: boolean;
  /** harness asked for reasoning/thinking: 'on' | 'off' | undefined (backend default) */
  reasoning?: { enabled?: boolean; effort?: string };
}

export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter' | 'error';

export interface Usage {
  promptTokens: number;
  completionTokens: number;
}

export interface CanonicalResponse {
  id: string;
  model: string;
  content: string;
  reasoning: string;
  toolCalls: ToolCall[];
  finishReason: FinishReason;
  usage: Usage;
  /**
   * opaque value the proxy minted for this turn; writers emit it where the harness sends it back
   * untouched (Responses reasoning `encrypted_content`, Anthropic thinking `signature`)
   */
  reasoningSignature?: string;
  /** the stop sequence that ended the completion (finishReason 'stop'), when the backend says which */
  stopSequence?: string;
}

/** Token-level facts of one sampled completion, as the backend returned them. */
export interface TokenData {
  promptTokenIds: number[] | null;
  completionTokenIds: number[] | null;
  completionLogprobs: number[] | null;
  /**
   * set when the ids are known to be incomplete or unreliable (the call is then never token_exact):
   * `cause` is a stable key `polar build` counts by, `detail` says what was seen
   */
  inexact?: { cause: TokenInexactCause; detail: string };
}

/** Why a call's token ids cannot be trusted although the server returned some. */
export type TokenInexactCause =
  /** vLLM 0.10.2 until PR #29074 drops the ids of streamed chunks its tool parser swallows */
  | 'ids_dropped_by_server'
  /** fewer or more ids than usage.completion_tokens for another reason */
  | 'ids_count_mismatch';

/**
 * Stream events of the canonical form: small, named noun-verb. A stream is
 * start, then any mix of deltas, then exactly one of finish | error.
 */
export type StreamEvent =
  | {
      type: 'start';
      id: string;
      model: string;
      /**
       * the turn's reasoningSignature when the proxy mints it before streaming: writers must put it on
       * the reasoning/thinking block when that block closes, which is usually before `finish`
       */
      reasoningSignature?: string;
    }
  | { type: 'reasoning-delta'; text: string }
  | { type: 'text-delta'; text: string }
  | { type: 'tool-call-start'; index: number; id: string; name: string }
  | { type: 'tool-call-delta'; index: number; arguments: string }
  | { type: 'tool-call-end'; index: number }
  | { type: 'finish'; response: CanonicalResponse }
  | { type: 'error'; error: ProxyFault };

/** A fault on the proxy's path, rendered by each wire API in its own error shape. */
export interface ProxyFault {
  kind:
    | 'invalid_request'
    | 'authentication'
    | 'not_found'
    | 'too_large'
    /** the prompt alone fills the model's context: the harness compacts, as with its vendor's API */
    | 'context_length_exceeded'
    | 'backend_unreachable'
    | 'backend_timeout'
    | 'backend_error'
    | 'backend_no_token_ids'
    /** polar holds as many request bodies as its memory budget allows: answered 503 with retry-after */
    | 'overloaded'
    | 'internal';
  message: string;
  /** the HTTP status to answer with */
  status: number;
  /**
   * the server aborted the generation (`finish_reason: "abort"`): a weight update with pause mode abort
   * does this to the calls in flight, and the proxy sends such a call again (src/proxy/model-call.ts)
   */
  aborted?: true;
}

export interface Converted<T> {
  value: T;
  /** what could not be represented (an unsupported tool type, a dropped field): goes into the record */
  warnings: string[];
}

export function newId(prefix: string): string {
  const bytes = new Uint8Array(8);
  crypto.getRandomValues(bytes);
  return `${prefix}_${Buffer.from(bytes).toString('hex')}`;
}

/** Folds a stream of canonical events into the final response (what a non-streaming call returns). */
export function emptyResponse(id: string, model: string): CanonicalResponse {
  return {
    id,
    model,
    content: '',
    reasoning: '',
    toolCalls: [],
    finishReason: 'stop',
    usage: { promptTokens: 0, completionTokens: 0 },
  };
}

export function faultStatus(kind: ProxyFault['kind']): number {
  switch (kind) {
    case 'invalid_request':
    case 'context_length_exceeded':
      return 400;
    case 'authentication':
      return 401;
    case 'not_found':
      return 404;
    case 'too_large':
      return 413;
    case 'backend_unreachable':
    case 'backend_error':
    case 'backend_no_token_ids':
      return 502;
    case 'backend_timeout':
      return 504;
    case 'overloaded':
      return 503;
    case 'internal':
      return 500;
  }
}

/** A fault; a URL its message quotes loses its credentials (it reaches the harness and the capture). */
export function fault(kind: ProxyFault['kind'], message: string, status = faultStatus(kind)): ProxyFault {
  return { kind, message: redactUrl(message), status };
}
