/**
 * Next-token sampling for the embedded engine: temperature, top-k, top-p (nucleus), seeded RNG, greedy
 * at temperature 0. Returns the chosen id and its logprob under the distribution it was drawn from
 * (after temperature and truncation, renormalised); for greedy, the logprob under the model's plain
 * distribution (temperature 1, no truncation), which is what vLLM reports for greedy decoding.
 */

export interface SamplingParams {
  temperature: number;
  topP: number;
  topK?: number;
}

export { seededRandom } from '../../util/random.ts';

function logSumExp(values: Float32Array | number[], scale: number, max: number): number {
  let sum = 0;
  for (let i = 0; i < values.length; i++) sum += Math.exp((values[i]! - max) * scale);
  return max * scale + Math.log(sum);
}

/** indices of the k largest values, largest first (a size-k min-heap: O(V log k)) */
export function topIndices(values: Float32Array, k: number): number[] {
  const n = Math.min(k, values.length);
  const heap: number[] = [];
  const less = (a: number, b: number) => values[a]! < values[b]! || (values[a] === values[b] && a > b);
  const down = (i: number) => {
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < heap.length && less(heap[l]!, heap[m]!)) m = l;
      if (r < heap.length && less(heap[r]!, heap[m]!)) m = r;
      if (m === i) return;
      [heap[i], heap[m]] = [heap[m]!, heap[i]!];
      i = m;
    }
  };
  const up = (i: number) => {
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!less(heap[i]!, heap[p]!)) return;
      [heap[i], heap[p]] = [heap[p]!, heap[i]!];
      i = p;
    }
  };
  for (let i = 0; i < values.length; i++) {
    if (heap.length < n) {
      heap.push(i);
      up(heap.length - 1);
    } else if (less(heap[0]!, i)) {
      heap[0] = i;
      down(0);
    }
  }
  return heap.sort((a, b) => values[b]! - values[a]! || a - b);
}

export function sampleToken(
  logits: Float32Array,
  params: SamplingParams,
  random: () => number,
): { id: number; logprob: number } {
  let max = Number.NEGATIVE_INFINITY;
  let argmax = 0;
  for (let i = 0; i < logits.length; i++) {
    if (logits[i]! > max) {
      max = logits[i]!;
      argmax = i;
    }
  }
  if (!(params.temperature > 0)) {
    return { id: argmax, logprob: logits[argmax]! - logSumExp(logits, 1, max) };
  }
  const scale = 1 / params.temperature;
  const topK = params.topK && params.topK > 0 ? params.topK : 0;
  const topP = params.topP > 0 && params.topP < 1 ? params.topP : 1;
  if (!topK && topP === 1) {
    // full distribution: one pass for the normaliser, one to draw
    const lse = logSumExp(logits, scale, max);
    let u = random();
    for (let i = 0; i < logits.length; i++) {
      const p = Math.exp(logits[i]! * scale - lse);
      u -= p;
      if (u <= 0) return { id: i, logprob: logits[i]! * scale - lse };
    }
    return { id: argmax, logprob: max * scale - lse };
  }
  // truncated: grow a candidate set until it covers top-p of the mass (or reaches top-k)
  const lse = logSumExp(logits, scale, max);
  let k = topK || 1024;
  let candidates: number[] = [];
  for (;;) {
    candidates = topIndices(logits, k);
    let mass = 0;
    let cut = candidates.length;
    for (let j = 0; j < candidates.length; j++) {
      mass += Math.exp(logits[candidates[j]!]! * scale - lse);
      if (mass >= topP) {
        cut = j + 1;
        break;
      }
    }
    if (cut < candidates.length || topK || candidates.length === logits.length) {
      candidates = candidates.slice(0, cut);
      break;
    }
    k *= 8;
  }
  const weights = candidates.map((i) => Math.exp(logits[i]! * scale - lse));
  const total = weights.reduce((a, b) => a + b, 0);
  let u = random() * total;
  let pick = candidates.length - 1;
  for (let j = 0; j < candidates.length; j++) {
    u -= weights[j]!;
    if (u <= 0) {
      pick = j;
      break;
    }
  }
  const id = candidates[pick]!;
  return { id, logprob: logits[id]! * scale - lse - Math.log(total) };
}
