/**
 * `polar gym`: a NeMo Gym agent server (the contract in src/gym/contract.ts). One POST /run is one
 * rollout: the task row's SWE-bench instance is checked out by the configured runtime, the configured
 * harness runs on it under polar's capture proxy (runEval -> HarnessAgent -> runCapture, the same code
 * as `polar eval`, one capture file per rollout), the patch is graded by polar's grader, and the capture
 * is turned into Responses output items whose model-call items carry prompt_token_ids,
 * generation_token_ids and generation_log_probs (src/gym/rollout.ts), plus the reward.
 * POST /v1/responses runs the harness without grading; POST /aggregate_metrics aggregates.
 */
import { mkdir } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { createBackend } from '../backends/index.ts';
import type { Backend, BackendOptions } from '../backends/types.ts';
import { firstIssue, readCapture } from '../capture/reader.ts';
import type { CallRecord } from '../capture/record.ts';
import { PolarError } from '../errors.ts';
import { type Agent, HarnessAgent, PROMPT_TEMPLATES } from '../eval/agents.ts';
import { parseRow, type SweInstance } from '../eval/dataset.ts';
import { isInfraFailure } from '../eval/outcome.ts';
import { runEval } from '../eval/run.ts';
import { scratchEnv } from '../eval/runtime/scratch.ts';
import type { Runtime } from '../eval/runtime/types.ts';
import type { HarnessName } from '../harnesses/types.ts';
import { DEFAULTS } from '../options/defaults.ts';
import { readBody } from '../proxy/body.ts';
import { limitBackend, Semaphore } from '../proxy/limits.ts';
import { log } from '../util/log.ts';
import {
  aggregateMetricsRequestSchema,
  type ResponseCreateParams,
  ROLLOUT_INDEX_KEY,
  responseCreateParamsSchema,
  runRequestSchema,
  TASK_INDEX_KEY,
} from './contract.ts';
import { aggregateMetrics } from './metrics.ts';
import { NonContiguousError, type RolloutOutput, rolloutOutput } from './rollout.ts';

export interface GymOptions {
  harness: HarnessName;
  backend: BackendOptions;
  /** an already created backend (tests inject one); default: createBackend(backend) */
  backendInstance?: Backend;
  runtime: Runtime;
  /** where the harness process runs: on this host, or inside the runtime's container */
  placement: 'host' | 'container';
  /** argv for --harness generic ({prompt} replaced) */
  genericCommand?: string[];
  /** prompt template when the row gives no input text ({{problem_statement}}, {{workdir}}, ...) */
  promptTemplate?: string;
  /** extra environment for every harness */
  harnessEnv?: Record<string, string>;
  /** profile options of the harness (e.g. { api: 'openai-responses' } for Pi) */
  harnessOptions?: Record<string, string>;
  /** instances a row may name by instance_id only */
  dataset?: SweInstance[];
  /** one folder per rollout (capture, patch, test log, results) */
  out: string;
  host?: string;
  port?: number;
  /** rollouts running at once; the rest wait */
  maxRollouts?: number;
  /** backend calls in flight at most, over all rollouts */
  maxInflight?: number;
  agentTimeoutMs?: number;
  testTimeoutMs?: number;
  maxBodyBytes?: number;
}

export interface Gym {
  url: string;
  close(): Promise<void>;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type = 'invalid_request_error',
  ) {
    super(message);
  }
}

type Json = Record<string, unknown>;

const RESPONSES_PATH = /^\/(?:ng-rollout\/[^/]+\/(?:training-token-capture\/)?)?v1\/responses$/;

export async function startGym(options: GymOptions): Promise<Gym> {
  const backend = limitBackend(
    options.backendInstance ?? (await createBackend(options.backend)),
    options.maxInflight ?? DEFAULTS.maxInflight.value,
  );
  const out = resolve(options.out);
  await mkdir(out, { recursive: true });
  const rollouts = new Semaphore(options.maxRollouts ?? DEFAULTS.maxRollouts.value);
  const byId = new Map((options.dataset ?? []).map((i) => [i.instance_id, i]));
  let counter = 0;

  const agentFor = (template: string): Agent =>
    new HarnessAgent({
      harness: options.harness,
      backend: options.backend,
      model: options.backend.model,
      placement: options.placement,
      promptTemplate: template,
      // every rollout shares the server's backend (and its in-flight bound); agents never close it
      createBackend: async () => backend,
      ...(options.genericCommand ? { genericCommand: options.genericCommand } : {}),
      ...(options.harnessEnv ? { env: options.harnessEnv } : {}),
      ...(options.harnessOptions ? { harnessOptions: options.harnessOptions } : {}),
    });

  const templateFor = (params: ResponseCreateParams): string =>
    promptText(params) || options.promptTemplate || PROMPT_TEMPLATES[options.harness];

  const rolloutDir = async (row: Json): Promise<string> => {
    const task = typeof row[TASK_INDEX_KEY] === 'number' ? `t${row[TASK_INDEX_KEY]}` : 't';
    const sample = typeof row[ROLLOUT_INDEX_KEY] === 'number' ? `r${row[ROLLOUT_INDEX_KEY]}` : 'r';
    const dir = join(out, `${task}-${sample}-${Date.now().toString(36)}-${(counter++).toString(36)}`);
    await mkdir(dir, { recursive: true });
    return dir;
  };

  /** runs the harness on an instance (graded or not) and converts its capture */
  const onInstance = async (
    instance: SweInstance,
    params: ResponseCreateParams,
    dir: string,
    grade: boolean,
  ) => {
    const outcome = await runEval({
      instances: [instance],
      agent: agentFor(templateFor(params)),
      runtime: options.runtime,
      out: dir,
      samples: 1,
      concurrency: 1,
      agentTimeoutMs: options.agentTimeoutMs ?? DEFAULTS.agentTimeoutMs.value,
      testTimeoutMs: options.testTimeoutMs ?? DEFAULTS.testTimeoutMs.value,
      resume: false,
      dataset: 'polar-gym',
      grade: grade ? 'polar' : 'none',
      progress: false,
    });
    const line = outcome.results[0];
    if (!line) throw new HttpError(500, 'the rollout produced no result', 'server_error');
    // an infrastructure failure is never a 0 reward (src/eval/outcome.ts)
    if (isInfraFailure(line)) throw new HttpError(502, `the rollout failed: ${line.reason}`, 'rollout_error');
    const capture = typeof line.capture === 'string' ? line.capture : null;
    return { line, capture, rollout: await convert(capture, line.reason) };
  };

  /** runs the harness in an empty scratch folder (a /v1/responses call naming no instance) */
  const onScratch = async (params: ResponseCreateParams, dir: string) => {
    const env = await scratchEnv();
    const pseudo: SweInstance = {
      instance_id: `gym-${Date.now().toString(36)}`,
      repo: 'polar/scratch',
      base_commit: '0000000',
      patch: '',
      test_patch: '',
      problem_statement: promptText(params),
      hints_text: '',
      created_at: '',
      version: '',
      FAIL_TO_PASS: [],
      PASS_TO_PASS: [],
    };
    try {
      const agent = await agentFor(templateFor(params)).run({
        instance: pseudo,
        sample: 0,
        env,
        timeoutMs: options.agentTimeoutMs ?? DEFAULTS.agentTimeoutMs.value,
        capturePath: join(dir, 'capture.jsonl'),
        meta: { dataset: 'polar-gym', runtime: 'scratch' },
      });
      return { capture: agent.capture, rollout: await convert(agent.capture, agent.error) };
    } finally {
      await env.dispose();
    }
  };

  const convert = async (capture: string | null, reason: string | null): Promise<RolloutOutput> => {
    const calls: CallRecord[] = [];
    if (capture) {
      for await (const { record } of readCapture(capture, { skipInvalid: true }))
        if (record.type === 'call') calls.push(record);
    }
    let rollout: RolloutOutput;
    try {
      rollout = rolloutOutput(calls);
    } catch (error) {
      if (error instanceof NonContiguousError)
        throw new HttpError(500, `polar built a non-contiguous chain: ${error.message}`, 'server_error');
      throw error;
    }
    if (rollout.main < 0) {
      throw new HttpError(
        502,
        `the rollout made no usable model call${reason ? ` (${reason})` : ''}${rollout.skipped.length ? `; ${rollout.skipped.slice(0, 3).join('; ')}` : ''}`,
        'rollout_error',
      );
    }
    return rollout;
  };

  const run = async (body: unknown): Promise<Json> => {
    const parsed = runRequestSchema.safeParse(body);
    if (!parsed.success) throw zodError(parsed.error);
    const row = body as Json;
    const params = parsed.data.responses_create_params;
    const instance = instanceOf(row, params, byId);
    if (!instance) {
      throw new HttpError(
        400,
        'the row names no SWE-bench instance: give verifier_metadata.instance (a SWE-bench row), or an instance_id of the --dataset in verifier_metadata or responses_create_params.metadata',
      );
    }
    const release = await rollouts.acquire();
    try {
      const dir = await rolloutDir(row);
      const { line, capture, rollout } = await onInstance(instance, params, dir, true);
      return {
        ...row,
        response: responseObject(params, rollout, options.backend.model, capture),
        reward: line.reward,
        resolved: line.resolved,
        status: line.status,
        reason: line.reason,
        ...traceFields(rollout),
        polar: {
          instance_id: instance.instance_id,
          capture,
          patch_file: line.patch_file,
          agent: line.agent,
          traces: rollout.traces,
          skipped_calls: rollout.skipped,
        },
      };
    } finally {
      release();
    }
  };

  const responses = async (body: unknown): Promise<Json> => {
    const parsed = responseCreateParamsSchema.safeParse(body);
    if (!parsed.success) throw zodError(parsed.error);
    const params = parsed.data;
    const instance = instanceOf({}, params, byId);
    if (!instance && options.runtime.isolated) {
      throw new HttpError(
        400,
        `/v1/responses without an instance would run the harness outside the ${options.runtime.kind} runtime: name one in metadata.instance_id`,
      );
    }
    const release = await rollouts.acquire();
    try {
      const dir = await rolloutDir({});
      const { capture, rollout } = instance
        ? await onInstance(instance, params, dir, false)
        : await onScratch(params, dir);
      return responseObject(params, rollout, options.backend.model, capture);
    } finally {
      release();
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? '/').split('?')[0]!;
    const method = req.method ?? 'GET';
    if (method === 'GET' && (path === '/health' || path === '/')) {
      req.resume();
      return send(res, 200, {
        ok: true,
        harness: options.harness,
        runtime: options.runtime.kind,
        rollouts_in_flight: rollouts.inflight,
        rollouts_queued: rollouts.queued,
      });
    }
    if (
      method !== 'POST' ||
      !(path === '/run' || path === '/aggregate_metrics' || RESPONSES_PATH.test(path))
    ) {
      req.resume();
      throw new HttpError(404, `no route for ${method} ${path}`, 'not_found_error');
    }
    const read = await readBody(req, options.maxBodyBytes ?? 256 * 1024 * 1024);
    if ('fault' in read) throw new HttpError(read.fault.status, read.fault.message);
    let body: unknown;
    try {
      body = JSON.parse(read.text);
    } catch {
      throw new HttpError(400, 'body is not valid JSON');
    }
    if (path === '/run') return send(res, 200, await run(body));
    if (path === '/aggregate_metrics') {
      const parsed = aggregateMetricsRequestSchema.safeParse(body);
      if (!parsed.success) throw zodError(parsed.error);
      return send(res, 200, aggregateMetrics(parsed.data.verify_responses));
    }
    return send(res, 200, await responses(body));
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error) => {
      const e =
        error instanceof HttpError
          ? error
          : PolarError.isInstance(error)
            ? new HttpError(400, (error as Error).message)
            : new HttpError(500, `polar gym: ${(error as Error)?.message ?? error}`, 'server_error');
      if (e.status >= 500) log.warn(`gym: ${req.method} ${req.url}: ${e.message}`);
      if (!res.headersSent) send(res, e.status, { error: { message: e.message, type: e.type } });
      else res.end();
    });
  });
  server.requestTimeout = 0;
  server.headersTimeout = 70_000;
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(options.port ?? 8200, options.host ?? '127.0.0.1', () => ok());
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}`,
    async close() {
      await new Promise<void>((ok) => {
        server.close(() => ok());
        server.closeIdleConnections();
      });
      if (!options.backendInstance) await backend.close();
    },
  };
}

/** The harness prompt a row gives: instructions plus the text of its input messages (empty: none). */
export function promptText(params: ResponseCreateParams): string {
  const parts: string[] = [];
  if (params.instructions) parts.push(params.instructions);
  if (typeof params.input === 'string') parts.push(params.input);
  else {
    for (const item of params.input as Json[]) {
      if (item.type !== undefined && item.type !== 'message') continue;
      if (item.role === 'assistant') continue;
      const content = item.content;
      if (typeof content === 'string') parts.push(content);
      else if (Array.isArray(content)) {
        for (const c of content as Json[]) if (typeof c.text === 'string') parts.push(c.text);
      }
    }
  }
  return parts.join('\n\n').trim();
}

/**
 * The row's SWE-bench instance: verifier_metadata.instance (a SWE-bench row), verifier_metadata itself
 * when it is one, or an instance_id (verifier_metadata.instance_id, responses_create_params.metadata
 * .instance_id) looked up in the --dataset.
 */
export function instanceOf(
  row: Json,
  params: ResponseCreateParams,
  dataset: Map<string, SweInstance>,
): SweInstance | null {
  const meta = (row.verifier_metadata ?? null) as Json | null;
  const candidate =
    meta && typeof meta.instance === 'object' && meta.instance !== null
      ? meta.instance
      : meta && typeof meta.base_commit === 'string'
        ? meta
        : null;
  if (candidate) return parseRow('verifier_metadata.instance', undefined, candidate);
  const id =
    (meta && typeof meta.instance_id === 'string' ? meta.instance_id : undefined) ??
    params.metadata?.instance_id;
  if (!id) return null;
  const found = dataset.get(id);
  if (!found) throw new HttpError(400, `instance ${id} is not in the --dataset of this server`);
  return found;
}

function traceFields(rollout: RolloutOutput): Json {
  const main = rollout.traces[rollout.main];
  return {
    // numeric top-level fields: NeMo Gym's aggregation turns them into mean/ max/ ... metrics
    polar_calls: rollout.calls.recorded,
    polar_usable_calls: rollout.calls.usable,
    polar_call_errors: rollout.calls.errors,
    polar_traces: rollout.traces.length,
    polar_main_calls: main?.calls ?? 0,
    polar_calls_outside_main: rollout.calls.outside_main,
    polar_compactions: rollout.traces.filter((t) => t.kind === 'compaction').length,
    polar_subagent_traces: rollout.traces.filter((t) => t.kind === 'subagent').length,
  };
}

function responseObject(
  params: ResponseCreateParams,
  rollout: RolloutOutput,
  model: string,
  capture: string | null,
): Json {
  const metadata: Record<string, string> = {
    polar_main_trace: String(rollout.main),
    polar_traces: String(rollout.traces.length),
  };
  if (capture) metadata.polar_capture = capture;
  return {
    id: `resp_polar_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    model: params.model ?? model,
    status: 'completed',
    output: rollout.output,
    parallel_tool_calls: params.parallel_tool_calls ?? true,
    tool_choice: params.tool_choice ?? 'auto',
    tools: params.tools ?? [],
    error: null,
    incomplete_details: null,
    instructions: params.instructions ?? null,
    metadata,
    temperature: params.temperature ?? null,
    top_p: params.top_p ?? null,
    usage: {
      input_tokens: rollout.usage.input_tokens,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: rollout.usage.output_tokens,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: rollout.usage.input_tokens + rollout.usage.output_tokens,
    },
  };
}

function zodError(error: import('zod').ZodError): HttpError {
  const { field, message } = firstIssue(error);
  return new HttpError(422, `${field}: ${message}`);
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
