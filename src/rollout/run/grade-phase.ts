/**
 * The grading part of one sample, after the agent's (agent-phase.ts): nothing here for a judge alone
 * (it grades when the sample is recorded, src/rollout/judge/finish.ts), a verifier command (a row's own wins),
 * or the SWE tests through the integrity layers (src/rollout/grade.ts); the test log, the hardened run's
 * record (its report, exit status and canaries, for --regrade) and a failed build's log go to `logs/`.
 */
import { existsSync } from 'node:fs';
import { eitherSignal } from '../../util/interrupt.ts';
import { writeAtomic } from '../../util/private-files.ts';
import { insideDir } from '../../util/safe-path.ts';
import type { AgentOutcome } from '../agents.ts';
import type { SweInstance } from '../dataset.ts';
import { datasetFolder } from '../dataset-repos.ts';
import { type GradeResult, gradePatch } from '../grade.ts';
import { finalMessage, runVerifier } from '../verifier.ts';
import type { EvalOptions } from './run.ts';

export interface GradePhase {
  grade: GradeResult | null;
  /** a verifier's reward */
  verified: number | null;
  /** a verifier that failed: an infrastructure error */
  failure: string | null;
}

interface Sample {
  instance: SweInstance;
  sample: number;
  patch: string;
  agent: AgentOutcome;
}

/** Grades one sample with a verifier command (src/rollout/verifier.ts); its output goes to `logPath`. */
async function verify(
  options: EvalOptions,
  command: string,
  { instance, sample, patch, agent }: Sample,
  logPath: string,
): Promise<{ reward: number } | { error: string }> {
  const capture = agent.capture && existsSync(agent.capture) ? agent.capture : null;
  // the row as given: its known fields (tests decoded) and the ones polar does not read
  const { extra, ...known } = instance;
  const row: Record<string, unknown> = { ...extra, ...known };
  const folder = instance.grader === undefined ? undefined : datasetFolder(options.dataset); // the row's own
  const v = await runVerifier(
    command,
    { row, sample, patch, capture, final_message: await finalMessage(capture) },
    { timeoutMs: options.testTimeoutMs, cwd: folder, ...eitherSignal(options.signal, options.cancel) },
  );
  if (v.output) await writeAtomic(logPath, v.output);
  return v;
}

export async function gradePhase(
  options: EvalOptions,
  s: Sample,
  out: { logs: string; key: string },
): Promise<GradePhase> {
  const none: GradePhase = { grade: null, verified: null, failure: null };
  // --grader judge: the judge alone grades, when the sample is recorded (src/rollout/judge/finish.ts)
  if (options.rewards?.primary === 'judge') return none;
  // a row's own grader wins (the dataset reader keeps only a command there)
  const verifier = s.instance.grader ?? options.verifier;
  if (verifier !== undefined) {
    const v = await verify(options, verifier, s, insideDir(out.logs, `${out.key}.verifier.log`));
    return 'error' in v ? { ...none, failure: v.error } : { ...none, verified: v.reward };
  }
  const grade = await gradePatch(options.runtime, s.instance, s.patch, {
    testTimeoutMs: options.testTimeoutMs,
    ...(options.gradeEmpty ? { gradeEmpty: true } : {}),
    ...(options.rejectTampering ? { rejectTampering: true } : {}),
    ...(options.hardened === false ? { hardened: false } : {}),
    ...eitherSignal(options.signal, options.cancel),
  });
  const log = (name: string, text: string) => writeAtomic(insideDir(out.logs, `${out.key}.${name}`), text);
  if (grade.log) await log('test.log', grade.log);
  if (grade.integrity) await log('integrity.json', `${JSON.stringify(grade.integrity)}\n`);
  if (grade.env_log) await log('env.log', grade.env_log);
  return { ...none, grade };
}
