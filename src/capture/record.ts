/**
 * The capture record: one JSON object per line of a capture file. Documented in docs/capture-format.md;
 * this file is the executable form of that document. Readers validate required fields strictly and keep
 * unknown fields (forward compatible within a major version). Version 2 differs only in how a call
 * record may be written (deltas against an earlier call, src/capture/codec.ts); the record read back,
 * with its deltas rebuilt, is the same as version 1's, and it is what these schemas check. Version 3 is
 * version 2 whose call records may carry `weight_versions` (the weight versions that sampled the call, as
 * the server reported them or as polar published them); a record of any version that carries the field
 * has it checked.
 */
import { z } from 'zod';

/** The newest version polar writes (and the default of `polar capture --format`). */
export const CAPTURE_VERSION = 3;
/** The versions polar reads. */
export const CAPTURE_VERSIONS: readonly number[] = [1, 2, 3];

const version = z.union([z.literal(1), z.literal(2), z.literal(3)]);

const tokenIds = z.array(z.number().int().nonnegative());
const isoTime = z.string().min(1);

export const sessionRecordSchema = z.looseObject({
  v: version,
  type: z.literal('session'),
  id: z.string().min(1),
  harness: z.string().min(1),
  argv: z.array(z.string()),
  cwd: z.string(),
  started_at: isoTime,
  polar_version: z.string(),
  backend: z.looseObject({ kind: z.string(), url: z.string().nullable(), token_exact: z.boolean() }),
  model: z.string(),
  task_id: z.string().nullable(),
  sample: z.number().int().nonnegative().nullable().optional(),
  meta: z.record(z.string(), z.string()),
});

export const sessionEndRecordSchema = z.looseObject({
  v: version,
  type: z.literal('session_end'),
  session: z.string().min(1),
  ended_at: isoTime,
  duration_ms: z.number().nonnegative(),
  exit_code: z.number().int().nullable(),
  signal: z.string().nullable(),
  /** call records written, and of them: failed calls, calls the harness hung up on, calls cut short */
  calls: z.number().int().nonnegative(),
  errors: z.number().int().nonnegative(),
  client_closed: z.number().int().nonnegative().optional(),
  cut_calls: z.number().int().nonnegative().optional(),
  /** calls the proxy served whose record is not in the file (a failed write; absent in older files: 0) */
  lost_calls: z.number().int().nonnegative().optional(),
  /** completed: harness exited 0; error: non-zero exit or failed to start; timeout; interrupted */
  status: z.enum(['completed', 'error', 'timeout', 'interrupted']),
});

export const callErrorSchema = z.looseObject({
  kind: z.string(),
  message: z.string(),
  status: z.number().int(),
});

/** The wire APIs a call record may name (its `api`); the hand-written check (call-check.ts) reads them too. */
export const CALL_APIS = [
  'openai-responses',
  'anthropic-messages',
  'openai-chat',
  'gemini',
  'anthropic-count-tokens',
  'gemini-count-tokens',
  'models',
] as const;

/** Who said which weights sampled a call: the inference server in its answer, or polar (what it published). */
export const WEIGHT_VERSION_SOURCES = ['server', 'polar'] as const;

/**
 * `weight_versions` of a call record (capture format 3): the weight versions that sampled the call, oldest
 * first. `server`: the labels the inference server reported (SGLang's `metadata.weight_versions`), with
 * their spans over the completion tokens when it gave them; `polar`: the versions polar loop had
 * published (src/backends/weight-updates.ts), no spans.
 */
export const weightVersionsSchema = z.looseObject({
  source: z.enum(WEIGHT_VERSION_SOURCES),
  versions: z.array(z.string().min(1)).min(1),
  spans: z
    .array(
      z.looseObject({
        version: z.string().min(1),
        start: z.number().int().nonnegative(),
        end: z.number().int().nonnegative(),
      }),
    )
    .optional(),
});

export type WeightVersions = z.infer<typeof weightVersionsSchema>;

export const callRecordSchema = z.looseObject({
  v: version,
  type: z.literal('call'),
  id: z.string().min(1),
  session: z.string().min(1),
  seq: z.number().int().nonnegative(),
  api: z.enum(CALL_APIS),
  harness: z.string(),
  stream: z.boolean(),
  started_at: isoTime,
  ended_at: isoTime,
  timings: z.looseObject({
    ttfb_ms: z.number().nullable(),
    backend_ms: z.number().nullable(),
    total_ms: z.number(),
  }),
  request: z.looseObject({
    method: z.string(),
    path: z.string(),
    headers: z.record(z.string(), z.string()),
    body: z.unknown(),
  }),
  response: z.looseObject({ status: z.number().int(), body: z.unknown() }),
  canonical_request: z.unknown().nullable(),
  /** the answer in canonical form (content, reasoning, tool calls, finish reason); null when the call failed */
  canonical_response: z.unknown().nullable().optional(),
  backend_request: z.looseObject({ url: z.string(), body: z.unknown() }).nullable(),
  prompt_token_ids: tokenIds.nullable(),
  completion_token_ids: tokenIds.nullable(),
  completion_logprobs: z.array(z.number()).nullable(),
  finish_reason: z.string().nullable(),
  usage: z.looseObject({ prompt_tokens: z.number(), completion_tokens: z.number() }).nullable(),
  token_exact: z.boolean(),
  warnings: z.array(z.string()),
  harness_meta: z.record(z.string(), z.unknown()),
  /** backend-specific facts: splices, render mismatches, tool parse errors */
  backend_info: z.record(z.string(), z.unknown()).optional(),
  error: callErrorSchema.nullable(),
  /** the completion's text holds a tool call in the model's format that the response does not return */
  tool_call_unparsed: z.boolean().optional(),
  /**
   * polar loop: the oldest policy version (published loop step, 0: the starting model) that sampled the
   * call: from `weight_versions` when its labels are polar's, else the version published when it started
   */
  policy_version: z.number().int().nonnegative().optional(),
  /** capture format 3, polar loop: the weight versions that sampled the call and who said so */
  weight_versions: weightVersionsSchema.optional(),
});

export const gradingRecordSchema = z.looseObject({
  v: version,
  type: z.literal('grading'),
  session: z.string().min(1),
  task_id: z.string(),
  sample: z.number().int().nonnegative().nullable(),
  resolved: z.boolean(),
  reward: z.number(),
  reason: z.string().nullable(),
  graded_at: isoTime,
});

export const captureRecordSchema = z.discriminatedUnion('type', [
  sessionRecordSchema,
  sessionEndRecordSchema,
  callRecordSchema,
  gradingRecordSchema,
]);

export type SessionRecord = z.infer<typeof sessionRecordSchema>;
export type SessionEndRecord = z.infer<typeof sessionEndRecordSchema>;
export type CallRecord = z.infer<typeof callRecordSchema>;
export type GradingRecord = z.infer<typeof gradingRecordSchema>;
export type CaptureRecord = z.infer<typeof captureRecordSchema>;

/**
 * Call error kinds that are not failures of the backend or of polar: the harness hung up
 * (`client_closed`), or polar cut the call when its session closed or polar shut down (`cut`). Counted
 * apart from `errors` wherever calls are counted.
 */
export const HANG_UP_KINDS: ReadonlySet<string> = new Set(['client_closed', 'cut']);

export function isHangUp(kind: string): boolean {
  return HANG_UP_KINDS.has(kind);
}

/** Checks the completion arrays agree with each other; returns the problem or null. */
export function tokenConsistency(record: CallRecord): string | null {
  const ids = record.completion_token_ids;
  const lps = record.completion_logprobs;
  if (record.token_exact && (record.prompt_token_ids === null || ids === null) && record.error === null) {
    return 'token_exact is true but prompt_token_ids or completion_token_ids is null';
  }
  if (ids !== null && lps !== null && ids.length !== lps.length) {
    return `completion_logprobs has ${lps.length} entries for ${ids.length} completion_token_ids`;
  }
  return null;
}
