/**
 * --reward: how a sample's reward is made of its graders' scores, parsed once here. The grammar
 * (docs/judge.md, "Combined rewards"):
 *
 *   reward := term ('+' term)*
 *   term   := [number '*'] name
 *   number := digits ['.' digits] | '.' digits        (a weight >= 0; 1 when not given)
 *   name   := swebench | verifier | judge
 *
 * Spaces are free between tokens; each name appears at most once. `swebench` is the SWE-bench tests'
 * result (1 resolved, else 0, graded per sample by polar's grader), `verifier` a --grader command's
 * reward, `judge` the judge's score. A name must be a grader of the run (checkRewardNames). Bad input
 * is a UsageError whose message points at the column of the bad token.
 */
import { UsageError } from '../errors.ts';

export const REWARD_NAMES = ['swebench', 'verifier', 'judge'] as const;
export type RewardName = (typeof REWARD_NAMES)[number];

export interface RewardTerm {
  name: RewardName;
  weight: number;
  /** 1-based column of the name in the expression (for errors that come later) */
  column: number;
}

export interface RewardSpec {
  /** the expression as given */
  text: string;
  terms: RewardTerm[];
}

interface Token {
  kind: 'number' | 'name' | '+' | '*' | 'end' | 'bad';
  text: string;
  /** 0-based offset */
  at: number;
}

function tokens(text: string): Token[] {
  const out: Token[] = [];
  const re = /\s*(?:(\d+(?:\.\d+)?|\.\d+)|([A-Za-z_][\w-]*)|(\+)|(\*)|(\S))/y;
  re.lastIndex = 0;
  while (re.lastIndex < text.length) {
    const m = re.exec(text);
    if (m === null) break;
    const at = m.index + m[0].length - m[0].trimStart().length;
    if (m[1] !== undefined) out.push({ kind: 'number', text: m[1], at });
    else if (m[2] !== undefined) out.push({ kind: 'name', text: m[2], at });
    else if (m[3] !== undefined) out.push({ kind: '+', text: '+', at });
    else if (m[4] !== undefined) out.push({ kind: '*', text: '*', at });
    else if (m[5] !== undefined) out.push({ kind: 'bad', text: m[5], at });
    else break; // only trailing spaces were left
  }
  out.push({ kind: 'end', text: '', at: text.trimEnd().length });
  return out;
}

const GRAMMAR_HINT =
  "a sum of optionally weighted grader names, e.g. 'swebench + 0.2*judge' (names: swebench, verifier, judge; docs/judge.md)";

/** A UsageError naming the column of a bad token, with the expression and a caret under it. */
export function rewardError(text: string, at: number, problem: string, hint = GRAMMAR_HINT): UsageError {
  return new UsageError(
    `--reward '${text}': column ${at + 1}: ${problem}\n  ${text}\n  ${' '.repeat(at)}^`,
    hint,
  );
}

const shownToken = (t: Token) => (t.kind === 'end' ? 'the end' : `'${t.text}'`);

/** Parses a --reward expression (commander argParser: a UsageError passes through as a PolarError). */
export function parseReward(text: string): RewardSpec {
  const list = tokens(text);
  const terms: RewardTerm[] = [];
  let i = 0;
  const expectName = (): Token => {
    const t = list[i]!;
    if (t.kind !== 'name')
      throw rewardError(
        text,
        t.at,
        `expected a grader name (${REWARD_NAMES.join(', ')}), found ${shownToken(t)}`,
      );
    if (!(REWARD_NAMES as readonly string[]).includes(t.text))
      throw rewardError(text, t.at, `'${t.text}' is not a grader: use ${REWARD_NAMES.join(', ')}`);
    i++;
    return t;
  };
  for (;;) {
    let weight = 1;
    const first = list[i]!;
    if (first.kind === 'number') {
      weight = Number(first.text);
      i++;
      const star = list[i]!;
      if (star.kind !== '*')
        throw rewardError(text, star.at, `expected '*' after the weight, found ${shownToken(star)}`);
      i++;
    }
    const name = expectName();
    if (terms.some((t) => t.name === name.text))
      throw rewardError(text, name.at, `'${name.text}' appears twice: give each grader one weight`);
    terms.push({ name: name.text as RewardName, weight, column: name.at + 1 });
    const next = list[i]!;
    if (next.kind === 'end') break;
    if (next.kind !== '+')
      throw rewardError(text, next.at, `expected '+' or the end, found ${shownToken(next)}`);
    i++;
  }
  return { text, terms };
}

/** The reward of a run without --reward: its one grader, weight 1. */
export function singleReward(name: RewardName): RewardSpec {
  return { text: name, terms: [{ name, weight: 1, column: 1 }] };
}

/** Every name of the expression must be a grader of the run; else a UsageError at that name's column. */
export function checkRewardNames(spec: RewardSpec, available: readonly RewardName[], hint: string): void {
  for (const term of spec.terms) {
    if (!available.includes(term.name))
      throw rewardError(
        spec.text,
        term.column - 1,
        `'${term.name}' is not a grader of this run (it has: ${available.join(', ')})`,
        hint,
      );
  }
}

/** The total of a sample's components under the expression (every named component must be there). */
export function combineReward(spec: RewardSpec, components: Partial<Record<RewardName, number>>): number {
  let total = 0;
  for (const term of spec.terms) {
    const value = components[term.name];
    if (value === undefined) throw new Error(`reward component ${term.name} missing`);
    total += term.weight * value;
  }
  return total;
}
