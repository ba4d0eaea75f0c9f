/**
 * The judge flags of eval, loop and gym (--rubric, --judge-url, --judge-model, --judge-mode,
 * --judge-timeout, --reward) and the one function that turns them, with --grader and the backend flags,
 * into what a run grades with: the judge's settings (or none) and the reward expression, every name of
 * it checked against the graders the run has. docs/judge.md.
 */
import { existsSync, readFileSync } from 'node:fs';
import { UsageError } from '../../errors.ts';
import { backendUrls } from '../../options/backend.ts';
import { DEFAULTS } from '../../options/defaults.ts';
import { checkRewardNames, type RewardName, type RewardSpec, singleReward } from '../../options/reward.ts';
import type { Grader } from '../verifier.ts';
import type { JudgeConfig, JudgeMode } from './types.ts';

export interface JudgeFlags {
  /** --rubric FILE: what the judge grades against */
  rubric?: string;
  /** --judge-url: an OpenAI-compatible server (its /v1 base or its chat completions URL) */
  judgeUrl?: string;
  /** --judge-model: the model name sent to it (default: --model when the run's server judges) */
  judgeModel?: string;
  /** default DEFAULTS.judgeMode */
  judgeMode?: JudgeMode;
  /** milliseconds, one judge call (default DEFAULTS.judgeTimeoutMs) */
  judgeTimeout?: number;
  /** --reward EXPR (src/options/reward.ts) */
  reward?: RewardSpec;
}

/** What a run grades with: the judge (when it runs) and how the reward is made. */
export interface RewardSetup {
  judge: JudgeConfig | null;
  reward: RewardSpec;
  /** the reward term the run's --grader fills (swebench for polar's tests, verifier, judge) */
  primary: RewardName;
}

/** the reward term of a --grader */
function primaryOf(grader: Grader): RewardName | null {
  if (grader.kind === 'polar') return 'swebench';
  if (grader.kind === 'verifier') return 'verifier';
  if (grader.kind === 'judge') return 'judge';
  return null; // swebench: the official harness grades the whole run afterwards
}

const NAMES_HINT =
  "the run's graders are its --grader (polar: swebench, a command: verifier, judge: judge) and judge whenever --rubric is given";

/**
 * The judge and the reward of a run from its flags. The judge runs with `--grader judge` or when
 * --rubric is given; it needs --rubric, and a server: --judge-url, else the run's own --backend-url
 * and --model. `--judge-mode group` needs groups (`groups: false` for polar gym, which sees one
 * rollout per request).
 */
export function rewardSetup(
  f: JudgeFlags & { grader: Grader; backendUrl?: string | string[]; model?: string; apiKey?: string },
  context: { groups: boolean; command: string },
): RewardSetup {
  const primary = primaryOf(f.grader);
  const judged = f.grader.kind === 'judge' || f.rubric !== undefined;
  if (primary === null) {
    if (judged || f.reward)
      throw new UsageError(
        `--grader swebench grades the whole run after it with the official harness: it does not combine with ${f.reward ? '--reward' : '--rubric'}`,
        "use --grader polar (the same SWE-bench rules, per sample) with --reward 'swebench + 0.2*judge'",
      );
    return { judge: null, reward: singleReward('swebench'), primary: 'swebench' };
  }
  const available: RewardName[] = [primary];
  if (judged && primary !== 'judge') available.push('judge');
  const reward = f.reward ?? singleReward(primary);
  checkRewardNames(reward, available, NAMES_HINT);
  if (!judged) {
    for (const flag of ['judgeUrl', 'judgeModel'] as const)
      if (f[flag] !== undefined)
        throw new UsageError(
          `--${flag === 'judgeUrl' ? 'judge-url' : 'judge-model'} without a judge: the judge runs with --grader judge or --rubric FILE`,
          'give --rubric FILE (and --grader judge for the judge alone)',
        );
    return { judge: null, reward, primary };
  }
  if (f.rubric === undefined)
    throw new UsageError(
      '--grader judge needs --rubric FILE: what the judge grades against',
      'write the rubric in a text or markdown file',
    );
  if (!existsSync(f.rubric))
    throw new UsageError(`--rubric ${f.rubric}: no such file`, 'give the rubric file');
  const rubric = readFileSync(f.rubric, 'utf8');
  if (rubric.trim() === '') throw new UsageError(`--rubric ${f.rubric} is empty`, 'write the rubric in it');
  const mode = f.judgeMode ?? DEFAULTS.judgeMode.value;
  if (mode === 'group' && !context.groups)
    throw new UsageError(
      `--judge-mode group: polar ${context.command} sees one rollout per request, never a group together`,
      'use --judge-mode single here, or rank groups in polar eval / polar loop',
    );
  const url = f.judgeUrl ?? backendUrls(f)[0];
  if (url === undefined)
    throw new UsageError(
      'the judge needs a server: --judge-url, or the run served by --backend-url',
      'give --judge-url http://HOST:PORT/v1 (an OpenAI-compatible chat completions server)',
    );
  const model = f.judgeModel ?? (f.judgeUrl === undefined ? f.model : undefined);
  if (!model)
    throw new UsageError(
      '--judge-url needs --judge-model: the model name the judge server serves',
      'give --judge-model NAME',
    );
  const apiKey =
    process.env.POLAR_JUDGE_API_KEY ??
    (f.judgeUrl === undefined ? (f.apiKey ?? process.env.POLAR_BACKEND_API_KEY) : undefined);
  return {
    judge: {
      url,
      model,
      mode,
      rubric,
      rubricFile: f.rubric,
      timeoutMs: f.judgeTimeout ?? DEFAULTS.judgeTimeoutMs.value,
      ...(apiKey ? { apiKey } : {}),
    },
    reward,
    primary,
  };
}
