/** The body of `polar gym`: typed flags in, runtime and backend wired, the agent server started, run until SIGTERM/SIGINT. */
import { resolve } from 'node:path';
import { EXIT } from '../errors.ts';
import type { HarnessName } from '../harnesses/types.ts';
import { serverExitCode, untilSignal } from '../http/server.ts';
import { type BackendFlags, backendOptions, backendUrls as urlsOf } from '../options/backend.ts';
import { DEFAULTS } from '../options/defaults.ts';
import { loadDataset } from '../rollout/dataset.ts';
import { ensureDatasetRepos } from '../rollout/dataset-repos.ts';
import { type RolloutFlags, runtimeSetup } from '../rollout/flags.ts';
import { type JudgeFlags, rewardSetup } from '../rollout/judge/setup.ts';
import { createRuntime } from '../rollout/runtime/create.ts';
import { type EvaluationSetup, harnessSetup } from '../rollout/setup.ts';
import { type Grader, rolloutVerifier } from '../rollout/verifier.ts';
import { log } from '../util/log.ts';
import { redactUrl } from '../util/redact.ts';
import { gymBackendUrls, startGym } from './server.ts';

/** `polar gym` flags after parsing (commands/gym.ts). */
export interface GymFlags extends Omit<BackendFlags, 'backendUrl'>, RolloutFlags, JudgeFlags {
  /** --backend-url: one URL, or several (comma-separated or repeated) when NeMo RL runs several servers */
  backendUrl?: string[] | string;
  /** --dry-run: the start-up checks, then exit 0 (NeMo Gym's `dry_run`), no probe, no listening */
  dryRun?: boolean;
  harness: HarnessName;
  agentCmd?: string;
  promptTemplate?: string;
  dataset?: string;
  /** polar, or a verifier command (src/rollout/verifier.ts) */
  grader: Grader;
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
  /** false with --no-reject-test-tampering */
  rejectTestTampering?: boolean;
  maxBody: number;
  quiet?: boolean;
}

/** The harness and runtime of every rollout: the setup polar eval and polar loop make from the same flags. */
export function gymEvaluation(f: GymFlags): EvaluationSetup & { agent: { agent: HarnessName } } {
  return {
    agent: {
      agent: f.harness,
      backend: backendOptions(firstUrl(f)),
      ...(f.agentCmd ? { agentCmd: f.agentCmd } : {}),
      ...(f.promptTemplate ? { promptTemplate: f.promptTemplate } : {}),
      ...(f.piApi ? { piApi: f.piApi } : {}),
      ...(f.passEnv?.length ? { passEnv: f.passEnv } : {}),
    },
    runtime: runtimeSetup(f, f.dataset),
  };
}

/** --grader: polar (the default) or a verifier command; swebench grades after a run, not per rollout. */
export function gymVerifier(grader: Grader): string | undefined {
  return rolloutVerifier(grader, 'polar gym grades each rollout as it answers');
}

/** the backend flags with the first server's URL (the options every server shares) */
function firstUrl(f: GymFlags): BackendFlags {
  const { backendUrl, ...rest } = f;
  const first = urlsOf({ backendUrl })[0];
  return first ? { ...rest, backendUrl: first } : rest;
}

export async function gymCommand(f: GymFlags): Promise<number> {
  log.configure({ quiet: Boolean(f.quiet) });
  const setup = gymEvaluation(f);
  // the same runtime eval and loop make: in a container, the harness reads its config from a mounted dir
  const runtime = await createRuntime(setup.runtime, { harness: f.harness });
  const harness = await harnessSetup(setup.agent, runtime);
  const backend = harness.backend;
  const given = f.auth ? (f.token ?? process.env.POLAR_GYM_TOKEN) : undefined;
  const verifier = gymVerifier(f.grader);
  // a judge sees one rollout per request here (--judge-mode group is refused)
  const rewards = rewardSetup(f, { groups: false, command: 'gym' });
  const judged = rewards.judge !== null || f.reward !== undefined;
  const dataset = f.dataset
    ? await loadDataset(f.dataset, {
        split: f.split,
        verifier: verifier !== undefined || rewards.primary === 'judge',
      })
    : undefined;
  if (f.dataset && dataset && (runtime.kind === 'sandbox' || runtime.kind === 'local'))
    ensureDatasetRepos(f.dataset, setup.runtime.repos, dataset);
  // the runtime is checked with or without a dataset (docker: the engine answers), as eval does
  await runtime.check(dataset ?? []);
  const backendUrls = gymBackendUrls({ backend: harness.backend, backendUrls: urlsOf(f) });
  if (f.dryRun) {
    // NeMo Gym's dry_run (nemo_gym/server_utils.py, run_webserver): servers return right after their
    // start-up checks; the inference servers need not be up yet, so they are not probed
    const line = {
      dry_run: true,
      harness: f.harness,
      runtime: runtime.kind,
      backend_urls: backendUrls.map(redactUrl),
    };
    process.stdout.write(`${JSON.stringify(line)}\n`);
    log.info(
      `dry run: flags, harness and the ${runtime.kind} runtime checked${dataset ? `, dataset ${f.dataset} read (${dataset.length} rows)` : ' (no --dataset given)'}; the backend is not probed; not listening`,
    );
    return EXIT.ok;
  }
  const gym = await startGym({
    ...harness,
    backendUrls,
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
    rejectTampering: f.rejectTestTampering ?? DEFAULTS.trainingRejectsTampering.value,
    ...(verifier ? { verifier } : {}),
    ...(judged ? { rewards } : {}),
    token: f.auth ? given : null,
  });
  // listening for the stop signals before the line that says the server is up: a caller that stops it
  // as soon as it reads the line must not find another listener (a runtime's) swallowing the signal
  const stopped = untilSignal((received) => {
    log.info(`${received}: closing`);
    return gym.close();
  });
  // one machine-readable line on stdout: the token too when polar made it (the caller must learn it)
  const made = f.auth && given === undefined;
  const line = { url: gym.url, out: resolve(f.out), ...(made ? { token: gym.token } : {}) };
  process.stdout.write(`${JSON.stringify(line)}\n`);
  if (made)
    log.info(`requests need "Authorization: Bearer ${gym.token}" (--token or $POLAR_GYM_TOKEN to choose it)`);
  const servers = backendUrls.length > 1 ? ` x ${backendUrls.length} servers` : '';
  log.info(
    `NeMo Gym agent server (${f.harness}, ${runtime.kind}, ${backend.kind}${servers}) on ${gym.url}: POST /run`,
  );
  return serverExitCode(await stopped);
}
