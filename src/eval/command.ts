/** `polar eval`: option checking, wiring of dataset, runtime, agent and orchestrator, exit codes. */

import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Backend } from '../backends/types.ts';
import { type BackendFlags, backendOptions } from '../capture/options.ts';
import { EnvironmentError, EXIT, PolarError, UsageError } from '../errors.ts';
import { HARNESS_NAMES as HARNESSES, type HarnessName } from '../harnesses/types.ts';
import { log } from '../util/log.ts';
import { type Agent, EmptyAgent, GoldAgent, HarnessAgent, PredictionsAgent } from './agents.ts';
import { loadDataset, parseShard, selectInstances } from './dataset.ts';
import { formatReport } from './report.ts';
import { runEval } from './run.ts';
import { ContainerRuntime } from './runtime/docker.ts';
import { LocalRuntime } from './runtime/local.ts';
import type { Runtime } from './runtime/types.ts';
import { runSwebenchGrader } from './swebench.ts';

export interface EvalCliOptions {
  dataset: string;
  split?: string;
  agent?: string;
  harness?: string;
  agentCmd?: string;
  predictions?: string;
  promptTemplate?: string;
  backend?: string;
  backendUrl?: string;
  model?: string;
  runtime: string;
  repos: string;
  image?: string;
  network?: string;
  samples: string;
  concurrency: string;
  out: string;
  instances?: string;
  limit?: string;
  shard?: string;
  agentTimeout: string;
  testTimeout: string;
  resume?: boolean;
  allowUnsandboxed?: boolean;
  grader: string;
  json?: boolean;
  failUnder?: string;
  quiet?: boolean;
  keepEnvs?: boolean;
  gradeEmptyPatches?: boolean;
  piApi?: string;
  regrade?: boolean;
}

function positiveInt(name: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`${name} ${value}: expected a positive integer`);
  return n;
}

function seconds(name: string, value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new UsageError(`${name} ${value}: expected seconds > 0`);
  return n * 1000;
}

async function readPredictions(path: string): Promise<{ patches: Map<string, string>; model: string }> {
  const patches = new Map<string, string>();
  let model = 'predictions';
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch {
    throw new UsageError(`--predictions ${path}: cannot be read`);
  }
  const rows = path.endsWith('.json')
    ? (JSON.parse(text) as unknown[])
    : text
        .split('\n')
        .filter((l) => l.trim())
        .map((l) => JSON.parse(l));
  for (const row of rows as Array<Record<string, unknown>>) {
    if (typeof row.instance_id !== 'string') continue;
    patches.set(row.instance_id, typeof row.model_patch === 'string' ? row.model_patch : '');
    if (typeof row.model_name_or_path === 'string') model = row.model_name_or_path;
  }
  return { patches, model };
}

/** the local runtime's warning is said once per process (polar loop sets up an eval every step) */
let warnedUnsandboxed = false;

/** The runtime and agent an eval needs, from its options (shared with polar loop, which injects a backend). */
export async function setupEval(
  o: EvalCliOptions,
  extras: { backendInstance?: Backend } = {},
): Promise<{ agent: Agent; runtime: Runtime }> {
  let runDirBase: string | undefined;
  // the agent: --agent gold|empty|predictions|<harness>, or --harness <harness>
  const agentName = o.agent ?? o.harness;
  if (!agentName)
    throw new UsageError('give --harness <codex|claude|pi|generic> or --agent <gold|empty|predictions>');
  const isHarness = (HARNESSES as readonly string[]).includes(agentName);
  if (!isHarness && !['gold', 'empty', 'predictions'].includes(agentName)) {
    throw new UsageError(
      `--agent ${agentName}: expected gold, empty, predictions or a harness (${HARNESSES.join(', ')})`,
    );
  }

  // the runtime
  let runtime: Runtime;
  if (o.runtime === 'local') {
    runtime = new LocalRuntime({ reposDir: o.repos, keep: o.keepEnvs });
    if (!warnedUnsandboxed)
      log.warn('the local runtime runs agents and tests on this machine without isolation');
    warnedUnsandboxed = true;
    if (isHarness && !o.allowUnsandboxed) {
      throw new UsageError(
        `--runtime local would run the ${agentName} harness unsandboxed on this machine`,
        'use --runtime docker, or pass --allow-unsandboxed if you accept that (gold, empty and predictions need no flag)',
      );
    }
  } else if (o.runtime === 'docker' || o.runtime === 'podman') {
    // a harness in a container reads the private config polar writes for it (CODEX_HOME, the Pi agent
    // dir, CLAUDE_CONFIG_DIR): those are made under one host dir mounted at the same path, writable
    if (isHarness) runDirBase = await mkdtemp(join(tmpdir(), 'polar-harness-'));
    const mounts = isHarness
      ? [
          { host: process.execPath, container: '/polar/bin/node' },
          { host: resolve(import.meta.dirname, '../../node_modules'), container: '/polar/node_modules' },
          { host: runDirBase!, container: runDirBase!, readonly: false },
        ]
      : [];
    runtime = new ContainerRuntime({
      engine: o.runtime,
      network: o.network,
      mounts,
      ...(o.image ? { image: (i) => o.image!.replaceAll('{instance_id}', i.instance_id) } : {}),
    });
  } else {
    throw new UsageError(`--runtime ${o.runtime}: expected local, docker or podman`);
  }

  let agent: Agent;
  if (agentName === 'gold') agent = new GoldAgent();
  else if (agentName === 'empty') agent = new EmptyAgent();
  else if (agentName === 'predictions') {
    if (!o.predictions) throw new UsageError('--agent predictions needs --predictions FILE');
    const { patches, model } = await readPredictions(o.predictions);
    agent = new PredictionsAgent(patches, model);
  } else {
    const backend = backendOptions(o as BackendFlags);
    agent = new HarnessAgent({
      harness: agentName as HarnessName,
      backend,
      model: backend.model,
      placement: runtime.isolated ? 'container' : 'host',
      ...(o.agentCmd
        ? { genericCommand: ['bash', '-c', o.agentCmd.replaceAll('{prompt}', '"$POLAR_PROMPT"')] }
        : {}),
      ...(o.promptTemplate ? { promptTemplate: await readFile(o.promptTemplate, 'utf8') } : {}),
      ...(extras.backendInstance ? { backendInstance: extras.backendInstance } : {}),
      ...(o.piApi ? { harnessOptions: { api: o.piApi } } : {}),
      ...(runDirBase ? { runDirBase } : {}),
    });
  }

  return { agent, runtime };
}

export async function evalCommand(o: EvalCliOptions): Promise<number> {
  if (o.quiet) log.configure({ quiet: true });
  if (o.regrade) return (await import('./regrade.ts')).regradeCommand(o);
  const samples = positiveInt('--samples', o.samples);
  const concurrency = positiveInt('--concurrency', o.concurrency);
  const agentTimeoutMs = seconds('--agent-timeout', o.agentTimeout);
  const testTimeoutMs = seconds('--test-timeout', o.testTimeout);
  const failUnder = o.failUnder === undefined ? undefined : Number(o.failUnder);
  if (failUnder !== undefined && !(failUnder >= 0 && failUnder <= 1)) {
    throw new UsageError(
      `--fail-under ${o.failUnder}: expected a fraction between 0 and 1`,
      'for example --fail-under 0.25',
    );
  }
  if (!['polar', 'swebench'].includes(o.grader))
    throw new UsageError(`--grader ${o.grader}: expected polar or swebench`);

  const { agent, runtime } = await setupEval(o);

  const all = await loadDataset(o.dataset, { split: o.split });
  const instances = selectInstances(all, {
    instances: o.instances
      ?.split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    limit: o.limit === undefined ? undefined : positiveInt('--limit', o.limit),
    shard: o.shard ? parseShard(o.shard) : undefined,
  });
  if (instances.length === 0)
    throw new UsageError('no instances selected', 'check --instances, --shard and --limit');
  await runtime.check(instances);
  log.info(
    `${instances.length} instances x ${samples} samples, agent ${agent.name}, runtime ${runtime.kind}, concurrency ${concurrency}`,
  );

  const controller = new AbortController();
  const onSigint = () => {
    log.warn('interrupted: stopping the running samples (run again with --resume to continue)');
    controller.abort();
  };
  process.once('SIGINT', onSigint);
  let outcome: Awaited<ReturnType<typeof runEval>>;
  try {
    outcome = await runEval({
      instances,
      agent,
      runtime,
      out: o.out,
      samples,
      concurrency,
      agentTimeoutMs,
      testTimeoutMs,
      resume: Boolean(o.resume),
      dataset: o.dataset,
      grade: o.grader === 'swebench' ? 'none' : 'polar',
      gradeEmpty: Boolean(o.gradeEmptyPatches),
      progress: !o.quiet,
      signal: controller.signal,
    });
    if (o.grader === 'swebench')
      outcome = await runSwebenchGrader(outcome, {
        out: o.out,
        dataset: o.dataset,
        split: o.split,
        testTimeoutMs,
        concurrency,
        instances,
        agent,
        runtime,
        samples,
      });
  } finally {
    process.removeListener('SIGINT', onSigint);
    await agent.close?.();
  }
  const { report } = outcome;
  if (o.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else process.stdout.write(`${formatReport(report)}\n`);
  log.info(`wrote ${resolve(o.out)}/{results.jsonl,predictions.jsonl,report.json}`);
  if (outcome.interrupted) return EXIT.interrupted;
  if (report.total > 0 && report.counts.error === report.total) {
    throw new PolarError(`the evaluation failed: all ${report.total} samples ended in an error`, {
      exitCode: EXIT.failure,
      hint: `first error: ${report.errors[0]?.reason ?? 'unknown'}`,
    });
  }
  if (report.counts.error > 0) log.warn(`${report.counts.error} samples ended in an error (see report.json)`);
  if (failUnder !== undefined && report.pass_at_1.mean < failUnder) {
    throw new PolarError(`pass@1 ${report.pass_at_1.mean.toFixed(4)} is below --fail-under ${failUnder}`, {
      exitCode: EXIT.belowThreshold,
    });
  }
  return EXIT.ok;
}

export { EnvironmentError };
