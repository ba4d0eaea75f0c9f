/** The judge's settings and its verdicts (docs/judge.md): plain types every judge module shares. */

/** single: each rollout judged alone; group: a task's samples judged together (RULER) */
export const JUDGE_MODES = ['single', 'group'] as const;
export type JudgeMode = (typeof JUDGE_MODES)[number];

/** Where and how the judge is asked (src/rollout/judge/setup.ts makes it from the flags). */
export interface JudgeConfig {
  /** an OpenAI-compatible server: its /v1 base, or its chat completions URL */
  url: string;
  model: string;
  mode: JudgeMode;
  /** the rubric's text */
  rubric: string;
  /** the file it came from (shown in records) */
  rubricFile: string;
  /** one call's time limit, ms */
  timeoutMs: number;
  apiKey?: string;
}

/** One rollout as the judge sees it. */
export interface JudgeSample {
  /** the sample's key in the run (<instance>__s<j>) */
  key: string;
  /** the task's statement (the first user message of the rollout, else the row's problem statement) */
  task: string;
  /** the rollout's final messages and tool calls, as text (src/rollout/judge/transcript.ts) */
  transcript: string;
  /** the agent's patch ('' when none) */
  patch: string;
}

/** The judge's verdict on one sample. */
export interface JudgeScore {
  key: string;
  /** in [0, 1] */
  score: number;
  reason: string;
}

/** A judge that could not give a verdict (down, timed out, answered what cannot be read twice). */
export class JudgeFailure extends Error {
  override name = 'JudgeFailure';
}
