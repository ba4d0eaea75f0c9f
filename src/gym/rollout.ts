/**
 * One captured rollout -> the Responses-API output of NeMo Gym's contract (src/gym/contract.ts).
 * Pure: capture call records in, output items and trace facts out.
 *
 * The calls are split into traces with the trajectory builder's exact prefix merging
 * (src/trajectory/merge.ts, no splice repair): inside a trace every call's prompt starts with the
 * previous call's prompt + completion, token for token. NeMo RL's Gym path takes ONE contiguous chain
 * per rollout (it asserts the prefix property across all trainable items of `response.output`), so the
 * answer carries one trace, the *main chain*: the trace that holds the rollout's last call that is not
 * a side call (compaction summary, title, prewarm), i.e. the chain that produced the final state the
 * reward grades. The
 * other traces (compaction summaries, the conversation before a compaction, subagents, side calls) are
 * reported in `traces` (and by the server as `polar_*` metrics) and stay in the capture file; they are
 * never appended to the output, because a non-contiguous chain would trip NeMo RL's assert or, worse,
 * train on prompts the model never saw.
 */
import { type CallRecord, isHangUp } from '../capture/record.ts';
import { DEFAULTS } from '../options/defaults.ts';
import type { CanonicalMessage, CanonicalRequest, CanonicalResponse } from '../protocols/canonical.ts';
import { type MergeCall, type MergedTrace, mergeCalls } from '../trajectory/merge.ts';
import type { TraceKind } from '../trajectory/record.ts';
import { isTrainable, type TokenFields } from './contract.ts';

export interface TraceSummary {
  kind: TraceKind;
  calls: number;
  call_ids: string[];
  prompt_tokens: number;
  generated_tokens: number;
  main: boolean;
  after_compaction?: true;
}

export interface RolloutOutput {
  /** Responses output items of the main chain, token fields on the last item of each model call */
  output: Record<string, unknown>[];
  traces: TraceSummary[];
  /** index into traces of the main chain (-1: no usable call) */
  main: number;
  /**
   * model calls recorded, usable calls (ids, no error), calls outside the main chain, failed calls, and
   * calls the harness hung up on or polar cut (no answer, but not a failure: counted apart)
   */
  calls: { recorded: number; usable: number; outside_main: number; errors: number; hung_up: number };
  usage: { input_tokens: number; output_tokens: number };
  /** why a call was not usable (error, no ids, no logprobs) */
  skipped: string[];
}

export class NonContiguousError extends Error {}

const MODEL_APIS = new Set(['openai-responses', 'anthropic-messages', 'openai-chat', 'gemini']);

interface Parts {
  reasoning: string;
  signature: string | null;
  content: string;
  toolCalls: { id: string; name: string; arguments: string }[];
}

/** The assistant turn a call answered: the record's canonical response (the same for every wire API). */
export function responseParts(record: CallRecord): Parts {
  const r = record.canonical_response as CanonicalResponse | null | undefined;
  if (!r) return { reasoning: '', signature: null, content: '', toolCalls: [] };
  return {
    reasoning: r.reasoning,
    signature: r.reasoningSignature ?? null,
    content: r.content,
    toolCalls: r.toolCalls.map((c) => ({ id: c.id, name: c.name, arguments: c.arguments })),
  };
}

function textOf(message: CanonicalMessage): string {
  if (message.role === 'user') return message.content.map((p) => (p.type === 'text' ? p.text : '')).join('');
  return message.content;
}

/** Items the environment (the harness, its tools, the user) added since the last assistant turn. */
function environmentItems(request: CanonicalRequest | null, callId: string): Record<string, unknown>[] {
  const messages = request?.messages ?? [];
  let last = -1;
  messages.forEach((m, i) => {
    if (m.role === 'assistant') last = i;
  });
  if (last < 0) return [];
  const items: Record<string, unknown>[] = [];
  for (const [i, m] of messages.slice(last + 1).entries()) {
    if (m.role === 'tool') {
      items.push({
        type: 'function_call_output',
        id: `fco_${callId.replace(/^call_/, '')}_${i}`,
        call_id: m.toolCallId,
        output: m.content,
        status: 'completed',
      });
    } else if (m.role === 'user' || m.role === 'system') {
      items.push({
        type: 'message',
        role: m.role,
        content: [{ type: 'input_text', text: textOf(m) }],
        status: 'completed',
      });
    }
  }
  return items;
}

/** The output items of one model call, with the token fields on the last one. */
function modelItems(record: CallRecord, tokens: TokenFields): Record<string, unknown>[] {
  const parts = responseParts(record);
  const key = record.id.replace(/^call_/, '');
  const items: Record<string, unknown>[] = [];
  if (parts.reasoning) {
    items.push({
      type: 'reasoning',
      id: `rs_${key}`,
      summary: [{ type: 'summary_text', text: parts.reasoning }],
      encrypted_content: parts.signature,
    });
  }
  if (parts.content || parts.toolCalls.length === 0) {
    items.push({
      type: 'message',
      id: `msg_${key}`,
      role: 'assistant',
      status: record.finish_reason === 'length' ? 'incomplete' : 'completed',
      content: [{ type: 'output_text', text: parts.content, annotations: [] }],
    });
  }
  parts.toolCalls.forEach((c, i) => {
    items.push({
      type: 'function_call',
      id: `fc_${key}_${i}`,
      call_id: c.id,
      name: c.name,
      arguments: c.arguments,
      status: 'completed',
    });
  });
  Object.assign(items[items.length - 1]!, tokens);
  return items;
}

function usable(record: CallRecord): string | null {
  if (!MODEL_APIS.has(record.api)) return 'not a model call';
  if (record.error) return `error: ${record.error.message}`;
  if (!record.prompt_token_ids || !record.completion_token_ids) return 'no token ids';
  if (!record.completion_logprobs) return 'no logprobs';
  if (record.completion_token_ids.length === 0) return 'empty completion';
  return null;
}

export function rolloutOutput(records: readonly CallRecord[]): RolloutOutput {
  const sorted = [...records].sort((a, b) => a.seq - b.seq);
  const skipped: string[] = [];
  const ok: CallRecord[] = [];
  let modelCalls = 0;
  let errors = 0;
  let hungUp = 0;
  const usage = { input_tokens: 0, output_tokens: 0 };
  for (const r of sorted) {
    if (!MODEL_APIS.has(r.api)) continue;
    modelCalls++;
    if (r.error && isHangUp(r.error.kind)) hungUp++;
    else if (r.error) errors++;
    const why = usable(r);
    if (why) {
      skipped.push(`${r.id}: ${why}`);
      continue;
    }
    ok.push(r);
    usage.input_tokens += r.prompt_token_ids!.length;
    usage.output_tokens += r.completion_token_ids!.length;
  }
  const byId = new Map(ok.map((r) => [r.id, r]));
  const mergeInput: MergeCall[] = ok.map((r) => ({
    id: r.id,
    seq: r.seq,
    prompt: r.prompt_token_ids!,
    completion: r.completion_token_ids!,
    logprobs: r.completion_logprobs,
    tokenExact: r.token_exact,
    finishReason: r.finish_reason,
    requestKind: typeof r.harness_meta.request_kind === 'string' ? r.harness_meta.request_kind : null,
    traceKind: typeof r.harness_meta.trace_kind === 'string' ? r.harness_meta.trace_kind : null,
  }));
  const { traces } = mergeCalls(mergeInput, { eotIds: DEFAULTS.eotIds.value, splice: false });
  const main = mainTrace(traces, byId);
  const summaries: TraceSummary[] = traces.map((t, i) => ({
    kind: t.kind,
    calls: t.calls.length,
    call_ids: t.calls,
    prompt_tokens: t.prompt_ids.length,
    generated_tokens: t.loss_mask.filter((m) => m === 1).length,
    main: i === main,
    ...(t.after_compaction ? { after_compaction: true as const } : {}),
  }));
  const output: Record<string, unknown>[] = [];
  if (main >= 0) {
    traces[main]!.calls.forEach((id, k) => {
      const r = byId.get(id)!;
      if (k > 0) output.push(...environmentItems(r.canonical_request as CanonicalRequest | null, r.id));
      output.push(
        ...modelItems(r, {
          prompt_token_ids: r.prompt_token_ids!,
          generation_token_ids: r.completion_token_ids!,
          generation_log_probs: r.completion_logprobs!,
        }),
      );
    });
  }
  assertContiguous(output);
  return {
    output,
    traces: summaries,
    main,
    calls: {
      recorded: modelCalls,
      usable: ok.length,
      outside_main: ok.length - (main >= 0 ? traces[main]!.calls.length : 0),
      errors,
      hung_up: hungUp,
    },
    usage,
    skipped,
  };
}

/**
 * The trace holding the rollout's last call that is not a side call (compaction summary, title,
 * prewarm): the main conversation's final chain. After a compaction that is the chain resumed from the
 * summary; with subagents it is the parent's chain, which speaks last.
 */
function mainTrace(traces: readonly MergedTrace[], byId: Map<string, CallRecord>): number {
  let best = -1;
  let bestSeq = -1;
  traces.forEach((t, i) => {
    if (t.kind === 'compaction' || t.kind === 'side') return;
    const last = byId.get(t.calls[t.calls.length - 1]!)!.seq;
    if (last > bestSeq) {
      bestSeq = last;
      best = i;
    }
  });
  return best;
}

/**
 * NeMo RL's check (nemo_rl/environments/nemo_gym.py, `_postprocess_nemo_gym_to_nemo_rl_result`): each
 * trainable item's prompt_token_ids starts with every id seen so far. Throws NonContiguousError.
 */
export function assertContiguous(output: readonly unknown[]): void {
  const seen: number[] = [];
  for (const [index, item] of output.entries()) {
    if (!isTrainable(item)) continue;
    const prompt = item.prompt_token_ids;
    for (let i = 0; i < seen.length; i++) {
      if (prompt[i] !== seen[i]) {
        throw new NonContiguousError(
          `output item ${index}: prompt_token_ids differ from the ids seen so far at position ${i} (of ${seen.length})`,
        );
      }
    }
    for (let i = seen.length; i < prompt.length; i++) seen.push(prompt[i]!);
    for (const id of item.generation_token_ids) seen.push(id);
  }
}
