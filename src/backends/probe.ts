/**
 * The server set-up check, run before any harness time is spent (`polar doctor --backend ...` prints
 * it): the server answers and speaks the expected API, the model is served, token ids come back, tool
 * calling is enabled, which reasoning parser is on and the logprobs mode, when the server says. A wrong
 * set-up is one PolarError naming the server flag to add (assertProbe).
 *
 * Sources (../shared/reference/real-servers.md): vLLM answers every request with tools 400 unless started
 * with `--enable-auto-tool-choice --tool-call-parser NAME` (chat_completion/serving.py); its default
 * `--logprobs-mode raw_logprobs` is before temperature/top-p, the sampling distribution TIS needs is
 * `processed_logprobs`; SGLang without `--tool-call-parser` returns tool calls as plain text, and its
 * `/get_server_info` lists its server args (`tool_call_parser`, `reasoning_parser`); NeMo RL's server has
 * only /v1/chat/completions and /tokenize and asserts the generation config's temperature and top_p.
 */
import { EXIT, PolarError } from '../errors.ts';
import { redactUrl } from '../util/redact.ts';
import { authHeaders, errorDetail, getJson, postJson } from './http.ts';
import { listModels, rootUrl } from './server-info.ts';
import type { BackendOptions } from './types.ts';

export type CheckStatus = 'ok' | 'warn' | 'fail' | 'skip';

export interface ProbeCheck {
  name: 'server' | 'model' | 'context' | 'token_ids' | 'tool_calling' | 'reasoning_parser' | 'logprobs_mode';
  status: CheckStatus;
  detail: string;
  /** the server flag or polar option that fixes a failed or doubtful check */
  fix?: string;
}

export interface ProbeReport {
  backend: BackendOptions['kind'];
  url: string | null;
  model: string;
  ok: boolean;
  maxModelLen: number | null;
  checks: ProbeCheck[];
}

const TIMEOUT = 20_000;

/** Probes the server behind `options`; never throws (an unreachable server is a failed check). */
export async function probeBackend(options: BackendOptions): Promise<ProbeReport> {
  const report: ProbeReport = {
    backend: options.kind,
    url: options.url ? redactUrl(options.url) : null,
    model: options.model,
    ok: true,
    maxModelLen: null,
    checks: [],
  };
  if (options.kind === 'embedded' || !options.url) {
    report.checks.push({ name: 'server', status: 'ok', detail: 'in-process engine: nothing to probe' });
    return report;
  }
  const probe = new Probe(options, report);
  if (options.kind === 'nemo-rl') await probe.nemoRl();
  else if (await probe.models()) {
    if (options.kind === 'tokens') await probe.tokenPath();
    else if (options.kind === 'openai') probe.textOnly();
    else await probe.chat();
    if (options.kind === 'sglang') await probe.sglangArgs();
    if (options.kind === 'vllm') await probe.vllmArgs();
  }
  if (options.requireTokenIds === false) {
    // --no-require-token-ids: a server without ids is what the user asked for
    for (const c of report.checks) if (c.name === 'token_ids' && c.status === 'fail') c.status = 'warn';
  }
  report.ok = report.checks.every((c) => c.status !== 'fail');
  return report;
}

class Probe {
  private readonly headers: Record<string, string>;
  private readonly root: string;

  constructor(
    private readonly options: BackendOptions,
    private readonly report: ProbeReport,
  ) {
    this.headers = authHeaders(options.apiKey);
    this.root = rootUrl(options.url!);
  }

  private add(check: ProbeCheck): void {
    this.report.checks.push(check);
  }

  /** GET /v1/models: the server answers, speaks the OpenAI API, serves the model, its context. */
  async models(): Promise<boolean> {
    const listed = await listModels(this.root, { headers: this.headers, timeoutMs: TIMEOUT });
    if (!listed.ok) {
      this.add({
        name: 'server',
        status: 'fail',
        detail: `${this.root}/v1/models: ${listed.message}`,
        fix:
          listed.status === 401
            ? '--api-key KEY'
            : 'start the server, or point --backend-url at its API (http://HOST:PORT/v1)',
      });
      return false;
    }
    this.add({ name: 'server', status: 'ok', detail: `${this.root}/v1/models answers` });
    const served = listed.models.map((m) => m.id);
    const card = listed.models.find((m) => m.id === this.options.model);
    if (!card) {
      this.add({
        name: 'model',
        status: 'fail',
        detail: `the server serves ${served.join(', ') || 'no model'}, not ${this.options.model}`,
        fix: `--model ${served[0] ?? 'NAME'} (or start the server with --served-model-name ${this.options.model})`,
      });
      return false;
    }
    this.add({ name: 'model', status: 'ok', detail: `${card.id} is served` });
    this.context(card.maxModelLen);
    return true;
  }

  private context(len: number | null): void {
    this.report.maxModelLen = len;
    this.add(
      len === null
        ? {
            name: 'context',
            status: 'warn',
            detail: 'the server does not state its context length; its own 400s decide',
          }
        : {
            name: 'context',
            status: 'ok',
            detail: `max_model_len ${len}: a harness's max_tokens is fitted to what the prompt leaves`,
          },
    );
  }

  private async post(
    path: string,
    body: unknown,
  ): Promise<{ status: number; json: unknown; text: string } | string> {
    const outcome = await postJson(`${this.root}${path}`, body, {
      signal: AbortSignal.timeout(TIMEOUT),
      timeoutMs: TIMEOUT,
      headers: this.headers,
    });
    if (outcome.ok) {
      const text = await outcome.response.text();
      try {
        return { status: outcome.response.status, json: JSON.parse(text), text };
      } catch {
        return `${this.root}${path} answered ${errorDetail(text)}, not JSON`;
      }
    }
    return outcome.fault.message;
  }

  private chatBody(extra: Record<string, unknown>): Record<string, unknown> {
    return {
      model: this.options.model,
      messages: [{ role: 'user', content: 'Say OK.' }],
      max_tokens: 1,
      stream: false,
      ...extra,
    };
  }

  /** vLLM / SGLang chat: token ids on a one-token answer, then tool calling with one dummy tool. */
  async chat(): Promise<void> {
    const vllm = this.options.kind === 'vllm';
    const flags = vllm
      ? { return_token_ids: true, logprobs: true, top_logprobs: 0 }
      : { return_prompt_token_ids: true, return_meta_info: true, logprobs: true, top_logprobs: 0 };
    const got = await this.post('/v1/chat/completions', this.chatBody(flags));
    if (typeof got === 'string') {
      this.add({ name: 'token_ids', status: 'fail', detail: got });
      return;
    }
    const raw = got.json as {
      prompt_token_ids?: unknown;
      choices?: {
        token_ids?: unknown;
        prompt_token_ids?: unknown;
        meta_info?: { output_token_logprobs?: unknown };
      }[];
    };
    const choice = raw.choices?.[0];
    const prompt = raw.prompt_token_ids ?? choice?.prompt_token_ids;
    const completion = choice?.token_ids ?? choice?.meta_info?.output_token_logprobs;
    this.add(
      Array.isArray(prompt) && Array.isArray(completion)
        ? {
            name: 'token_ids',
            status: 'ok',
            detail: `prompt and completion ids come back (${prompt.length} prompt tokens)`,
          }
        : {
            name: 'token_ids',
            status: 'fail',
            detail: 'the answer carries no prompt or completion token ids',
            fix: vllm
              ? 'vLLM 0.10.2 or later (return_token_ids), or --backend openai for text-only capture'
              : 'an SGLang with return_prompt_token_ids / return_meta_info (PR #19731), or --backend tokens with its /generate',
          },
    );
    if (vllm) await this.vllmTools();
  }

  private async vllmTools(): Promise<void> {
    const tool = {
      type: 'function',
      function: { name: 'noop', description: 'no-op', parameters: { type: 'object', properties: {} } },
    };
    const got = await this.post('/v1/chat/completions', this.chatBody({ tools: [tool] }));
    const message = typeof got === 'string' ? got : '';
    if (/enable-auto-tool-choice|tool-call-parser/.test(message)) {
      this.add({
        name: 'tool_calling',
        status: 'fail',
        detail: 'requests with tools are refused (auto tool choice is off)',
        fix: 'restart vLLM with --enable-auto-tool-choice --tool-call-parser hermes (the parser for your model; hermes for Qwen3, qwen3_coder for Qwen3-Coder)',
      });
    } else if (message) {
      this.add({ name: 'tool_calling', status: 'warn', detail: `a request with tools failed: ${message}` });
    } else {
      this.add({ name: 'tool_calling', status: 'ok', detail: 'requests with tools are accepted' });
    }
  }

  /** vLLM states its config only in dev mode (`VLLM_SERVER_DEV_MODE=1`: GET /server_info). */
  async vllmArgs(): Promise<void> {
    const got = await getJson(`${this.root}/server_info`, { timeoutMs: TIMEOUT, headers: this.headers });
    const text = got.ok ? JSON.stringify(got.json) : '';
    const reasoning = /reasoning_parser\W+([A-Za-z0-9_-]*)/.exec(text)?.[1];
    const mode = /logprobs_mode\W+(?:LogprobsMode\.)?([a-z_]+)/i.exec(text)?.[1]?.toLowerCase();
    this.reasoning(reasoning, '--reasoning-parser qwen3');
    if (mode === undefined) {
      this.add({
        name: 'logprobs_mode',
        status: 'warn',
        detail: 'unknown (vLLM does not report it); its default raw_logprobs is before temperature and top-p',
        fix: 'for truncated importance sampling start vLLM with --logprobs-mode processed_logprobs',
      });
    } else {
      const ok = mode === 'processed_logprobs';
      this.add({
        name: 'logprobs_mode',
        status: ok ? 'ok' : 'warn',
        detail: `${mode}${ok ? ' (the sampling distribution)' : ': not the sampling distribution'}`,
        ...(ok ? {} : { fix: '--logprobs-mode processed_logprobs (for truncated importance sampling)' }),
      });
    }
  }

  private reasoning(parser: string | undefined | null, flag: string): void {
    if (parser === undefined) {
      this.add({
        name: 'reasoning_parser',
        status: 'skip',
        detail: 'unknown (the server does not report it)',
      });
    } else if (!parser) {
      this.add({
        name: 'reasoning_parser',
        status: 'warn',
        detail: "none: a thinking model's reasoning comes back inside the content",
        fix: `${flag} (for thinking models)`,
      });
    } else this.add({ name: 'reasoning_parser', status: 'ok', detail: parser });
  }

  /** SGLang lists its server args at /get_server_info (`/server_info` on newer versions). */
  async sglangArgs(): Promise<void> {
    let info: Record<string, unknown> | null = null;
    for (const path of ['/get_server_info', '/server_info']) {
      const got = await getJson(`${this.root}${path}`, { timeoutMs: TIMEOUT, headers: this.headers });
      if (got.ok && got.json && typeof got.json === 'object') {
        info = got.json as Record<string, unknown>;
        break;
      }
    }
    if (!info) {
      this.add({ name: 'tool_calling', status: 'warn', detail: 'unknown: /get_server_info did not answer' });
      return;
    }
    if (this.options.kind === 'sglang') {
      const parser = info.tool_call_parser;
      this.add(
        parser
          ? { name: 'tool_calling', status: 'ok', detail: `tool call parser ${String(parser)}` }
          : {
              name: 'tool_calling',
              status: 'fail',
              detail: 'no tool call parser: tool calls would come back as plain text',
              fix: 'restart SGLang with --tool-call-parser qwen25 (the parser for your model)',
            },
      );
    }
    this.reasoning((info.reasoning_parser as string | null | undefined) ?? null, '--reasoning-parser qwen3');
  }

  /** --backend tokens: one token through /v1/completions (vLLM) or /generate (SGLang). */
  async tokenPath(): Promise<void> {
    const sglang = /\/generate\/?$/.test(this.options.url ?? '');
    const got = sglang
      ? await this.post('/generate', {
          input_ids: [9707],
          sampling_params: { max_new_tokens: 1 },
          return_logprob: true,
        })
      : await this.post('/v1/completions', {
          model: this.options.model,
          prompt: [9707],
          max_tokens: 1,
          return_token_ids: true,
          logprobs: 1,
        });
    if (typeof got === 'string') {
      this.add({ name: 'token_ids', status: 'fail', detail: got });
      return;
    }
    const raw = got.json as {
      choices?: { token_ids?: unknown }[];
      meta_info?: { output_token_logprobs?: unknown };
    };
    const ids = sglang ? raw.meta_info?.output_token_logprobs : raw.choices?.[0]?.token_ids;
    this.add(
      Array.isArray(ids)
        ? { name: 'token_ids', status: 'ok', detail: 'sampled ids and logprobs come back' }
        : {
            name: 'token_ids',
            status: 'fail',
            detail: `${sglang ? '/generate' : '/v1/completions'} returned no token ids`,
            fix: sglang ? 'an SGLang with return_logprob' : 'vLLM 0.10.2 or later (return_token_ids)',
          },
    );
    this.add({
      name: 'tool_calling',
      status: 'ok',
      detail: 'polar renders tools and parses tool calls itself',
    });
  }

  textOnly(): void {
    this.add({ name: 'token_ids', status: 'warn', detail: 'text only: records say token_exact false' });
  }

  /** NeMo RL: /tokenize (reachability, context), then one token with the run's temperature and top_p. */
  async nemoRl(): Promise<void> {
    const messages = [{ role: 'user', content: 'Say OK.' }];
    const counted = await this.post('/tokenize', {
      model: this.options.model,
      messages,
      add_generation_prompt: true,
    });
    const tokenize =
      typeof counted === 'string' ? null : (counted.json as { max_model_len?: unknown; count?: unknown });
    if (!tokenize || typeof tokenize.count !== 'number') {
      const detail =
        typeof counted === 'string'
          ? counted
          : `${this.root}/tokenize answered ${counted.text.slice(0, 200)}`;
      this.add({
        name: 'server',
        status: 'fail',
        detail,
        fix: "point --backend-url at NeMo RL's generation server (the policy_base_url it hands to Gym)",
      });
      return;
    }
    this.add({ name: 'server', status: 'ok', detail: `${this.root}/tokenize answers` });
    this.context(typeof tokenize.max_model_len === 'number' ? tokenize.max_model_len : null);
    const temperature = this.options.temperature ?? 1;
    const topP = this.options.topP ?? 1;
    const got = await this.post(
      '/v1/chat/completions',
      this.chatBody({
        temperature,
        top_p: topP,
        logprobs: true,
        top_logprobs: 0,
        return_tokens_as_token_ids: true,
      }),
    );
    if (typeof got === 'string') {
      const assertion = /answered 500/.test(got);
      this.add({
        name: 'token_ids',
        status: 'fail',
        detail: assertion ? `the server refused temperature ${temperature}, top_p ${topP} (${got})` : got,
        ...(assertion
          ? {
              fix: "--temperature and --top-p equal to NeMo RL's policy.generation.temperature and top_p (the server asserts them)",
            }
          : {}),
      });
      return;
    }
    const message = (
      got.json as { choices?: { message?: { prompt_token_ids?: unknown; generation_token_ids?: unknown } }[] }
    ).choices?.[0]?.message;
    this.add(
      Array.isArray(message?.prompt_token_ids) && Array.isArray(message?.generation_token_ids)
        ? { name: 'token_ids', status: 'ok', detail: 'prompt_token_ids and generation_token_ids come back' }
        : {
            name: 'token_ids',
            status: 'fail',
            detail:
              "no prompt_token_ids / generation_token_ids on choices[0].message: not NeMo RL's generation server?",
          },
    );
  }
}

const MARK: Record<CheckStatus, string> = { ok: 'ok  ', warn: 'warn', fail: 'FAIL', skip: '-   ' };

/** The report as lines: one per check, with the fix under each doubtful one. */
export function formatProbeReport(report: ProbeReport): string {
  const head = `backend ${report.backend} at ${report.url ?? '(in process)'}, model ${report.model}: ${report.ok ? 'ready' : 'NOT READY'}`;
  const lines = [head];
  for (const c of report.checks) {
    lines.push(`  ${MARK[c.status]} ${c.name.padEnd(16)} ${c.detail}`);
    if (c.fix && c.status !== 'ok') lines.push(`       ${''.padEnd(16)} fix: ${c.fix}`);
  }
  return lines.join('\n');
}

/** A server set up wrong: the first failed check, with the flag that fixes it. */
export class BackendSetupError extends PolarError {
  constructor(
    readonly report: ProbeReport,
    check: ProbeCheck,
  ) {
    super(`${report.backend} server at ${report.url}: ${check.name}: ${check.detail}`, {
      exitCode: EXIT.environment,
      ...(check.fix ? { hint: check.fix } : {}),
    });
  }
}

/** Throws BackendSetupError for a report with a failed check. */
export function assertProbe(report: ProbeReport): void {
  const failed = report.checks.find((c) => c.status === 'fail');
  if (failed) throw new BackendSetupError(report, failed);
}
