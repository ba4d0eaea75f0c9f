/** Permissive schemas of the OpenAI Chat Completions wire format (unknown fields kept). */
import { z } from 'zod';

const textPart = z.looseObject({ type: z.literal('text'), text: z.string() });
const imagePart = z.looseObject({
  type: z.literal('image_url'),
  image_url: z.union([z.string(), z.looseObject({ url: z.string() })]),
});
const otherPart = z.looseObject({ type: z.string() });
export const contentSchema = z
  .union([z.string(), z.array(z.union([textPart, imagePart, otherPart]))])
  .nullish();

export const toolCallSchema = z.looseObject({
  id: z.string(),
  type: z.string().optional(),
  function: z.looseObject({ name: z.string(), arguments: z.string().nullish() }),
});

export const messageSchema = z.looseObject({
  role: z.enum(['system', 'developer', 'user', 'assistant', 'tool', 'function']),
  content: contentSchema,
  name: z.string().nullish(),
  tool_calls: z.array(toolCallSchema).nullish(),
  tool_call_id: z.string().nullish(),
  reasoning_content: z.string().nullish(),
  reasoning: z.string().nullish(),
});

export const toolSchema = z.looseObject({
  type: z.string(),
  function: z
    .looseObject({
      name: z.string(),
      description: z.string().nullish(),
      parameters: z.record(z.string(), z.unknown()).nullish(),
    })
    .optional(),
});

export const requestSchema = z.looseObject({
  model: z.string(),
  messages: z.array(messageSchema),
  tools: z.array(toolSchema).nullish(),
  tool_choice: z
    .union([
      z.enum(['auto', 'none', 'required']),
      z.looseObject({ function: z.looseObject({ name: z.string() }) }),
    ])
    .nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  max_tokens: z.number().int().positive().nullish(),
  max_completion_tokens: z.number().int().positive().nullish(),
  temperature: z.number().nullish(),
  top_p: z.number().nullish(),
  stop: z.union([z.string(), z.array(z.string())]).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
  reasoning_effort: z.string().nullish(),
});
export type ChatRequest = z.infer<typeof requestSchema>;

/** One streamed chunk as vLLM / SGLang / OpenAI send it (token-id fields are vLLM's extension). */
export const chunkSchema = z.looseObject({
  id: z.string().nullish(),
  model: z.string().nullish(),
  prompt_token_ids: z.array(z.number().int()).nullish(),
  choices: z
    .array(
      z.looseObject({
        index: z.number().int().nullish(),
        delta: z
          .looseObject({
            role: z.string().nullish(),
            content: z.string().nullish(),
            reasoning_content: z.string().nullish(),
            reasoning: z.string().nullish(),
            tool_calls: z
              .array(
                z.looseObject({
                  index: z.number().int().nullish(),
                  id: z.string().nullish(),
                  function: z
                    .looseObject({ name: z.string().nullish(), arguments: z.string().nullish() })
                    .nullish(),
                }),
              )
              .nullish(),
          })
          .nullish(),
        finish_reason: z.string().nullish(),
        token_ids: z.array(z.number().int()).nullish(),
        logprobs: z
          .looseObject({
            content: z.array(z.looseObject({ token: z.string().nullish(), logprob: z.number() })).nullish(),
          })
          .nullish(),
      }),
    )
    .nullish(),
  usage: z.looseObject({ prompt_tokens: z.number(), completion_tokens: z.number() }).nullish(),
});
export type ChatChunk = z.infer<typeof chunkSchema>;

/** A whole non-streaming chat completion (used for SGLang, whose token ids come only without streaming). */
export const completionSchema = z.looseObject({
  id: z.string().nullish(),
  model: z.string().nullish(),
  prompt_token_ids: z.array(z.number().int()).nullish(),
  choices: z.array(
    z.looseObject({
      message: z.looseObject({
        content: z.string().nullish(),
        reasoning_content: z.string().nullish(),
        reasoning: z.string().nullish(),
        tool_calls: z.array(toolCallSchema).nullish(),
      }),
      finish_reason: z.string().nullish(),
      token_ids: z.array(z.number().int()).nullish(),
      prompt_token_ids: z.array(z.number().int()).nullish(),
      logprobs: z
        .looseObject({ content: z.array(z.looseObject({ logprob: z.number() })).nullish() })
        .nullish(),
      meta_info: z
        .looseObject({
          output_token_logprobs: z.array(z.tuple([z.number(), z.number().int()]).rest(z.unknown())).nullish(),
        })
        .nullish(),
    }),
  ),
  meta_info: z
    .looseObject({
      output_token_logprobs: z.array(z.tuple([z.number(), z.number().int()]).rest(z.unknown())).nullish(),
    })
    .nullish(),
  usage: z.looseObject({ prompt_tokens: z.number(), completion_tokens: z.number() }).nullish(),
});
export type ChatCompletion = z.infer<typeof completionSchema>;
