/** The body of `polar gym`: flags in, runtime and backend wired, the agent server started, run until SIGTERM/SIGINT. */
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { type BackendFlags, backendOptions, parseNonNegativeInt, parseSeconds } from '../capture/options.ts';
import { UsageError } from '../errors.ts';
import { loadDataset } from '../eval/dataset.ts';
import { ContainerRuntime } from '../eval/runtime/docker.ts';
import { LocalRuntime } from '../eval/runtime/local.ts';
import type { Runtime } from '../eval/runtime/types.ts';
import { HARNESS_NAMES as HARNESSES, type HarnessName } from '../harnesses/types.ts';
import { untilSignal } from '../http/server.ts';
import { log } from '../util/log.ts';
import { startGym } from './server.ts';

export interface GymFlags extends BackendFlags {
  harness?: string;
  agentCmd?: string;
  piApi?: string;
  promptTemplate?: string;
  runtime?: string;
  repos?: string;
  image?: string;
  network?: string;
  allowUnsandboxed?: boolean;
  dataset?: string;
  split?: string;
  out?: string;
  host?: string;
  port?: string;
  maxRollouts?: string;
  maxInflight?: string;
  agentTimeout?: string;
  testTimeout?: string;
  quiet?: boolean;
}

export async function gymCommand(f: GymFlags): Promise<number> {
  log.configure({ quiet: Boolean(f.quiet) });
  const harness = f.harness ?? 'pi';
  if (!(HARNESSES as readonly string[]).includes(harness)) {
    throw new UsageError(`--harness ${harness} is not one of ${HARNESSES.join(', ')}`);
  }
  if (harness === 'generic' && !f.agentCmd) throw new UsageError('--harness generic needs --agent-cmd');
  const backend = backendOptions(f);
  const kind = f.runtime ?? 'docker';
  let runtime: Runtime;
  if (kind === 'local') {
    if (!f.allowUnsandboxed) {
      throw new UsageError(
        `--runtime local would run the ${harness} harness unsandboxed on this machine`,
        'use --runtime docker, or pass --allow-unsandboxed if you accept that',
      );
    }
    runtime = new LocalRuntime({ reposDir: f.repos ?? 'fixtures/swe/repos' });
    log.warn('the local runtime runs harnesses and tests on this machine without isolation');
  } else if (kind === 'docker' || kind === 'podman') {
    runtime = new ContainerRuntime({
      engine: kind,
      network: f.network,
      mounts: [
        { host: process.execPath, container: '/polar/bin/node' },
        { host: resolve(import.meta.dirname, '../../node_modules'), container: '/polar/node_modules' },
      ],
      ...(f.image ? { image: (i) => f.image!.replaceAll('{instance_id}', i.instance_id) } : {}),
    });
  } else {
    throw new UsageError(`--runtime ${kind}: expected local, docker or podman`);
  }
  const dataset = f.dataset ? await loadDataset(f.dataset, { split: f.split }) : undefined;
  if (dataset) await runtime.check(dataset);
  const port = parseNonNegativeInt('--port', f.port) ?? 8200;
  const gym = await startGym({
    harness: harness as HarnessName,
    backend,
    runtime,
    placement: runtime.isolated ? 'container' : 'host',
    ...(f.agentCmd
      ? { genericCommand: ['bash', '-c', f.agentCmd.replaceAll('{prompt}', '"$POLAR_PROMPT"')] }
      : {}),
    ...(f.promptTemplate ? { promptTemplate: await readFile(f.promptTemplate, 'utf8') } : {}),
    ...(dataset ? { dataset } : {}),
    ...(f.piApi ? { harnessOptions: { api: f.piApi } } : {}),
    out: f.out ?? 'runs/gym',
    host: f.host ?? '127.0.0.1',
    port,
    maxRollouts: parseNonNegativeInt('--max-rollouts', f.maxRollouts) ?? 8,
    maxInflight: parseNonNegativeInt('--max-inflight', f.maxInflight) ?? 64,
    agentTimeoutMs: parseSeconds('--agent-timeout', f.agentTimeout) ?? 1_800_000,
    testTimeoutMs: parseSeconds('--test-timeout', f.testTimeout) ?? 1_800_000,
  });
  process.stdout.write(`${JSON.stringify({ url: gym.url, out: resolve(f.out ?? 'runs/gym') })}\n`);
  log.info(`NeMo Gym agent server (${harness}, ${runtime.kind}, ${backend.kind}) on ${gym.url}: POST /run`);
  await untilSignal((signal) => {
    log.info(`${signal}: closing`);
    return gym.close();
  });
  return 0;
}
