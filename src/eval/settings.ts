/**
 * The settings of `polar eval` that change its results, by the flag that sets each: recorded in run.json
 * and checked on --resume by the run folder (src/rollout/run/settings.ts). docs/eval.md, "One run per
 * --out".
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { RunSettings } from '../rollout/run/settings.ts';
import type { EvalFlags } from './flags.ts';

const digest = (file: string): string =>
  existsSync(file) ? createHash('sha256').update(readFileSync(file)).digest('hex').slice(0, 16) : file;

/** The resolved options of `polar eval` that decide its results, by the flag that sets each. */
export function runSettings(f: EvalFlags): RunSettings {
  return {
    '--dataset': existsSync(f.dataset) ? resolve(f.dataset) : f.dataset,
    '--split': f.split,
    '--agent': f.agent ?? f.harness,
    '--agent-cmd': f.agentCmd,
    '--predictions': f.predictions ? digest(f.predictions) : undefined,
    '--prompt-template': f.promptTemplate ? digest(f.promptTemplate) : undefined,
    '--pi-api': f.piApi,
    '--backend': f.backend ?? (f.backendUrl ? 'vllm' : undefined),
    '--model': f.model,
    '--tokenizer': f.tokenizer,
    '--chat-template-kwargs': f.chatTemplateKwargs,
    '--temperature': f.temperature,
    '--top-p': f.topP,
    '--max-tokens': f.maxTokens,
    '--max-tokens-cap': f.maxTokensCap,
    '--seed': f.seed,
    '--no-require-token-ids': f.requireTokenIds === false ? true : undefined,
    '--runtime': f.runtime,
    '--image': f.image,
    // seconds, as the flags take them
    '--agent-timeout': f.agentTimeout / 1000,
    '--test-timeout': f.testTimeout / 1000,
    '--grader': f.grader,
    '--grade-empty-patches': f.gradeEmptyPatches ? true : undefined,
    // a flagged sample graded 0 or kept (docs/eval.md, "Grading integrity"): one run grades one way
    '--reject-test-tampering': f.rejectTestTampering ? true : undefined,
    // the judge's verdicts and the reward they make (docs/judge.md)
    '--rubric': f.rubric ? digest(f.rubric) : undefined,
    '--judge-model': f.judgeModel,
    '--judge-mode': f.rubric || f.grader.kind === 'judge' ? (f.judgeMode ?? 'single') : undefined,
    '--reward': f.reward?.text,
  };
}
