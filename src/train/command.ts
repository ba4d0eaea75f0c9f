/** `polar train`: typed flags in, the training run (src/train/launch.ts), exit code out. */
import { log } from '../util/log.ts';
import { resumeDirectory, type TrainFlags } from './config.ts';
import { runTrain } from './launch.ts';
import { flagsToOptions } from './options.ts';

/** The body of `polar train`: typed flags in, the run, exit code out. */
export async function trainCommand(trajectories: string, flags: TrainFlags): Promise<number> {
  await runTrain({
    trajectories,
    out: flags.out,
    resume: resumeDirectory(flags, (m) => log.warn(m)),
    configFile: flags.config,
    flags: flagsToOptions(flags),
    python: flags.python,
    json: flags.json ?? false,
  });
  return 0;
}
