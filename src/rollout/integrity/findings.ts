/**
 * What the integrity layers report about a sample: findings, each with the layer that made it and its
 * evidence (file and line, tests, the runner's exit code), and whether they prove that the graded run
 * was tampered with. A proof (a canary reported wrongly, a forced exit status, forged output) grades the
 * sample 0 in every mode; a flag (a patch that reaches into the runner, declares a pytest plugin, changes
 * the test surface, passes an expected test as XFAIL) is counted and shown, and graded 0 where tampering
 * is rejected (polar loop and polar gym by default, polar eval --reject-test-tampering). docs/eval.md,
 * "Grading integrity".
 */
import type { Tampering } from '../tampering.ts';

export const FINDING_LAYERS = [
  'test-surface',
  'runner-access',
  'entry-points',
  'canary',
  'report',
  'exit-code',
  'expected-failure',
] as const;
export type FindingLayer = (typeof FINDING_LAYERS)[number];

export interface Finding {
  layer: FindingLayer;
  reason: string;
  file?: string;
  line?: number;
  /** the tests it concerns (canaries, FAIL_TO_PASS / PASS_TO_PASS ids) */
  tests?: string[];
  /** proof that the graded run was tampered with (graded 0 in every mode) */
  proof?: boolean;
}

/** A finding's one-line form: `file:line: reason` (or the tests it names). */
export function describeFinding(f: Finding): string {
  const where = f.file ? `${f.file}${f.line ? `:${f.line}` : ''}: ` : '';
  const tests = f.tests?.length
    ? ` (${f.tests.slice(0, 3).join(', ')}${f.tests.length > 3 ? ', ...' : ''})`
    : '';
  return `${where}${f.reason}${tests}`;
}

/**
 * The sample's tampering record from its findings: null when there are none; `proven` when one proves
 * tampering; `rejected` when the sample is graded 0 for it (a proof, or any finding under
 * --reject-test-tampering). `files`: the files the findings name; `reason`: their reasons, once each.
 */
export function tamperingRecord(all: Finding[], rejectTampering: boolean): Tampering | null {
  if (all.length === 0) return null;
  const files = [...new Set(all.map((f) => f.file).filter((f): f is string => f !== undefined))];
  const reasons = [...new Set(all.map((f) => f.reason))];
  const proven = all.some((f) => f.proof);
  return {
    files,
    reason: reasons.join('; '),
    rejected: proven || rejectTampering,
    proven,
    findings: all,
  };
}
