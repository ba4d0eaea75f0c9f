/**
 * The trajectory record: one JSON line per harness session (one GRPO rollout), holding one or more
 * traces. Written by `polar build` (version 2), read by `polar train` (versions 1 and 2). Documented in
 * docs/trajectory-format.md; this file is the executable form of that document.
 *
 * Version 2 has no `advantage`: the trainer owns the advantage estimators (`polar train --advantage`,
 * polar_train/advantage.py) and computes them from `reward` and `group_id`. Version 1 records carry the
 * advantage an older `polar build` computed; `polar train` reads them and computes its own (see
 * docs/trajectory-format.md, "Versions").
 */
import { z } from 'zod';
import { OVERLONG_MODES } from '../options/defaults.ts';

/** the version `polar build` writes */
export const TRAJECTORY_VERSION = 2;
/** every version a reader accepts */
export const TRAJECTORY_VERSIONS = [1, 2] as const;

export const traceKinds = ['root', 'compaction', 'subagent', 'divergence', 'side'] as const;
export type TraceKind = (typeof traceKinds)[number];

const tokenIds = z.array(z.number().int().nonnegative());

export const traceSchema = z
  .looseObject({
    kind: z.enum(traceKinds),
    /** the first prompt of the chain (mask 0, not trained) */
    prompt_ids: tokenIds,
    /** each call's sampled ids and the interstitial tokens between calls, in order */
    response_ids: tokenIds,
    /** 1 = sampled by the policy (trained), 0 = tool output / template glue */
    loss_mask: z.array(z.union([z.literal(0), z.literal(1)])),
    /** sampling logprob per response token (0 where mask is 0); null when not token-exact */
    response_logprobs: z.array(z.number()).nullable(),
    finish_reason: z.string().nullable(),
    /** the call ids merged into this trace, in order */
    calls: z.array(z.string()),
    token_exact: z.boolean(),
    /** set when the trace was cut by --max-trace-tokens */
    truncated: z.boolean().optional(),
    /** kind divergence: index in traces[] of the trace it branched from (absent if that was filtered out) */
    parent: z.number().int().nonnegative().optional(),
    /** kind divergence: number of leading tokens shared with the parent's prompt_ids + response_ids */
    diverged_at: z.number().int().nonnegative().optional(),
    /** set when a later call of the same conversation no longer matched this chain: it ends here */
    cut: z.literal('divergence').optional(),
    /** set on the first trace of the root conversation after a compaction call */
    after_compaction: z.literal(true).optional(),
    /** turns joined by splicing (build --splice), when any */
    spliced_turns: z.number().int().nonnegative().optional(),
    /** calls of this trace whose text holds a tool call the server did not parse, when any */
    tool_call_unparsed: z.number().int().positive().optional(),
    /** calls of this trace that ended at their max tokens (finish reason length), when any */
    length_stopped: z.number().int().positive().optional(),
    /**
     * the fewest tokens left under a limit in force (a call's max tokens, build's --max-trace-tokens;
     * negative when the build cut the trace), when one is known: DAPO's L_max - |y| (overlong.ts)
     */
    headroom: z.number().int().optional(),
  })
  .superRefine((trace, ctx) => {
    if (trace.loss_mask.length !== trace.response_ids.length) {
      ctx.addIssue({
        code: 'custom',
        path: ['loss_mask'],
        message: `has ${trace.loss_mask.length} entries for ${trace.response_ids.length} response_ids`,
      });
    }
    if (trace.response_logprobs !== null && trace.response_logprobs.length !== trace.response_ids.length) {
      ctx.addIssue({
        code: 'custom',
        path: ['response_logprobs'],
        message: `has ${trace.response_logprobs.length} entries for ${trace.response_ids.length} response_ids`,
      });
    }
  });

export const trajectoryStatsSchema = z.looseObject({
  calls: z.number().int().nonnegative(),
  calls_merged: z.number().int().nonnegative(),
  chains: z.number().int().nonnegative(),
  truncations: z.number().int().nonnegative(),
  spliced_turns: z.number().int().nonnegative(),
  tokens_trainable: z.number().int().nonnegative(),
  tokens_total: z.number().int().nonnegative(),
});

const recordFields = {
  id: z.string().min(1),
  session: z.string().min(1),
  task_id: z.string().nullable(),
  sample: z.number().int().nonnegative().nullable(),
  group_id: z.string().nullable(),
  harness: z.string(),
  model: z.string(),
  status: z.enum(['completed', 'error', 'timeout', 'truncated']),
  reward: z.number().nullable(),
  /** polar loop: the oldest policy version (published loop step) among the calls it was built from */
  policy_version: z.number().int().nonnegative().optional(),
  traces: z.array(traceSchema).min(1),
  stats: trajectoryStatsSchema,
  /**
   * what `polar build --overlong` chose for this rollout's overlong traces, applied by polar train unless
   * its own --overlong is given (absent: DEFAULTS.overlong); docs/trajectory-format.md
   */
  overlong: z.looseObject({ mode: z.enum(OVERLONG_MODES), buffer: z.number().int().positive() }).optional(),
};

export const trajectoryRecordSchema = z.discriminatedUnion('v', [
  z.looseObject({ v: z.literal(2), ...recordFields }),
  // written by polar build before the trainer owned advantages: the advantage it computed then
  z.looseObject({ v: z.literal(1), ...recordFields, advantage: z.number().nullable() }),
]);

export type Trace = z.infer<typeof traceSchema>;
export type TrajectoryStats = z.infer<typeof trajectoryStatsSchema>;
export type TrajectoryRecord = z.infer<typeof trajectoryRecordSchema>;
