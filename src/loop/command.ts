/** The body of `polar loop`: typed flags in, runLoop, exit code out. */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { HarnessName } from '../harnesses/types.ts';
import { type BackendFlags, backendOptions } from '../options/backend.ts';
import { type RolloutFlags, runtimeSetup } from '../options/rollout.ts';
import { type Grader, rolloutVerifier } from '../rollout/verifier.ts';
import { flagsToOptions, type TrainOptionFlags } from '../train/options.ts';
import { log } from '../util/log.ts';
import { type LoopOptions, runLoop } from './loop.ts';

/** `polar loop` flags after parsing (commands/loop.ts). */
export interface LoopFlags extends BackendFlags, RolloutFlags {
  trainSet: string;
  evalSet?: string;
  harness: HarnessName;
  promptTemplate?: string;
  trainModel?: string;
  groupSize: number;
  tasksPerStep: number;
  steps: number;
  evalEvery: number;
  out: string;
  concurrency: number;
  reloadCmd?: string;
  trainConfig?: string;
  /** polar train's --device, --lora, --lr (undefined = not given: --train-config or train's default) */
  device?: TrainOptionFlags['device'];
  lora?: TrainOptionFlags['lora'];
  lr?: TrainOptionFlags['lr'];
  gradeEmptyPatches?: boolean;
  rejectTestTampering?: boolean;
  /** polar, or a verifier command (src/rollout/verifier.ts) */
  grader: Grader;
  resume?: boolean;
  quiet?: boolean;
}

/** The loop's options from its flags (the evaluation part is the setup polar eval makes). */
export function loopOptions(f: LoopFlags): LoopOptions {
  // with the embedded engine the loop exports every checkpoint it serves, the starting one too
  const backend = backendOptions(f, { exportsCheckpoints: true });
  const trainModel = f.trainModel ?? backend.model;
  return {
    trainSet: f.trainSet,
    ...(f.evalSet ? { evalSet: f.evalSet } : {}),
    agent: {
      agent: f.harness,
      ...(f.promptTemplate ? { promptTemplate: f.promptTemplate } : {}),
      ...(f.piApi ? { piApi: f.piApi } : {}),
      ...(f.passEnv?.length ? { passEnv: f.passEnv } : {}),
    },
    runtime: runtimeSetup(f),
    backend,
    trainModel: existsSync(trainModel) ? resolve(trainModel) : trainModel,
    groupSize: f.groupSize,
    tasksPerStep: f.tasksPerStep,
    steps: f.steps,
    evalEvery: f.evalEvery,
    out: f.out,
    concurrency: f.concurrency,
    agentTimeoutMs: f.agentTimeout,
    testTimeoutMs: f.testTimeout,
    resume: Boolean(f.resume),
    gradeEmptyPatches: Boolean(f.gradeEmptyPatches),
    rejectTestTampering: Boolean(f.rejectTestTampering),
    ...verifierOf(f.grader),
    ...(f.reloadCmd ? { reloadCmd: f.reloadCmd } : {}),
    ...(f.trainConfig ? { trainConfig: f.trainConfig } : {}),
    trainFlags: flagsToOptions({ device: f.device, lora: f.lora, lr: f.lr }),
    exportOnnx: async (checkpoint, dir) => {
      const { runExport } = await import('../export/export.ts');
      await runExport({ checkpoint, onnx: dir });
    },
  };
}

/** --grader: polar (the default) or a verifier command; swebench grades after a run, not within a step. */
function verifierOf(grader: Grader): { verifier?: string } {
  const verifier = rolloutVerifier(grader, 'polar loop grades each rollout itself');
  return verifier ? { verifier } : {};
}

export async function loopCommand(f: LoopFlags): Promise<number> {
  log.configure({ quiet: Boolean(f.quiet) });
  const summaries = await runLoop(loopOptions(f));
  const last = summaries.at(-1);
  if (last) log.info(`loop finished at step ${last.step}: policy ${last.checkpoint}`);
  return 0;
}
