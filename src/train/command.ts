/** `polar train`: typed flags in, the training run (src/train/launch.ts), exit code out. */

import { UsageError } from '../errors.ts';
import { log } from '../util/log.ts';
import { resumeDirectory, type TrainFlags } from './config.ts';
import type { NodeRole } from './launch.ts';
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
    ...nodeRole(flags),
  });
  return 0;
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
