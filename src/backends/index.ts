import { UsageError } from '../errors.ts';
import { OpenAICompatibleBackend } from './openai-compatible.ts';
import type { Backend, BackendOptions } from './types.ts';

export { BACKEND_KINDS } from './kinds.ts';

/** Creates the backend a run asked for. tokens and embedded load lazily (they pull in Transformers.js). */
export async function createBackend(options: BackendOptions): Promise<Backend> {
  const backend = await createUncapped(options);
  return options.maxTokensCap ? capCompletionTokens(backend, options.maxTokensCap) : backend;
}

async function createUncapped(options: BackendOptions): Promise<Backend> {
  switch (options.kind) {
    case 'vllm':
    case 'sglang':
    case 'openai':
      if (!options.url) {
        throw new UsageError(
          `--backend ${options.kind} needs --backend-url`,
          'for example --backend-url http://127.0.0.1:8000/v1',
        );
      }
      return new OpenAICompatibleBackend(options.kind, options);
    case 'nemo-rl': {
      if (!options.url) {
        throw new UsageError(
          '--backend nemo-rl needs --backend-url',
          "NeMo RL's generation server, e.g. http://10.0.0.5:41231/v1 (the policy_base_url NeMo RL hands to Gym)",
        );
      }
      const { NemoRlBackend } = await import('./nemo-rl.ts');
      return new NemoRlBackend(options);
    }
    case 'tokens': {
      const { createTokensBackend } = await import('./tokens.ts');
      return createTokensBackend(options);
    }
    case 'embedded': {
      const { createEmbeddedBackend } = await import('./embedded/index.ts');
      return createEmbeddedBackend(options);
    }
  }
}

/**
 * Caps every call's completion length (min of the harness's max tokens and the cap): harnesses ask for
 * thousands of tokens, which a CPU model or a quick CI loop cannot afford. Each capped call says so.
 */
export function capCompletionTokens(backend: Backend, cap: number): Backend {
  const capped: Backend = {
    kind: backend.kind,
    tokenExact: backend.tokenExact,
    url: backend.url,
    generate(request, context) {
      const asked = request.maxTokens;
      if (asked === undefined || asked > cap) {
        context.recorder.warn(`max tokens capped at ${cap} (the harness asked for ${asked ?? 'no limit'})`);
        return backend.generate({ ...request, maxTokens: cap }, context);
      }
      return backend.generate(request, context);
    },
    countTokens: (request, context) => backend.countTokens(request, context),
    close: () => backend.close(),
  };
  if (backend.reload) capped.reload = (dir) => backend.reload!(dir);
  return capped;
}
