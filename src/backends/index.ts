import { UsageError } from '../errors.ts';
import { OpenAICompatibleBackend } from './openai-compatible.ts';
import type { Backend, BackendOptions } from './types.ts';

export const BACKEND_KINDS = ['vllm', 'sglang', 'openai', 'tokens', 'embedded'] as const;

/** Creates the backend a run asked for. tokens and embedded load lazily (they pull in Transformers.js). */
export async function createBackend(options: BackendOptions): Promise<Backend> {
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
