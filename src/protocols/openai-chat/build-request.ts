/** Canonical request -> Chat Completions body for an inference server (vLLM, SGLang, any OpenAI-compatible). */
import type { CanonicalMessage, CanonicalRequest } from '../canonical.ts';

function chatMessage(m: CanonicalMessage): Record<string, unknown> {
  switch (m.role) {
    case 'system':
      return { role: 'system', content: m.content };
    case 'user': {
      const onlyText = m.content.every((p) => p.type === 'text');
      if (onlyText)
        return { role: 'user', content: m.content.map((p) => (p.type === 'text' ? p.text : '')).join('') };
      return {
        role: 'user',
        content: m.content.map((p) =>
          p.type === 'text'
            ? { type: 'text', text: p.text }
            : { type: 'image_url', image_url: { url: p.url } },
        ),
      };
    }
    case 'assistant':
      return {
        role: 'assistant',
        content: m.content,
        // vLLM hands extra message fields to the chat template; Qwen3's template reads reasoning_content
        ...(m.reasoning ? { reasoning_content: m.reasoning } : {}),
        ...(m.toolCalls.length
          ? {
              tool_calls: m.toolCalls.map((c) => ({
                id: c.id,
                type: 'function',
                function: { name: c.name, arguments: c.arguments },
              })),
            }
          : {}),
      };
    case 'tool':
      return { role: 'tool', tool_call_id: m.toolCallId, content: m.content };
  }
}

export interface BuildOptions {
  stream: boolean;
  /** server-specific fields merged into the body (token-id flags) */
  extra?: Record<string, unknown>;
  defaults?: { temperature?: number; topP?: number; maxTokens?: number };
}

export function buildRequest(req: CanonicalRequest, options: BuildOptions): Record<string, unknown> {
  const body: Record<string, unknown> = {
    model: req.model,
    messages: req.messages.map(chatMessage),
    stream: options.stream,
  };
  if (options.stream) body.stream_options = { include_usage: true };
  if (req.tools.length) {
    body.tools = req.tools.map((t) => ({
      type: 'function',
      function: { name: t.name, description: t.description, parameters: t.parameters },
    }));
    if (req.toolChoice) {
      body.tool_choice =
        typeof req.toolChoice === 'string'
          ? req.toolChoice
          : { type: 'function', function: { name: req.toolChoice.name } };
    }
    if (req.parallelToolCalls !== undefined) body.parallel_tool_calls = req.parallelToolCalls;
  }
  const maxTokens = req.maxTokens ?? options.defaults?.maxTokens;
  if (maxTokens) body.max_tokens = maxTokens;
  const temperature = req.temperature ?? options.defaults?.temperature;
  if (temperature !== undefined) body.temperature = temperature;
  const topP = req.topP ?? options.defaults?.topP;
  if (topP !== undefined) body.top_p = topP;
  if (req.stop?.length) body.stop = req.stop;
  return { ...body, ...options.extra };
}
