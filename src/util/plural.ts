/** `1 sample`, `2 samples`, `0 samples`: a count with its noun in the right number. */
export function plural(n: number, word: string, many = `${word}s`): string {
  return `${n.toLocaleString('en-US')} ${n === 1 ? word : many}`;
}
