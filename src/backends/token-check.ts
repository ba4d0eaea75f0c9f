/**
 * Never a silently wrong token id. vLLM from 0.10.2 until PR #29074 (issue vllm-project/vllm#27482)
 * drops the `token_ids` and logprobs of streamed chunks its tool parser swallows (`delta_message is
 * None` in the chat serving stream generator): ids and logprobs still agree in count, so nothing looks
 * wrong, but `usage.completion_tokens` stays the true count. A call whose ids disagree with the
 * server's count is recorded with `inexact` (never token_exact), and the user is told once.
 */
import { fault, type ProxyFault, type TokenData } from '../protocols/canonical.ts';
import { log } from '../util/log.ts';
import type { CallRecorder } from './types.ts';

export const DROPPED_IDS_ADVICE =
  'vLLM 0.10.2 up to the fix of vllm-project/vllm#27482 (PR #29074, merged 2025-11-20: vLLM 0.12.0 and later) ' +
  'drops the token ids of streamed tool-call chunks; upgrade vLLM, or use --backend tokens, which never ' +
  "goes through the server's tool parser";

export interface IdsCheck {
  server: string;
  ids: number[] | null;
  /** `usage.completion_tokens` as the server reported it; null when it did not */
  usageCompletion: number | null;
  streamed: boolean;
  /** the request carried tools (so a tool parser ran) */
  tools: boolean;
}

const warned = new Set<string>();

/** The `inexact` mark of a call whose ids disagree with the server's count, or undefined when they agree. */
export function checkCompletionIds(check: IdsCheck, recorder: CallRecorder): TokenData['inexact'] {
  if (check.ids === null || check.usageCompletion === null) return undefined;
  if (check.ids.length === check.usageCompletion) return undefined;
  const dropped =
    check.ids.length < check.usageCompletion && check.server === 'vllm' && check.streamed && check.tools;
  const cause = dropped ? 'ids_dropped_by_server' : 'ids_count_mismatch';
  const detail = `${check.ids.length} completion token ids for usage.completion_tokens ${check.usageCompletion}`;
  recorder.warn(`token ids incomplete (${cause}): ${detail}; the call is recorded as not token-exact`);
  if (!warned.has(cause)) {
    warned.add(cause);
    log.warn(
      dropped
        ? `the server returned fewer token ids than it generated (${detail}): ${DROPPED_IDS_ADVICE}. Such calls are recorded as not token-exact (backend_info.token_inexact).`
        : `the server's token ids disagree with its own count (${detail}); such calls are recorded as not token-exact (backend_info.token_inexact)`,
    );
  }
  recorder.annotate('token_inexact', { cause, detail });
  return { cause, detail };
}

/** `finish_reason: "abort"`: the server cancelled the request; the text is not a completed generation. */
export function abortFault(url: string): ProxyFault {
  return {
    ...fault(
      'backend_error',
      `${url} aborted the generation (finish_reason "abort": the request was cancelled or preempted by the server)`,
    ),
    aborted: true,
  };
}

/** for tests: forget which causes were already announced */
export function resetWarnedCauses(): void {
  warned.clear();
}
