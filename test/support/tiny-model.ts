/** Re-scoring sampled ids with a model directory (the tiny test model), independent of polar's engine. */
import { AutoModelForCausalLM, env, Tensor } from '@huggingface/transformers';

/**
 * Logprob of each completion id under the model at `temperature` (no truncation), by a cache-free
 * forward pass over each prefix: what the embedded engine must have recorded when it sampled them
 * with top-p 1 and no top-k.
 */
export async function rescore(
  dir: string,
  prompt: number[],
  completion: number[],
  temperature = 1,
): Promise<number[]> {
  env.allowRemoteModels = false;
  const model = await AutoModelForCausalLM.from_pretrained(dir, { local_files_only: true, dtype: 'fp32' });
  const out: number[] = [];
  try {
    for (let i = 0; i < completion.length; i++) {
      const seq = [...prompt, ...completion.slice(0, i)];
      const input_ids = new Tensor('int64', BigInt64Array.from(seq, BigInt), [1, seq.length]);
      const attention_mask = new Tensor('int64', new BigInt64Array(seq.length).fill(1n), [1, seq.length]);
      const { logits } = (await model({ input_ids, attention_mask })) as { logits: Tensor };
      // [1, S, V] (every position) or [1, 1, V] (last only): take the last position's row
      const vocab = logits.dims.at(-1)!;
      const all = logits.data as Float32Array;
      const row = all.subarray(all.length - vocab);
      let max = Number.NEGATIVE_INFINITY;
      for (const v of row) if (v / temperature > max) max = v / temperature;
      let sum = 0;
      for (const v of row) sum += Math.exp(v / temperature - max);
      out.push(row[completion[i]!]! / temperature - max - Math.log(sum));
    }
  } finally {
    await model.dispose();
  }
  return out;
}
