/**
 * Agents: what works on an instance before its patch is taken. `gold` applies the instance's own fix
 * and `empty` changes nothing (both validate an environment: gold must resolve, empty must not);
 * `predictions` applies patches from an existing predictions file (grading someone else's run);
 * a harness agent runs Codex / Claude Code / Pi / a generic command under `polar capture` through
 * runCapture (src/capture/run.ts), which records every model call into the sample's capture file.
 */
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BackendPool } from '../backends/pool.ts';
import type { Backend, BackendOptions } from '../backends/types.ts';
import type { CaptureRunOptions, CaptureRunResult } from '../capture/run.ts';
import { UsageError } from '../errors.ts';
import { containerEnvNames } from '../harnesses/env.ts';
import { HARNESSES as HARNESS_PROFILES } from '../harnesses/index.ts';
import type { HarnessName } from '../harnesses/types.ts';
import type { SweInstance } from './dataset.ts';
import { applyPatch } from './patch.ts';
import { CONTAINER_MODULES, CONTAINER_NODE } from './runtime/docker.ts';
import type { InstanceEnv, LimitHit } from './runtime/types.ts';

export interface AgentContext {
  instance: SweInstance;
  sample: number;
  env: InstanceEnv;
  timeoutMs: number;
  /** where the capture of this sample goes (harness agents only) */
  capturePath: string;
  /** extra facts for the capture's session meta */
  meta: Record<string, string>;
  /** ends this sample's harness alone (its process group), as an interrupt would (polar loop --overdue drop) */
  signal?: AbortSignal;
}

export interface AgentOutcome {
  status: 'completed' | 'error' | 'timeout' | 'interrupted';
  /** the capture file, when the agent produced one */
  capture: string | null;
  sessionId: string | null;
  calls: number;
  /** calls that got no model answer (backend down, server error); all of them failing is an infrastructure failure */
  failedCalls?: number;
  /** calls that ended before an answer without failing: the harness hung up (client_closed) or polar cut them */
  hungUpCalls?: number;
  /** calls a weight update of polar loop cut mid-answer (--weight-sync-pause abort): an infrastructure failure */
  weightUpdateCutCalls?: number;
  error: string | null;
  /** the patch to grade as it is, instead of taking the diff of the environment (predictions) */
  patch?: string;
  /** the limit that ended the run (memory, processes, disk, time), when one did */
  limit?: LimitHit | null;
}

export interface Agent {
  readonly name: string;
  /** false for gold/empty/predictions: nothing untrusted runs */
  readonly runsUntrustedCode: boolean;
  /** model_name_or_path in predictions.jsonl */
  readonly modelName: string;
  run(context: AgentContext): Promise<AgentOutcome>;
  /** releases what the agent holds across samples (the backend) */
  close?(): Promise<void>;
}

const ok = (): AgentOutcome => ({
  status: 'completed',
  capture: null,
  sessionId: null,
  calls: 0,
  error: null,
});

export class GoldAgent implements Agent {
  readonly name = 'gold';
  readonly runsUntrustedCode = false;
  readonly modelName = 'gold';
  async run({ env, instance }: AgentContext): Promise<AgentOutcome> {
    const applied = await applyPatch(env, instance.patch, 'polar-gold.diff');
    if (applied.applied) return ok();
    return {
      ...ok(),
      status: 'error',
      error: `gold patch does not apply: ${applied.output.trim().slice(-300)}`,
    };
  }
}

export class EmptyAgent implements Agent {
  readonly name = 'empty';
  readonly runsUntrustedCode = false;
  readonly modelName = 'empty';
  async run(): Promise<AgentOutcome> {
    return ok();
  }
}

/** Applies `model_patch` from a predictions file (instance id -> patch); a missing instance gives an empty patch. */
export class PredictionsAgent implements Agent {
  readonly name = 'predictions';
  readonly runsUntrustedCode = false;
  constructor(
    private readonly patches: Map<string, string>,
    readonly modelName: string,
  ) {}
  async run({ instance }: AgentContext): Promise<AgentOutcome> {
    // graded as given, like the official harness: a patch that does not apply is reported as such
    return { ...ok(), patch: this.patches.get(instance.instance_id) ?? '' };
  }
}

// ---------------------------------------------------------------------------------------------------
// harness agents

/** runCapture as the agent calls it: always in the instance's working directory */
export type RunCapture = (options: CaptureRunOptions & { cwd: string }) => Promise<CaptureRunResult>;

/** Loads runCapture lazily (the capture module pulls in the proxy and backends). */
export async function loadRunCapture(): Promise<RunCapture> {
  return (await import('../capture/run.ts')).runCapture;
}

const WORK_IN_ROOT = `<pr_description>
{{problem_statement}}
</pr_description>

Work in the repository root ({{workdir}}). Change non-test files so the problem in <pr_description>
is fixed; leave the tests alone. Stop when you are done.`;

/** What the agent is told. Mirrors mini-swe-agent's framing: the issue, the repo root, non-test changes. */
export const PROMPT_TEMPLATES: Record<HarnessName, string> = {
  codex: `<pr_description>
{{problem_statement}}
</pr_description>

The repository is checked out at {{workdir}} (your current directory, the repository root).
Make the smallest changes to non-test files in this repository so that the behaviour described in
<pr_description> is fixed. Do not modify or add test files. Do not ask for confirmation; when the fix
is in place, stop.`,
  claude: `<pr_description>
{{problem_statement}}
</pr_description>

You are in the root of the repository at {{workdir}}. Edit non-test source files so the issue in
<pr_description> is resolved. Do not change or add tests, and do not commit. Finish when the fix is done.`,
  pi: WORK_IN_ROOT,
  qwen: WORK_IN_ROOT,
  gemini: WORK_IN_ROOT,
  opencode: WORK_IN_ROOT,
  generic: `<pr_description>
{{problem_statement}}
</pr_description>

Work in the repository root ({{workdir}}). Change non-test files so the problem in <pr_description>
is fixed; leave the tests alone.`,
};

export function renderPrompt(template: string, instance: SweInstance, workdir: string): string {
  const values: Record<string, string> = {
    problem_statement: instance.problem_statement.trim(),
    workdir,
    instance_id: instance.instance_id,
    repo: instance.repo,
    hints_text: instance.hints_text,
  };
  return template.replace(/\{\{(\w+)\}\}/g, (m, key: string) => values[key] ?? m);
}

const HERE = dirname(fileURLToPath(import.meta.url));
const NODE_MODULES = resolve(HERE, '../../node_modules');

/** The non-interactive command line for a harness with the prompt. */
export function harnessArgv(
  harness: HarnessName,
  prompt: string,
  placement: 'host' | 'container',
  generic?: string[],
): string[] {
  if (harness === 'generic') {
    if (!generic || generic.length === 0) throw new UsageError('the generic harness needs --agent-cmd');
    return generic.map((a) => a.replaceAll('{prompt}', prompt));
  }
  const profile = HARNESS_PROFILES[harness];
  const entry = profile.entry;
  // (a native entry runs as it is, a script under node)
  const node =
    profile.entryRuns === 'exec' ? [] : placement === 'container' ? [CONTAINER_NODE] : [process.execPath];
  const launcher = !entry
    ? [harness]
    : placement === 'container'
      ? [...node, `${CONTAINER_MODULES}/${entry}`]
      : existsSync(join(NODE_MODULES, entry))
        ? [...node, join(NODE_MODULES, entry)]
        : [harness];
  return [...launcher, ...profile.promptArgs(prompt)];
}

export interface HarnessAgentOptions {
  harness: HarnessName;
  backend: BackendOptions;
  model: string;
  /** container or host placement of the harness process */
  placement: 'host' | 'container';
  /** argv template for the generic harness ({prompt} is replaced) */
  genericCommand?: string[];
  promptTemplate?: string;
  /** injected in tests; default: loadRunCapture() */
  runCapture?: RunCapture;
  /** where runCapture makes the harness's private config dir; default: the environment's harnessDirBase */
  runDirBase?: string;
  /** profile options for runCapture (e.g. { api: 'openai-responses' } for Pi) */
  harnessOptions?: Record<string, string>;
  /** a backend owned by the caller (polar loop's, reloaded between steps): used as is, never closed */
  backendInstance?: Backend;
  /**
   * several inference servers (--backend-url A,B): each sample talks to one, the one with the fewest
   * samples running (src/backends/pool.ts); `backend` holds the options they share
   */
  backendUrls?: string[];
  /** creates the backend once for all samples (an embedded model loads once); default: createBackend */
  createBackend?: (options: BackendOptions) => Promise<Backend>;
  env?: Record<string, string>;
  /** more variables of polar's environment the harness may see (`--pass-env`) */
  passEnv?: string[];
}

export class HarnessAgent implements Agent {
  readonly runsUntrustedCode = true;
  readonly name: string;
  readonly modelName: string;
  private backend: Promise<Backend> | undefined;
  private pool: Promise<BackendPool> | undefined;

  constructor(private readonly options: HarnessAgentOptions) {
    this.name = options.harness;
    this.modelName = options.model;
  }

  async run(context: AgentContext): Promise<AgentOutcome> {
    const { env, instance } = context;
    const template = this.options.promptTemplate ?? PROMPT_TEMPLATES[this.options.harness];
    const prompt = renderPrompt(template, instance, env.workdir);
    const argv = harnessArgv(
      this.options.harness,
      prompt,
      this.options.placement,
      this.options.genericCommand,
    );
    const passEnv = containerEnvNames(Object.values(HARNESS_PROFILES), this.options.passEnv);
    const runCapture = this.options.runCapture ?? (await loadRunCapture());
    // a harness in a sandbox or container reads its private config from a dir mounted at the same path
    const runDirBase = this.options.runDirBase ?? env.harnessDirBase;
    let server: Awaited<ReturnType<HarnessAgent['server']>> | undefined;
    try {
      server = await this.server();
      const r = await runCapture({
        backendInstance: server.backend,
        ...(this.options.harnessOptions ? { harnessOptions: this.options.harnessOptions } : {}),
        ...(runDirBase ? { runDirBase } : {}),
        command: argv,
        launch: (request) => env.launchHarness({ ...request, passEnv }),
        harness: this.options.harness,
        backend: server.options,
        model: this.options.model,
        output: context.capturePath,
        cwd: env.workdir,
        env: { ...this.options.env, POLAR_PROMPT: prompt },
        ...(this.options.passEnv ? { passEnv: this.options.passEnv } : {}),
        taskId: instance.instance_id,
        sample: context.sample,
        meta: { ...context.meta, instance_id: instance.instance_id, repo: instance.repo },
        timeoutMs: context.timeoutMs,
        stdio: 'pipe',
        quiet: true,
        ...(context.signal ? { signal: context.signal } : {}),
      });
      const limit =
        (await env.limitHit?.({
          status: r.status,
          exitCode: r.exitCode,
          signal: r.signal,
          output: `${r.stdout ?? ''}\n${r.stderr ?? ''}`,
        })) ?? null;
      return {
        status: r.status,
        capture: r.output,
        sessionId: r.sessionId,
        calls: r.calls,
        failedCalls: r.errors,
        hungUpCalls: r.clientClosed + r.cut,
        weightUpdateCutCalls: r.weightUpdateCut ?? 0,
        error:
          r.status === 'completed'
            ? null
            : `harness ${r.status} (exit ${r.exitCode ?? r.signal})${limit ? `: ${limit}` : ''}`,
        limit,
      };
    } catch (error) {
      return { status: 'error', capture: null, sessionId: null, calls: 0, error: (error as Error).message };
    } finally {
      server?.release();
    }
  }

  /** The backend this sample talks to: the caller's, the one server, or the least loaded of several. */
  private async server(): Promise<{ backend: Backend; options: BackendOptions; release: () => void }> {
    const create = this.options.createBackend ?? (await import('../backends/index.ts')).createBackend;
    const urls = this.options.backendUrls ?? [];
    if (urls.length > 1 && !this.options.backendInstance) {
      this.pool ??= Promise.all(urls.map((url) => create({ ...this.options.backend, url }))).then(
        (backends) => new BackendPool(backends),
      );
      const got = (await this.pool).acquire();
      return {
        backend: got.backend,
        options: { ...this.options.backend, url: urls[got.index]! },
        release: got.release,
      };
    }
    this.backend ??= this.options.backendInstance
      ? Promise.resolve(this.options.backendInstance)
      : create(this.options.backend);
    return { backend: await this.backend, options: this.options.backend, release: () => {} };
  }

  async close(): Promise<void> {
    if (this.options.backendInstance) return;
    const backend = await this.backend?.catch(() => undefined);
    await backend?.close();
    await (await this.pool?.catch(() => undefined))?.close();
  }
}
