/**
 * What an inference server says about itself, read once per backend: the models it serves and their
 * context length (vLLM `GET /v1/models` lists `max_model_len` per model card:
 * vllm/entrypoints/openai/models/protocol.py ModelCard), and, for vLLM and NeMo RL, the prompt length
 * of a chat request (`POST /tokenize` with `messages`, `tools`, `add_generation_prompt`: `{count,
 * max_model_len, tokens}`, vllm/entrypoints/serve/tokenize/).
 */
import { trimSlash } from '../http/client.ts';
import { errorDetail, getJson, postJson } from './http.ts';

export interface ServedModel {
  id: string;
  maxModelLen: number | null;
}

/** `/v1/models` of a server whose URL may or may not end in /v1. */
export async function listModels(
  baseUrl: string,
  options: { headers?: Record<string, string>; timeoutMs?: number; signal?: AbortSignal },
): Promise<{ ok: true; models: ServedModel[] } | { ok: false; message: string; status?: number }> {
  const url = `${rootUrl(baseUrl)}/v1/models`;
  const got = await getJson(url, {
    timeoutMs: options.timeoutMs ?? 10_000,
    ...(options.headers ? { headers: options.headers } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  });
  if (!got.ok)
    return { ok: false, message: got.fault.message, ...(got.status ? { status: got.status } : {}) };
  const data = (got.json as { data?: unknown })?.data;
  if (!Array.isArray(data)) {
    return {
      ok: false,
      message: `${url} answered ${errorDetail(JSON.stringify(got.json))}, not an OpenAI model list ({"data": [...]})`,
    };
  }
  const models: ServedModel[] = [];
  for (const entry of data) {
    const card = entry as { id?: unknown; max_model_len?: unknown; context_length?: unknown };
    if (typeof card.id !== 'string') continue;
    const len = card.max_model_len ?? card.context_length;
    models.push({ id: card.id, maxModelLen: typeof len === 'number' && len > 0 ? len : null });
  }
  return { ok: true, models };
}

/**
 * The server's root, where vLLM serves /tokenize and SGLang /generate: the URL without a trailing
 * /v1, /v1/completions, /v1/chat/completions or /generate (a Backend's `url` may be any of them).
 */
export function rootUrl(url: string): string {
  return trimSlash(url)
    .replace(/\/(v1\/completions|v1\/chat\/completions|generate)$/, '')
    .replace(/\/v1$/, '');
}

/**
 * The context length of `model` on the server, looked up once and kept (null when the server does not
 * say, or cannot be asked: callers then rely on the server's own 400).
 */
export class ContextLength {
  private value: Promise<number | null> | null = null;

  constructor(
    private readonly baseUrl: string,
    private readonly model: string,
    private readonly headers: Record<string, string>,
  ) {}

  get(): Promise<number | null> {
    this.value ??= listModels(this.baseUrl, { headers: this.headers }).then((listed) => {
      if (!listed.ok) {
        // unreachable: ask again next call (the server may still be starting); an HTTP answer is final
        if (listed.status === undefined) this.value = null;
        return null;
      }
      const card = listed.models.find((m) => m.id === this.model) ?? listed.models[0];
      return card?.maxModelLen ?? null;
    });
    return this.value;
  }
}

/** Prompt tokens of a chat request as the server renders it (vLLM / NeMo RL `POST /tokenize`). */
export async function tokenizeChat(
  baseUrl: string,
  body: { model: string; messages: unknown; tools?: unknown; chat_template_kwargs?: unknown },
  options: { headers: Record<string, string>; signal: AbortSignal },
): Promise<number | null> {
  const outcome = await postJson(
    `${rootUrl(baseUrl)}/tokenize`,
    { ...body, add_generation_prompt: true },
    { signal: options.signal, timeoutMs: 30_000, headers: options.headers },
  );
  if (!outcome.ok) return null;
  const json = (await outcome.response.json().catch(() => null)) as { count?: unknown } | null;
  return typeof json?.count === 'number' ? json.count : null;
}
