/**
 * NeMo Gym's agent-server contract, transcribed into zod from NeMo Gym's own pydantic models (read at
 * github.com/NVIDIA-NeMo/Gym, main as of 2026-08; reference only, nothing copied). The routes are the
 * ones `SimpleResponsesAPIAgent.setup_webserver` mounts (nemo_gym/base_responses_api_agent.py):
 *
 *   POST /run                -> body BaseRunRequest, answer BaseVerifyResponse
 *   POST /v1/responses       -> body NeMoGymResponseCreateParamsNonStreaming, answer NeMoGymResponse
 *   POST /aggregate_metrics  -> body AggregateMetricsRequest, answer AggregateMetrics
 *
 * Sources, per schema:
 * - responseCreateParamsSchema: `NeMoGymResponseCreateParamsNonStreaming` in nemo_gym/openai_utils.py
 *   (`extra="forbid"`: an unknown field is an error).
 * - token fields: `TokenIDLogProbMixin` and `_validate_atomic_token_metadata` in nemo_gym/openai_utils.py
 *   (prompt_token_ids, generation_token_ids, generation_log_probs all present or none; routed_experts
 *   optional), and the "Data Interface" section of the docs page
 *   fern/versions/latest/pages/contribute/rl-framework-integration/openai-compatible-http-server-on-policy-correction.mdx
 *   (the fields attach to the final output item of each model call).
 * - output items: `NeMoGymResponseReasoningItem`, `NeMoGymResponseOutputMessage`,
 *   `NeMoGymResponseFunctionToolCall`, `NeMoGymFunctionCallOutput`, `NeMoGymEasyInputMessage` and their
 *   `*ForTraining` variants in nemo_gym/openai_utils.py; `_require_response_output_item_type` (an output
 *   item must carry `type`).
 * - responseSchema: `NeMoGymResponse(Response)` in nemo_gym/openai_utils.py over openai-python's
 *   `Response` (src/openai/types/responses/response.py: id, created_at, model, object, output,
 *   parallel_tool_calls, tool_choice, tools required) with `NeMoGymResponseUsage`.
 * - runRequestSchema / verifyResponseSchema: `BaseRunRequest`, `BaseVerifyResponse` in
 *   nemo_gym/base_resources_server.py (agents declare `extra="allow"`, e.g.
 *   responses_api_agents/simple_agent/app.py, so row fields such as `verifier_metadata`, `agent_ref`,
 *   `_ng_task_index` ride along and come back).
 * - aggregate metrics: `AggregateMetricsRequest`, `AggregateMetrics` in nemo_gym/config_types.py;
 *   their key names (`mean/<field>` ...) follow `compute_aggregate_metrics` / `RewardProfiler` in
 *   nemo_gym/reward_profile.py.
 * - what NeMo RL reads from a /run answer: `_postprocess_nemo_gym_to_nemo_rl_result` in
 *   nemo_rl/environments/nemo_gym.py (github.com/NVIDIA-NeMo/RL): `response.output` items with a
 *   non-empty generation_token_ids are trainable, and each one's prompt_token_ids must start with all
 *   ids seen so far (prompts and generations of the trainable items before it); `reward` is the scalar.
 */
import { z } from 'zod';

export const TASK_INDEX_KEY = '_ng_task_index';
export const ROLLOUT_INDEX_KEY = '_ng_rollout_index';

const tokenIds = z.array(z.number().int().nonnegative());

/** TokenIDLogProbMixin: the three fields on a trainable item (plus MoE routing, which polar never sets). */
export const tokenFieldsSchema = z.object({
  prompt_token_ids: tokenIds,
  generation_token_ids: tokenIds,
  generation_log_probs: z.array(z.number()),
  routed_experts: z.union([z.string(), z.array(z.array(z.array(z.number().int())))]).optional(),
});
export type TokenFields = z.infer<typeof tokenFieldsSchema>;

const TOKEN_FIELDS = ['prompt_token_ids', 'generation_token_ids', 'generation_log_probs'] as const;

/** `_validate_atomic_token_metadata`: all three token fields, or none of them. */
function atomicTokenFields(value: Record<string, unknown>, ctx: z.RefinementCtx): void {
  const present = TOKEN_FIELDS.filter((k) => k in value);
  if (present.length === 0 && !('routed_experts' in value)) return;
  const missing = TOKEN_FIELDS.filter((k) => !(k in value));
  if (missing.length > 0) {
    ctx.addIssue({
      code: 'custom',
      message: `token metadata must include all required fields; missing: ${missing.join(', ')}`,
    });
    return;
  }
  const parsed = tokenFieldsSchema.safeParse(value);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) ctx.addIssue({ ...issue, code: 'custom' } as never);
  }
}

const status = z.enum(['in_progress', 'completed', 'incomplete']);

export const outputTextSchema = z.looseObject({
  type: z.literal('output_text'),
  text: z.string(),
  annotations: z.array(z.unknown()),
  logprobs: z.array(z.unknown()).nullable().optional(),
});

/** NeMoGymResponseReasoningItem (`summary` is a list of {type: summary_text, text}) */
export const reasoningItemSchema = z.looseObject({
  type: z.literal('reasoning'),
  id: z.string(),
  summary: z.array(z.looseObject({ type: z.literal('summary_text'), text: z.string() })),
  encrypted_content: z.string().nullable().optional(),
  content: z.array(z.unknown()).nullable().optional(),
});

/** NeMoGymResponseOutputMessage */
export const outputMessageSchema = z.looseObject({
  type: z.literal('message'),
  id: z.string(),
  role: z.literal('assistant'),
  status: status.default('completed'),
  content: z.array(
    z.union([outputTextSchema, z.looseObject({ type: z.literal('refusal'), refusal: z.string() })]),
  ),
});

/** NeMoGymResponseFunctionToolCall */
export const functionCallSchema = z.looseObject({
  type: z.literal('function_call'),
  arguments: z.string(),
  call_id: z.string(),
  name: z.string(),
  id: z.string().nullable().optional(),
  status: status.nullable().optional(),
});

/** NeMoGymFunctionCallOutput */
export const functionCallOutputSchema = z.looseObject({
  type: z.literal('function_call_output'),
  call_id: z.string(),
  output: z.union([z.string(), z.array(z.unknown())]),
  id: z.string().nullable().optional(),
  status: status.nullable().optional(),
});

/** NeMoGymEasyInputMessage / NeMoGymMessage (input side: user, system, developer, assistant text) */
export const inputMessageSchema = z.looseObject({
  type: z.literal('message').optional(),
  role: z.enum(['user', 'assistant', 'system', 'developer']),
  content: z.union([z.string(), z.array(z.looseObject({ type: z.string() }))]),
});

/** The item kinds polar emits, plus any other typed item (mcp_call, web_search_call, ...) passed through. */
const knownItem = z.union([
  reasoningItemSchema,
  outputMessageSchema,
  functionCallSchema,
  functionCallOutputSchema,
  inputMessageSchema,
]);

const otherItem = z
  .looseObject({ type: z.string().min(1) })
  .refine((v) => !['reasoning', 'message', 'function_call', 'function_call_output'].includes(v.type), {
    message: 'not a valid item of its type',
  });

/** NeMoGymResponseInputItem (BeforeValidator: atomic token metadata) */
export const inputItemSchema = z
  .union([knownItem, otherItem])
  .superRefine((v, ctx) => atomicTokenFields(v as Record<string, unknown>, ctx));

/** NeMoGymResponseOutputItem: an input item that must name its type */
export const outputItemSchema = inputItemSchema.superRefine((v, ctx) => {
  if (typeof (v as { type?: unknown }).type !== 'string') {
    ctx.addIssue({ code: 'custom', message: 'Responses API output items must include a type discriminator' });
  }
});

/** NeMoGymResponseCreateParamsNonStreaming (extra="forbid") */
export const responseCreateParamsSchema = z.strictObject({
  background: z.boolean().nullable().optional(),
  include: z.array(z.string()).nullable().optional(),
  input: z.union([z.string(), z.array(inputItemSchema)]),
  instructions: z.string().nullable().optional(),
  max_output_tokens: z.number().int().nullable().optional(),
  max_tool_calls: z.number().int().nullable().optional(),
  metadata: z.record(z.string(), z.string()).nullable().optional(),
  model: z.string().nullable().optional(),
  parallel_tool_calls: z.boolean().default(true),
  previous_response_id: z.string().nullable().optional(),
  prompt: z.unknown().optional(),
  reasoning: z.looseObject({}).nullable().optional(),
  service_tier: z.enum(['auto', 'default', 'flex', 'scale', 'priority']).nullable().optional(),
  store: z.boolean().nullable().optional(),
  temperature: z.number().nullable().optional(),
  text: z.unknown().optional(),
  tool_choice: z.unknown().default('auto'),
  tools: z.array(z.looseObject({ type: z.string() })).default([]),
  top_logprobs: z.number().int().nullable().optional(),
  top_p: z.number().nullable().optional(),
  truncation: z.enum(['auto', 'disabled']).nullable().optional(),
  user: z.string().nullable().optional(),
  stream: z.literal(false).nullable().optional(),
});
export type ResponseCreateParams = z.infer<typeof responseCreateParamsSchema>;

/** NeMoGymResponseUsage */
export const usageSchema = z.looseObject({
  input_tokens: z.number().int(),
  input_tokens_details: z.looseObject({ cached_tokens: z.number().int().nullable() }),
  output_tokens: z.number().int(),
  output_tokens_details: z.looseObject({ reasoning_tokens: z.number().int().nullable() }),
  total_tokens: z.number().int(),
});

/** NeMoGymResponse (openai Response with NeMo Gym's item union and usage) */
export const responseSchema = z.looseObject({
  id: z.string(),
  created_at: z.number(),
  model: z.string(),
  object: z.literal('response'),
  output: z.array(outputItemSchema),
  parallel_tool_calls: z.boolean(),
  tool_choice: z.unknown().refine((v) => v !== undefined, 'required'),
  tools: z.array(z.unknown()),
  error: z.looseObject({ code: z.string(), message: z.string() }).nullable().optional(),
  incomplete_details: z.looseObject({ reason: z.string().nullable().optional() }).nullable().optional(),
  instructions: z.unknown().optional(),
  metadata: z.record(z.string(), z.string()).nullable().optional(),
  temperature: z.number().nullable().optional(),
  top_p: z.number().nullable().optional(),
  status: z
    .enum(['completed', 'failed', 'in_progress', 'cancelled', 'queued', 'incomplete'])
    .nullable()
    .optional(),
  usage: usageSchema.nullable().optional(),
});
export type GymResponse = z.infer<typeof responseSchema>;

/** BaseRunRequest (extra fields allowed and echoed back, as the agents in NeMo Gym do) */
export const runRequestSchema = z.looseObject({
  responses_create_params: responseCreateParamsSchema,
});

/** BaseVerifyResponse = BaseVerifyRequest (run request + response) + reward */
export const verifyResponseSchema = z.looseObject({
  responses_create_params: responseCreateParamsSchema,
  response: responseSchema,
  reward: z.number(),
});
export type VerifyResponse = z.infer<typeof verifyResponseSchema>;

/** AggregateMetricsRequest: stripped verify responses (at least _ng_task_index and reward) */
export const aggregateMetricsRequestSchema = z.looseObject({
  verify_responses: z.array(z.record(z.string(), z.unknown())),
});

/** AggregateMetrics: flat string keys for W&B/MLflow */
export const aggregateMetricsSchema = z.looseObject({
  group_level_metrics: z.array(z.record(z.string(), z.unknown())).default([]),
  agent_metrics: z.record(z.string(), z.unknown()).default({}),
  key_metrics: z.record(z.string(), z.unknown()).default({}),
});
export type AggregateMetrics = z.infer<typeof aggregateMetricsSchema>;

/** Whether an output item is trainable in NeMo RL's sense: a non-empty generation_token_ids. */
export function isTrainable(item: unknown): item is TokenFields & Record<string, unknown> {
  const ids = (item as { generation_token_ids?: unknown } | null)?.generation_token_ids;
  return Array.isArray(ids) && ids.length > 0;
}
