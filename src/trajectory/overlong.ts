/**
 * Overlong traces (issue 30, part 3): calls that ended at their max tokens and traces cut by build's
 * --max-trace-tokens. The build flags them in the trajectory record (trace `length_stopped`, `truncated`,
 * `headroom`); what they train is `--overlong mask|penalty|keep` (DEFAULTS.overlong), applied by polar
 * train's worker (polar_train/overlong.py, the same rule in Python) and, for the verl rows another trainer
 * reads, by the build itself. docs/trajectory-format.md, "Overlong traces".
 *
 * The penalty is DAPO's soft overlong punishment (Yu et al. 2025, arXiv:2503.14476, eq. 13; also
 * shared/reference/grpo.md, "overlong shaping or masking of truncated rollouts"):
 *   R_length(y) = 0                          if |y| <= L_max - L_cache
 *               = ((L_max - L_cache) - |y|) / L_cache   if L_max - L_cache < |y| <= L_max
 *               = -1                         if |y| > L_max
 * added to the reward. With the headroom h = L_max - |y| it is clamp(h / L_cache - 1, -1, 0), and it
 * only decreases as h does: a rollout of many calls and limits gets the penalty of its least headroom.
 */
import { mapFinishReason as anthropicStop } from '../protocols/anthropic-messages/map-finish-reason.ts';
import type { FinishReason } from '../protocols/canonical.ts';
import { mapFinishReason as geminiFinish } from '../protocols/gemini/map-finish-reason.ts';
import { mapFinishReason as responsesStatus } from '../protocols/openai-responses/map-finish-reason.ts';

const LENGTH: FinishReason = 'length';
const responsesLength = responsesStatus(LENGTH);

/**
 * A call stopped by its token limit, in every form a capture may hold: the canonical `length` (what polar
 * records, docs/capture-format.md), and each wire API's name for it, taken from that API's one mapper
 * (Chat Completions `length`, Anthropic `max_tokens`, Gemini `MAX_TOKENS`, Responses `incomplete` with
 * reason `max_output_tokens`), for captures written by other tools.
 */
export const LENGTH_FINISH_REASONS: ReadonlySet<string> = new Set([
  LENGTH,
  anthropicStop({ finishReason: LENGTH }),
  geminiFinish(LENGTH),
  ...(responsesLength.status === 'incomplete' ? [responsesLength.reason] : []),
]);

export function isLengthStop(finishReason: string | null): boolean {
  return finishReason !== null && LENGTH_FINISH_REASONS.has(finishReason);
}

/**
 * The max tokens in force for a call: what polar sent the server when it lowered the harness's ask to fit
 * the context (`backend_info.max_tokens_fit.sent`, src/backends/context-fit.ts), else what the harness
 * asked (`canonical_request.maxTokens`); null when neither is known (the server's own limit applied).
 */
export function maxTokensInForce(call: {
  canonical_request: unknown;
  backend_info?: unknown;
}): number | null {
  const fit = field(field(call.backend_info, 'max_tokens_fit'), 'sent');
  if (isCount(fit)) return fit;
  const asked = field(call.canonical_request, 'maxTokens');
  return isCount(asked) ? asked : null;
}

function field(value: unknown, key: string): unknown {
  return value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[key] : undefined;
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value > 0;
}

/**
 * A call's headroom: tokens left under its limit when it ended (0 when it ended at the limit, whatever
 * the limit was), null when its limit is unknown and it did not reach it.
 */
export function callHeadroom(
  completionTokens: number,
  maxTokens: number | null,
  lengthStop: boolean,
): number | null {
  if (lengthStop) return 0;
  return maxTokens === null ? null : Math.max(0, maxTokens - completionTokens);
}

/** The least of two headrooms (null: no known limit). */
export function leastHeadroom(a: number | null, b: number | null): number | null {
  if (a === null) return b;
  if (b === null) return a;
  return Math.min(a, b);
}

/** DAPO eq. 13 as written: the length reward of a response of `length` tokens under `maxLength`. */
export function dapoLengthReward(length: number, maxLength: number, buffer: number): number {
  return overlongPenalty(maxLength - length, buffer);
}

/** R_length from the headroom h = L_max - |y| and the buffer L_cache: clamp(h / L_cache - 1, -1, 0). */
export function overlongPenalty(headroom: number | null, buffer: number): number {
  if (headroom === null || headroom >= buffer) return 0;
  if (headroom < 0) return -1;
  return (headroom - buffer) / buffer;
}

/** The overlong facts of a trace (record.ts). */
export interface OverlongFacts {
  length_stopped?: number | undefined;
  truncated?: boolean | undefined;
  headroom?: number | undefined;
}

/** A trace cut by a length limit: a call of it ended at max tokens, or the build cut it. */
export function isOverlong(trace: OverlongFacts): boolean {
  return (trace.length_stopped ?? 0) > 0 || trace.truncated === true;
}

/** A rollout's least headroom over its traces (null: no known limit). */
export function rolloutHeadroom(traces: readonly OverlongFacts[]): number | null {
  let least: number | null = null;
  for (const t of traces) least = leastHeadroom(least, t.headroom ?? null);
  return least;
}
