/**
 * "Did you mean ...?" for a mistyped word: the closest candidates by edit distance, with the limits
 * commander uses for unknown options and commands (at most 3 edits, and more than 40% of the longer word
 * kept), so a wrong value (`--agent gld`) gets the same kind of suggestion as a wrong flag. The
 * suggestion travels as commander's does, a last line `(Did you mean X?)`, which `reportError`
 * (src/cli.ts) turns into the hint line of polar's error format.
 */

const MAX_EDITS = 3;
const MIN_SIMILARITY = 0.4;

/** Optimal string alignment distance: insertions, deletions, substitutions and adjacent swaps. */
export function editDistance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > MAX_EDITS) return Math.max(a.length, b.length);
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i]);
  for (let j = 0; j <= b.length; j++) (d[0] as number[])[j] = j;
  for (let i = 1; i <= a.length; i++) {
    const row = d[i] as number[];
    const up = d[i - 1] as number[];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min((up[j] as number) + 1, (row[j - 1] as number) + 1, (up[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        best = Math.min(best, ((d[i - 2] as number[])[j - 2] as number) + 1);
      row[j] = best;
    }
  }
  return (d[a.length] as number[])[b.length] as number;
}

/** The candidates nearest to `word` (ties all kept, sorted), or none when nothing is near enough. */
export function closest(word: string, candidates: readonly string[]): string[] {
  let best = MAX_EDITS;
  let near: string[] = [];
  for (const candidate of new Set(candidates)) {
    if (candidate.length <= 1) continue;
    const distance = editDistance(word, candidate);
    const longer = Math.max(word.length, candidate.length);
    if ((longer - distance) / longer <= MIN_SIMILARITY) continue;
    if (distance < best) {
      best = distance;
      near = [candidate];
    } else if (distance === best) near.push(candidate);
  }
  return near.sort((a, b) => a.localeCompare(b));
}

/** `\n(Did you mean gold?)` for `gld` among the candidates, or '' (commander's own wording). */
export function didYouMean(word: string, candidates: readonly string[]): string {
  const near = closest(word, candidates);
  if (near.length === 0) return '';
  return near.length === 1 ? `\n(Did you mean ${near[0]}?)` : `\n(Did you mean one of ${near.join(', ')}?)`;
}

/** Splits a message that ends with a "(Did you mean ...?)" line into the message and the question. */
export function splitSuggestion(message: string): { message: string; suggestion: string | null } {
  const m = /\n\(Did you mean ([^\n]*)\?\)\s*$/.exec(message);
  if (!m) return { message, suggestion: null };
  return { message: message.slice(0, m.index), suggestion: `did you mean ${m[1]}?` };
}
