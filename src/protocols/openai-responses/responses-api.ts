/**
 * OpenAI Responses API request shapes, as harnesses send them (Codex CLI, Pi). Minimal and permissive:
 * unknown fields are kept (z.looseObject) so a proxy never drops what it does not understand. Input
 * items are validated one by one by type (see convert-request.ts) so errors name the exact field.
 */
import { z } from 'zod';

const num = z.number().nullish();

export const requestSchema = z.looseObject({
  model: z.string(),
  input: z.union([z.string(), z.array(z.unknown())]).nullish(),
  instructions: z.string().nullish(),
  tools: z.array(z.unknown()).nullish(),
  tool_choice: z.unknown().optional(),
  parallel_tool_calls: z.boolean().nullish(),
  max_output_tokens: num,
  temperature: num,
  top_p: num,
  stream: z.boolean().nullish(),
  reasoning: z.looseObject({ effort: z.string().nullish(), summary: z.string().nullish() }).nullish(),
  previous_response_id: z.string().nullish(),
});
export type ResponsesRequest = z.output<typeof requestSchema>;

/** Every input item has a type; Pi's "easy input message" `{role, content}` has none and is a message. */
export const itemHeadSchema = z.looseObject({ type: z.string().optional(), role: z.string().optional() });

const contentPartSchema = z.looseObject({
  type: z.string(),
  text: z.string().nullish(),
  image_url: z.string().nullish(),
});
export type ContentPart = z.output<typeof contentPartSchema>;

export const messageItemSchema = z.looseObject({
  role: z.enum(['user', 'assistant', 'system', 'developer']),
  content: z.union([z.string(), z.array(contentPartSchema)]),
});

export const functionCallItemSchema = z.looseObject({
  call_id: z.string(),
  name: z.string(),
  namespace: z.string().nullish(),
  arguments: z.string(),
});

/** `output` is a string or a list of content items (input_text / input_image). */
export const functionCallOutputItemSchema = z.looseObject({
  call_id: z.string(),
  output: z.union([z.string(), z.array(contentPartSchema)]),
});

export const customToolCallItemSchema = z.looseObject({
  call_id: z.string(),
  name: z.string(),
  input: z.string(),
});

export const reasoningItemSchema = z.looseObject({
  summary: z.array(z.looseObject({ type: z.string(), text: z.string() })).nullish(),
  content: z.array(z.looseObject({ type: z.string(), text: z.string() })).nullish(),
  encrypted_content: z.string().nullish(),
});

export const functionToolSchema = z.looseObject({
  type: z.literal('function'),
  name: z.string(),
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
});

export const namespaceToolSchema = z.looseObject({
  type: z.literal('namespace'),
  name: z.string(),
  tools: z.array(z.unknown()),
});

export const toolHeadSchema = z.looseObject({ type: z.string() });

export const toolChoiceSchema = z.union([
  z.enum(['auto', 'none', 'required']),
  z.looseObject({ type: z.string(), name: z.string().nullish() }),
]);
