/** `polar train`: typed flags in, the training run (src/train/launch.ts), exit code out. */
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { EXIT, UsageError } from '../errors.ts';
import { reportSetup } from '../options/report.ts';
import { onStopSignals } from '../util/interrupt.ts';
import { log } from '../util/log.ts';
import { checkUserConfig, resumeDirectory, type TrainFlags } from './config.ts';
import type { NodeRole } from './launch.ts';
import { runTrain } from './launch.ts';
import { flagsToOptions } from './options.ts';
import { CHECKPOINT_FILES } from './schema.ts';
import { trainFigures } from './tracking/figures.ts';
import { openReporter } from './tracking/reporter.ts';

/** The body of `polar train`: typed flags in, the run, exit code out. */
export async function trainCommand(trajectories: string, flags: TrainFlags): Promise<number> {
  if (flags.quiet) log.configure({ quiet: true });
  // SIGINT, SIGTERM and SIGHUP alike: the worker stops, the last checkpoint is kept for --resume
  const interrupt = onStopSignals('stopping the training worker (the last checkpoint is kept for --resume)');
  try {
    await train(trajectories, flags, interrupt.signal);
  } finally {
    interrupt.dispose();
  }
  return EXIT.ok;
}

async function train(trajectories: string, flags: TrainFlags, signal: AbortSignal): Promise<void> {
  const resume = resumeDirectory(flags, (m) => log.warn(m));
  const nodes = nodeRole(flags);
  const setup = reportSetup(flags, flags.out);
  if (setup && nodes.nodes)
    throw new UsageError(
      '--report-to with --nnodes > 1 is not supported: the node that runs global rank 0 is chosen by torchrun',
      'drop --report-to (metrics.jsonl holds every step), or train on one node',
    );
  // --resume in the same --out continues its W&B run; TensorBoard drops what came after the checkpoint
  const continuing = resume !== undefined && resolve(resume) === resolve(flags.out);
  const reporter = await openReporter(setup, {
    out: resolve(flags.out),
    resume: continuing,
    purgeStep: continuing ? checkpointStep(flags.out) + 1 : null,
    python: flags.python,
    config: { command: 'train', ...flagsToOptions(flags) },
  });
  let logged = 0;
  try {
    await runTrain({
      signal,
      trajectories,
      out: flags.out,
      resume,
      // --config's keys with a flag came as flags (src/options/config.ts); the others are train.json's
      ...(flags.configKeys ? { config: checkUserConfig(flags.configKeys, flags.config ?? '--config') } : {}),
      flags: flagsToOptions(flags),
      python: flags.python,
      json: flags.json ?? false,
      ...(flags.allowZeroAdvantage ? { allowZeroAdvantage: true } : {}),
      ...(flags.sampledBy?.length ? { sampledBy: flags.sampledBy } : {}),
      ...nodes,
      ...(setup
        ? {
            onStep: (e) => {
              logged++;
              reporter.log('train', Number(e.step), trainFigures(e));
            },
          }
        : {}),
    });
  } catch (error) {
    // refused or failed before its first step (bad trajectories, a refused device, ...): the writer's
    // files would hold nothing, so the run leaves none of them behind
    if (logged === 0) await reporter.discard();
    else await reporter.close();
    throw error;
  }
  await reporter.close();
}

/** The step of a run's latest checkpoint (`latest` names step-N); 0 when it names none. */
function checkpointStep(out: string): number {
  const latest = join(out, CHECKPOINT_FILES.latest);
  const m = existsSync(latest) ? /step-(\d+)/.exec(readFileSync(latest, 'utf8')) : null;
  return m ? Number(m[1]) : 0;
}

/** --nnodes, --node-rank, --rdzv-endpoint, --local-addr, --socket-ifname: this machine's part of the run. */
export function nodeRole(f: TrainFlags): { nodes?: NodeRole } {
  const nnodes = f.nnodes ?? 1;
  if (nnodes <= 1) {
    if (f.nodeRank || f.rdzvEndpoint)
      throw new UsageError(
        '--node-rank and --rdzv-endpoint are for a run across nodes: add --nnodes N (N > 1)',
      );
    return {};
  }
  if (f.nodeRank === undefined || !f.rdzvEndpoint)
    throw new UsageError(
      `--nnodes ${nnodes} needs --node-rank (0 to ${nnodes - 1}) and --rdzv-endpoint HOST:PORT (node 0's address)`,
      'for example on node 0: --nnodes 2 --node-rank 0 --rdzv-endpoint 10.0.0.1:29400 --local-addr 10.0.0.1',
    );
  if (f.nodeRank >= nnodes) throw new UsageError(`--node-rank ${f.nodeRank}: expected 0 to ${nnodes - 1}`);
  return {
    nodes: {
      nnodes,
      nodeRank: f.nodeRank,
      rdzvEndpoint: f.rdzvEndpoint,
      ...(f.localAddr ? { localAddr: f.localAddr } : {}),
      ...(f.socketIfname ? { socketIfname: f.socketIfname } : {}),
      ...(f.rdzvId ? { rdzvId: f.rdzvId } : {}),
    },
  };
}
