/**
 * The rollouts a `polar gym` server runs: POST /run (a task row: run the harness on its SWE-bench
 * instance, grade, answer with the Responses object and the reward) and POST /v1/responses (the harness
 * on an instance or in a scratch folder, ungraded). Each rollout gets its own folder under --out and
 * waits for one of --max-rollouts slots.
 */
import { join } from 'node:path';
import type { BackendPool } from '../backends/pool.ts';
import type { Backend } from '../backends/types.ts';
import { readCapture } from '../capture/reader.ts';
import type { CallRecord } from '../capture/record.ts';
import { HttpError } from '../http/errors.ts';
import { DEFAULTS } from '../options/defaults.ts';
import { Semaphore } from '../proxy/limits.ts';
import { type Agent, HarnessAgent, PROMPT_TEMPLATES } from '../rollout/agents.ts';
import { parseRow, type RowOptions, type SweInstance } from '../rollout/dataset.ts';
import { isInfraFailure } from '../rollout/outcome.ts';
import { admitRow } from '../rollout/row-trust.ts';
import { runEval } from '../rollout/run/run.ts';
import { scratchEnv } from '../rollout/runtime/scratch.ts';
import { log } from '../util/log.ts';
import { mkdirPrivate } from '../util/private-files.ts';
import { insideDir } from '../util/safe-path.ts';
import { firstIssue } from '../util/zod.ts';
import { rowSampling, withRowSampling } from './backends.ts';
import {
  type ResponseCreateParams,
  ROLLOUT_INDEX_KEY,
  responseCreateParamsSchema,
  runRequestSchema,
  TASK_INDEX_KEY,
} from './contract.ts';
import { EMPTY_ROLLOUT, FAILURE_CLASS_KEY, failureRow, RolloutFailure } from './failure.ts';
import type { GymOptions } from './options.ts';
import { NonContiguousError, type RolloutOutput, rolloutOutput } from './rollout.ts';

type Json = Record<string, unknown>;

export class GymRollouts {
  readonly slots: Semaphore;
  private readonly byId: Map<string, SweInstance>;
  private counter = 0;

  constructor(
    private readonly options: GymOptions,
    private readonly pool: BackendPool,
    private readonly out: string,
  ) {
    this.slots = new Semaphore(options.maxRollouts ?? DEFAULTS.maxRollouts.value);
    this.byId = new Map((options.dataset ?? []).map((i) => [i.instance_id, i]));
  }

  /** POST /run: one graded rollout of a task row */
  async run(body: unknown): Promise<Json> {
    const parsed = runRequestSchema.safeParse(body);
    if (!parsed.success) throw zodError(parsed.error);
    const row = body as Json;
    const params = parsed.data.responses_create_params;
    const named = instanceOf(row, params, this.byId, {
      verifier: this.options.verifier !== undefined || this.options.rewards?.primary === 'judge',
    });
    if (!named) {
      throw new HttpError(
        400,
        'the row names no SWE-bench instance: give verifier_metadata.instance (a SWE-bench row), or an instance_id of the --dataset in verifier_metadata or responses_create_params.metadata',
      );
    }
    const instance = this.admit(named);
    return this.inSlot(async (backend) => {
      const dir = await this.rolloutDir(row);
      let done: Awaited<ReturnType<GymRollouts['onInstance']>>;
      try {
        done = await this.onInstance(instance, params, dir, true, backend);
      } catch (error) {
        if (!(error instanceof RolloutFailure)) throw error;
        const response = responseObject(params, EMPTY_ROLLOUT, this.options.backend.model, error.capture);
        return failureRow(row, response, instance.instance_id, error);
      }
      const { line, capture, rollout } = done;
      // a stale failure key echoed from the row must not send a success to Gym's failures sidecar
      const { [FAILURE_CLASS_KEY]: _stale, ...echoed } = row;
      return {
        ...echoed,
        response: responseObject(params, rollout, this.options.backend.model, capture),
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
    });
  }

  /** POST /v1/responses: the harness on the named instance, or in a scratch folder; not graded */
  async responses(body: unknown): Promise<Json> {
    const parsed = responseCreateParamsSchema.safeParse(body);
    if (!parsed.success) throw zodError(parsed.error);
    const params = parsed.data;
    const instance = instanceOf({}, params, this.byId);
    const runtime = this.options.runtime;
    if (!instance && runtime.isolated) {
      throw new HttpError(
        400,
        `/v1/responses without an instance would run the harness outside the ${runtime.kind} runtime: name one in metadata.instance_id`,
      );
    }
    return this.inSlot(async (backend) => {
      const dir = await this.rolloutDir({});
      try {
        const { capture, rollout } = instance
          ? await this.onInstance(instance, params, dir, false, backend)
          : await this.onScratch(params, dir, backend);
        return responseObject(params, rollout, this.options.backend.model, capture);
      } catch (error) {
        // an ungraded rollout is no row of a collection: its failure is an HTTP error
        if (error instanceof RolloutFailure)
          throw new HttpError(502, `the rollout failed: ${error.message}`, 'rollout_error');
        throw error;
      }
    });
  }

  /**
   * A row sent over HTTP is data: the fields that decide what runs or is installed are the operator's
   * (the rule: src/rollout/row-trust.ts). Refused (403, naming them) unless --trust-row-commands; a row
   * naming an instance of --dataset gets the dataset's.
   */
  private admit(instance: SweInstance): SweInstance {
    if (this.byId.get(instance.instance_id) === instance) return instance;
    const admitted = admitRow(instance, {
      trusted: this.options.trustRowCommands === true,
      dataset: this.byId,
    });
    if (!admitted.ok) {
      throw new HttpError(
        403,
        `verifier_metadata.instance sets ${admitted.fields.join(', ')}: what runs or is installed on this machine is the operator's; such a row runs only when polar gym is started with --trust-row-commands (or name an instance of --dataset by its instance_id, whose fields are then used)`,
        'permission_error',
      );
    }
    if (admitted.replaced.length > 0)
      log.info(
        `gym: instance ${instance.instance_id} is in --dataset: its ${admitted.replaced.join(', ')} taken from there, not from the row`,
      );
    return admitted.instance;
  }

  /** waits for a rollout slot, then runs `work` on one server of the pool (all its calls go there) */
  private async inSlot<T>(work: (backend: Backend) => Promise<T>): Promise<T> {
    const release = await this.slots.acquire();
    const server = this.pool.acquire();
    try {
      return await work(server.backend);
    } finally {
      server.release();
      release();
    }
  }

  /** the harness of one rollout: every call on `backend`, sampled with the row's parameters */
  private agentFor(params: ResponseCreateParams, backend: Backend): Agent {
    const sampled = withRowSampling(backend, rowSampling(params));
    const o = this.options;
    return new HarnessAgent({
      harness: o.harness,
      backend: o.backend,
      model: o.backend.model,
      placement: o.placement,
      promptTemplate: promptText(params) || o.promptTemplate || PROMPT_TEMPLATES[o.harness],
      // the pool's backend (and its in-flight bound) for this rollout; agents never close it
      backendInstance: sampled,
      ...(o.genericCommand ? { genericCommand: o.genericCommand } : {}),
      ...(o.harnessEnv ? { env: o.harnessEnv } : {}),
      ...(o.harnessOptions ? { harnessOptions: o.harnessOptions } : {}),
      ...(o.passEnv ? { passEnv: o.passEnv } : {}),
    });
  }

  private async rolloutDir(row: Json): Promise<string> {
    const index = (v: unknown) => (Number.isSafeInteger(v) && (v as number) >= 0 ? String(v) : '');
    const task = `t${index(row[TASK_INDEX_KEY])}`;
    const sample = `r${index(row[ROLLOUT_INDEX_KEY])}`;
    const name = `${task}-${sample}-${Date.now().toString(36)}-${(this.counter++).toString(36)}`;
    const dir = insideDir(this.out, name);
    await mkdirPrivate(dir);
    return dir;
  }

  /** runs the harness on an instance (graded or not) and converts its capture */
  private async onInstance(
    instance: SweInstance,
    params: ResponseCreateParams,
    dir: string,
    grade: boolean,
    backend: Backend,
  ) {
    const outcome = await runEval({
      instances: [instance],
      agent: this.agentFor(params, backend),
      runtime: this.options.runtime,
      out: dir,
      samples: 1,
      concurrency: 1,
      agentTimeoutMs: this.options.agentTimeoutMs ?? DEFAULTS.agentTimeoutMs.value,
      testTimeoutMs: this.options.testTimeoutMs ?? DEFAULTS.testTimeoutMs.value,
      rejectTampering: this.options.rejectTampering ?? DEFAULTS.trainingRejectsTampering.value,
      resume: false,
      dataset: 'polar-gym',
      grade: grade ? 'polar' : 'none',
      progress: false,
      ...(this.options.verifier ? { verifier: this.options.verifier } : {}),
      ...(grade && this.options.rewards ? { rewards: this.options.rewards } : {}),
    });
    const line = outcome.results[0];
    if (!line) throw new HttpError(500, 'the rollout produced no result', 'server_error');
    const capture = typeof line.capture === 'string' ? line.capture : null;
    // an infrastructure failure is never a 0 reward (src/rollout/outcome.ts)
    if (isInfraFailure(line)) throw new RolloutFailure('transient', String(line.reason), capture);
    return { line, capture, rollout: await convert(capture, line.reason) };
  }

  /** runs the harness in an empty scratch folder (a /v1/responses call naming no instance) */
  private async onScratch(params: ResponseCreateParams, dir: string, backend: Backend) {
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
      const agent = await this.agentFor(params, backend).run({
        instance: pseudo,
        sample: 0,
        env,
        timeoutMs: this.options.agentTimeoutMs ?? DEFAULTS.agentTimeoutMs.value,
        capturePath: join(dir, 'capture.jsonl'),
        meta: { dataset: 'polar-gym', runtime: 'scratch' },
      });
      return { capture: agent.capture, rollout: await convert(agent.capture, agent.error) };
    } finally {
      await env.dispose();
    }
  }
}

/** A rollout's capture as Responses output items; a rollout without a usable call is a RolloutFailure. */
async function convert(capture: string | null, reason: string | null): Promise<RolloutOutput> {
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
      throw new RolloutFailure(
        'non_contiguous',
        `polar built a non-contiguous chain: ${error.message}`,
        capture,
      );
    throw error;
  }
  if (rollout.main < 0) {
    const skipped = rollout.skipped.length ? `; ${rollout.skipped.slice(0, 3).join('; ')}` : '';
    throw new RolloutFailure(
      'no_trainable_call',
      `the rollout made no usable model call${reason ? ` (${reason})` : ''}${skipped}`,
      capture,
    );
  }
  return rollout;
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
  rows: RowOptions = {},
): SweInstance | null {
  const meta = (row.verifier_metadata ?? null) as Json | null;
  const candidate =
    meta && typeof meta.instance === 'object' && meta.instance !== null
      ? meta.instance
      : meta && typeof meta.base_commit === 'string'
        ? meta
        : null;
  if (candidate) return parseRow('verifier_metadata.instance', undefined, candidate, rows);
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
    polar_calls_hung_up: rollout.calls.hung_up,
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

export function zodError(error: import('zod').ZodError): HttpError {
  const { field, message } = firstIssue(error);
  return new HttpError(422, `${field}: ${message}`);
}
