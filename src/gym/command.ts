/** The body of `polar gym`: typed flags in, runtime and backend wired, the agent server started, run until SIGTERM/SIGINT. */
import { resolve } from 'node:path';
import { loadDataset } from '../eval/dataset.ts';
import { createRuntime } from '../eval/runtime/create.ts';
import { type EvaluationSetup, harnessSetup } from '../eval/setup.ts';
import type { HarnessName } from '../harnesses/types.ts';
import { untilSignal } from '../http/server.ts';
import { type BackendFlags, backendOptions } from '../options/backend.ts';
import { type RolloutFlags, runtimeSetup } from '../options/rollout.ts';
import { log } from '../util/log.ts';
import { startGym } from './server.ts';

/** `polar gym` flags after parsing (commands/gym.ts). */
export interface GymFlags extends BackendFlags, RolloutFlags {
  harness: HarnessName;
  agentCmd?: string;
  promptTemplate?: string;
  dataset?: string;
  split: string;
  out: string;
  host: string;
  port: number;
  maxRollouts: number;
  maxInflight: number;
  token?: string;
  /** false with --no-auth */
  auth: boolean;
  trustRowCommands?: boolean;
  maxBody: number;
  quiet?: boolean;
}

/** The harness and runtime of every rollout: the setup polar eval and polar loop make from the same flags. */
export function gymEvaluation(f: GymFlags): EvaluationSetup & { agent: { agent: HarnessName } } {
  return {
    agent: {
      agent: f.harness,
      backend: backendOptions(f),
      ...(f.agentCmd ? { agentCmd: f.agentCmd } : {}),
      ...(f.promptTemplate ? { promptTemplate: f.promptTemplate } : {}),
      ...(f.piApi ? { piApi: f.piApi } : {}),
      ...(f.passEnv?.length ? { passEnv: f.passEnv } : {}),
    },
    runtime: runtimeSetup(f),
  };
}

export async function gymCommand(f: GymFlags): Promise<number> {
  log.configure({ quiet: Boolean(f.quiet) });
  const setup = gymEvaluation(f);
  // the same runtime eval and loop make: in a container, the harness reads its config from a mounted dir
  const runtime = await createRuntime(setup.runtime, { harness: f.harness });
  const harness = await harnessSetup(setup.agent, runtime);
  const backend = harness.backend;
  const given = f.auth ? (f.token ?? process.env.POLAR_GYM_TOKEN) : undefined;
  const dataset = f.dataset ? await loadDataset(f.dataset, { split: f.split }) : undefined;
  if (dataset) await runtime.check(dataset);
  const gym = await startGym({
    ...harness,
    runtime,
    ...(dataset ? { dataset } : {}),
    out: f.out,
    host: f.host,
    port: f.port,
    maxRollouts: f.maxRollouts,
    maxInflight: f.maxInflight,
    agentTimeoutMs: f.agentTimeout,
    testTimeoutMs: f.testTimeout,
    maxBodyBytes: f.maxBody,
    ...(f.trustRowCommands ? { trustRowCommands: true } : {}),
    token: f.auth ? given : null,
  });
  // one machine-readable line on stdout: the token too when polar made it (the caller must learn it)
  const made = f.auth && given === undefined;
  const line = { url: gym.url, out: resolve(f.out), ...(made ? { token: gym.token } : {}) };
  process.stdout.write(`${JSON.stringify(line)}\n`);
  if (made)
    log.info(`requests need "Authorization: Bearer ${gym.token}" (--token or $POLAR_GYM_TOKEN to choose it)`);
  log.info(`NeMo Gym agent server (${f.harness}, ${runtime.kind}, ${backend.kind}) on ${gym.url}: POST /run`);
  await untilSignal((signal) => {
    log.info(`${signal}: closing`);
    return gym.close();
  });
  return 0;
}
