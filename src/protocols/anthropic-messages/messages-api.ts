/**
 * Anthropic Messages API request shapes, as harnesses send them (Claude Code, Pi). Minimal and
 * permissive (z.looseObject keeps unknown fields: cache_control, metadata, context_management...).
 * Messages and content blocks are validated one by one (see convert-request.ts) so errors name the field.
 */
import { z } from 'zod';

const num = z.number().nullish();

export const textBlockSchema = z.looseObject({ type: z.string(), text: z.string() });

export const requestSchema = z.looseObject({
  model: z.string(),
  messages: z.array(z.unknown()),
  system: z.union([z.string(), z.array(textBlockSchema)]).nullish(),
  max_tokens: num,
  temperature: num,
  top_p: num,
  stop_sequences: z.array(z.string()).nullish(),
  tools: z.array(z.unknown()).nullish(),
  tool_choice: z
    .looseObject({
      type: z.enum(['auto', 'any', 'tool', 'none']),
      name: z.string().nullish(),
      disable_parallel_tool_use: z.boolean().nullish(),
    })
    .nullish(),
  thinking: z.looseObject({ type: z.enum(['enabled', 'adaptive', 'disabled']) }).nullish(),
  output_config: z.looseObject({ effort: z.string().nullish() }).nullish(),
  stream: z.boolean().nullish(),
});
export type MessagesRequest = z.output<typeof requestSchema>;

export const messageSchema = z.looseObject({
  role: z.enum(['user', 'assistant', 'system']),
  content: z.union([z.string(), z.array(z.looseObject({ type: z.string() }))]),
});

export const imageBlockSchema = z.looseObject({
  source: z.union([
    z.looseObject({ type: z.literal('base64'), media_type: z.string(), data: z.string() }),
    z.looseObject({ type: z.literal('url'), url: z.string() }),
  ]),
});

export const toolUseBlockSchema = z.looseObject({ id: z.string(), name: z.string(), input: z.unknown() });

export const toolResultBlockSchema = z.looseObject({
  tool_use_id: z.string(),
  content: z
    .union([z.string(), z.array(z.looseObject({ type: z.string(), text: z.string().nullish() }))])
    .nullish(),
  is_error: z.boolean().nullish(),
});

export const thinkingBlockSchema = z.looseObject({ thinking: z.string(), signature: z.string().nullish() });

export const toolSchema = z.looseObject({
  type: z.string().nullish(),
  name: z.string(),
  description: z.string().nullish(),
  input_schema: z.record(z.string(), z.unknown()).nullish(),
});
