/**
 * What NeMo RL's Gym path does with a /run answer, in TypeScript: `_postprocess_nemo_gym_to_nemo_rl_result`
 * in nemo_rl/environments/nemo_gym.py (github.com/NVIDIA-NeMo/RL, read for reference, not copied).
 * For every output item with a non-empty generation_token_ids, in order: its prompt_token_ids must start
 * with every id seen so far (else "Non-contiguous messages found!"); the new part of the prompt becomes a
 * user message, the generation an assistant message with its logprobs; both extend the ids seen. A
 * result with no trainable item is an error ("NeMo Gym returned a result with no generation data").
 */
export interface NemoRlMessage {
  role: 'user' | 'assistant';
  token_ids: number[];
  generation_logprobs?: number[];
}

export class NonContiguousMessages extends Error {}

export function nemoRlPostprocess(result: {
  response: { output: Record<string, unknown>[] };
  reward: number;
}): { message_log: NemoRlMessage[]; reward: number; sequence: number[] } {
  const seen: number[] = [];
  const log: NemoRlMessage[] = [];
  for (const [index, item] of result.response.output.entries()) {
    const generation = item.generation_token_ids as number[] | undefined;
    if (!Array.isArray(generation) || generation.length === 0) continue;
    const prompt = item.prompt_token_ids as number[];
    const logprobs = item.generation_log_probs as number[];
    const head = prompt.slice(0, seen.length);
    if (head.length !== seen.length || head.some((id, i) => id !== seen[i])) {
      throw new NonContiguousMessages(
        `Non-contiguous messages found at output item ${index}: ${seen.length} ids seen, prompt of ${prompt.length}`,
      );
    }
    if (logprobs.length !== generation.length) throw new Error(`item ${index}: logprobs/ids length differ`);
    const fresh = prompt.slice(seen.length);
    log.push({ role: 'user', token_ids: fresh });
    log.push({ role: 'assistant', token_ids: generation, generation_logprobs: logprobs });
    seen.push(...fresh, ...generation);
  }
  if (log.length === 0) throw new Error('NeMo Gym returned a result with no generation data');
  return { message_log: log, reward: Number(result.reward), sequence: seen };
}
