/** `polar train`: typed flags in, the training run (src/train/launch.ts), exit code out. */
import { onStopSignals } from '../util/interrupt.ts';
import { log } from '../util/log.ts';
import { flagsToOptions, resumeDirectory, type TrainFlags } from './config.ts';
import { runTrain } from './launch.ts';

/** The body of `polar train`: typed flags in, the run, exit code out. */
export async function trainCommand(trajectories: string, flags: TrainFlags): Promise<number> {
  // SIGINT, SIGTERM and SIGHUP alike: the worker stops, the last checkpoint is kept for --resume
  const interrupt = onStopSignals('stopping the training worker (the last checkpoint is kept for --resume)');
  try {
    await train(trajectories, flags, interrupt.signal);
  } finally {
    interrupt.dispose();
  }
  return 0;
}

async function train(trajectories: string, flags: TrainFlags, signal: AbortSignal): Promise<void> {
  await runTrain({
    signal,
    trajectories,
    out: flags.out,
    resume: resumeDirectory(flags, (m) => log.warn(m)),
    configFile: flags.config,
    flags: flagsToOptions(flags),
    python: flags.python,
    json: flags.json ?? false,
  });
}
