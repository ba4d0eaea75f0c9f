/**
 * A harness's max_tokens never fails a call: Claude Code asks 32000, and vLLM answers 400 when prompt +
 * max_tokens exceeds max_model_len (SGLang likewise, tokenizer_manager._validate_one_request). polar
 * sends what is left of the context instead, records the cap in `backend_info.max_tokens_fit`, and when
 * the prompt alone fills the context answers the harness's own context-length error
 * (`context_length_exceeded`), on which Codex and Claude Code compact.
 */
import type { CanonicalRequest, ProxyFault } from '../protocols/canonical.ts';
import { fault } from '../protocols/canonical.ts';
import { contextLimit } from './http.ts';

/** What `backend_info.max_tokens_fit` records for a call whose max tokens polar lowered. */
export interface MaxTokensFit {
  asked: number;
  sent: number;
  prompt_tokens: number;
  max_model_len: number;
  /** how the prompt was counted: the server's /tokenize, the ids polar rendered, or the server's 400 */
  counted_by: 'tokenize' | 'prompt_ids' | 'server_error';
}

export type Fitted = { maxTokens: number; fit?: MaxTokensFit } | { fault: ProxyFault };

/** The harness's context error for a prompt of `promptTokens` in a context of `maxModelLen`. */
export function contextFault(promptTokens: number, maxModelLen: number): ProxyFault {
  // Anthropic's own wording ("prompt is too long: N tokens > M maximum"), which Claude Code parses;
  // M is the longest prompt that leaves room for one sampled token
  return fault(
    'context_length_exceeded',
    `prompt is too long: ${promptTokens} tokens > ${maxModelLen - 1} maximum (the server's max_model_len is ${maxModelLen}; compact the conversation)`,
  );
}

/** Pure rule: the max tokens to send for a prompt of known length. */
export function fitToContext(
  asked: number,
  promptTokens: number,
  maxModelLen: number,
  countedBy: MaxTokensFit['counted_by'],
): Fitted {
  const left = maxModelLen - promptTokens;
  if (left < 1) return { fault: contextFault(promptTokens, maxModelLen) };
  if (asked <= left) return { maxTokens: asked };
  return {
    maxTokens: left,
    fit: {
      asked,
      sent: left,
      prompt_tokens: promptTokens,
      max_model_len: maxModelLen,
      counted_by: countedBy,
    },
  };
}

/**
 * An upper bound of the prompt's tokens without a tokenizer: a byte-level BPE token covers at least
 * one byte, and the chat template adds a little per message. When asked + this bound fits, no count
 * is needed (the common case: one request, no /tokenize round trip).
 */
export function promptUpperBound(request: CanonicalRequest): number {
  const bytes =
    Buffer.byteLength(JSON.stringify(request.messages)) + Buffer.byteLength(JSON.stringify(request.tools));
  return bytes + 64 * request.messages.length + 2048;
}

/** Fits `asked` to the server's context, counting the prompt only when it might not fit. */
export async function fitMaxTokens(init: {
  asked: number;
  request: CanonicalRequest;
  maxModelLen: () => Promise<number | null>;
  countPrompt: () => Promise<number | null>;
}): Promise<Fitted> {
  const len = await init.maxModelLen();
  if (len === null) return { maxTokens: init.asked };
  if (init.asked + promptUpperBound(init.request) <= len) return { maxTokens: init.asked };
  const prompt = await init.countPrompt();
  if (prompt === null) return { maxTokens: init.asked }; // the server's own 400 decides, see below
  return fitToContext(init.asked, prompt, len, 'tokenize');
}

/**
 * After a context-length 400 that states the limit and the prompt length (vLLM: "maximum context length
 * is M tokens and your request has P input tokens"): the fit for one retry, or null when there is
 * nothing to retry (the prompt itself does not fit, or the message does not say).
 */
export function retryAfterContextFault(f: ProxyFault, asked: number | undefined): MaxTokensFit | null {
  if (f.kind !== 'context_length_exceeded' || asked === undefined) return null;
  const limit = contextLimit(f.message);
  if (limit?.maxModelLen === undefined || limit.promptTokens === undefined) return null;
  // SGLang ("Requested token count exceeds ...") refuses prompt + max_new_tokens >= context_len
  const reserve = /requested token count exceeds/i.test(f.message) ? 1 : 0;
  const left = limit.maxModelLen - limit.promptTokens - reserve;
  if (left < 1 || left >= asked) return null;
  return {
    asked,
    sent: left,
    prompt_tokens: limit.promptTokens,
    max_model_len: limit.maxModelLen,
    counted_by: 'server_error',
  };
}
