/**
 * `--backend tokens`: polar owns the prompt. It renders the conversation with the model's chat
 * template, splices in the exact ids it sampled earlier (src/tokenizer/splice.ts), sends token ids to
 * the server and parses the sampled text back into reasoning, content and tool calls. The embedded
 * backend serves through the same TokenBackend with an in-process generator.
 */
import { UsageError } from '../errors.ts';
import type { CanonicalRequest, CanonicalResponse, StreamEvent, ToolCall } from '../protocols/canonical.ts';
import { fault, newId } from '../protocols/canonical.ts';
import { type ChatTokenizer, loadChatTokenizer, StreamDecoder } from '../tokenizer/chat-tokenizer.ts';
import { OutputParser, type ParsedEvent } from '../tokenizer/output-parser.ts';
import { type PreparedPrompt, prepareTokenPrompt, SpliceState, templateKwargs } from '../tokenizer/splice.ts';
import { StopStrings } from '../tokenizer/stop-strings.ts';
import { fitToContext } from './context-fit.ts';
import {
  type CompletionServer,
  GeneratorFault,
  HttpCompletions,
  type TokenGenerator,
} from './token-generator.ts';
import type { Backend, BackendOptions, CallContext } from './types.ts';

export interface TokenBackendOptions {
  kind: string;
  tokenizer: ChatTokenizer;
  generator: TokenGenerator;
  options: BackendOptions;
  /** splice sampled turns back in (default true; false = plain template re-rendering) */
  splice?: boolean;
}

export class TokenBackend implements Backend {
  readonly kind: string;
  readonly tokenExact = true;
  readonly url: string | null;
  readonly tokenizer: ChatTokenizer;
  readonly generator: TokenGenerator;
  private readonly options: BackendOptions;
  private readonly splice: boolean;
  private readonly stopIds: number[];
  private readonly stopSet: Set<number>;
  /** calls sampled so far (the --seed offset of the next one) */
  private sampled = 0;

  constructor(init: TokenBackendOptions) {
    this.kind = init.kind;
    this.tokenizer = init.tokenizer;
    this.generator = init.generator;
    this.url = init.generator.url;
    this.options = init.options;
    this.splice = init.splice ?? true;
    this.stopIds = init.tokenizer.stopTokenIds();
    this.stopSet = new Set(this.stopIds);
  }

  prepare(request: CanonicalRequest, context: CallContext, warnings: string[] = []): PreparedPrompt {
    return prepareTokenPrompt(request, this.tokenizer, SpliceState.of(context.sessionState), {
      kwargs: templateKwargs(request, this.options.chatTemplateKwargs),
      splice: this.splice,
      warnings,
    });
  }

  async countTokens(
    request: CanonicalRequest,
    context: CallContext,
  ): Promise<{ tokens: number; exact: boolean }> {
    return { tokens: this.prepare(request, context).ids.length, exact: true };
  }

  async close(): Promise<void> {
    await this.generator.close();
  }

  async *generate(request: CanonicalRequest, context: CallContext): AsyncIterable<StreamEvent> {
    const id = newId('cmpl');
    const model = request.model || this.options.model;
    yield { type: 'start', id, model };
    const { recorder } = context;
    try {
      const warnings: string[] = [];
      const prompt = this.prepare(request, context, warnings);
      for (const w of warnings) recorder.warn(w);
      annotatePrompt(recorder, prompt);
      const parser = new OutputParser({ startInReasoning: prompt.startsInReasoning, tools: request.tools });
      const toolCalls: ToolCall[] = [];
      const maxTokens = await this.fitMaxTokens(request, prompt, recorder);
      const sampled = yield* this.sample(request, context, prompt, parser, toolCalls, maxTokens);
      this.record(recorder, prompt, parser, sampled);
      const signature = this.remember(context, prompt, parser, toolCalls, sampled.ids);
      const response: CanonicalResponse = {
        id,
        model,
        content: parser.content,
        reasoning: parser.reasoning,
        toolCalls,
        finishReason: toolCalls.length > 0 ? 'tool_calls' : sampled.finishReason,
        usage: { promptTokens: prompt.ids.length, completionTokens: sampled.ids.length },
        reasoningSignature: signature,
      };
      yield { type: 'finish', response };
    } catch (error) {
      if (error instanceof GeneratorFault) yield { type: 'error', error: error.fault };
      else
        yield {
          type: 'error',
          error: fault('internal', `token backend: ${(error as Error)?.message ?? error}`),
        };
    }
  }

  /**
   * The harness's max tokens fitted to what the prompt leaves of the server's context (recorded in
   * `backend_info.max_tokens_fit`); a context-length fault when the prompt alone fills it.
   */
  private async fitMaxTokens(
    request: CanonicalRequest,
    prompt: PreparedPrompt,
    recorder: CallContext['recorder'],
  ): Promise<number> {
    const asked = request.maxTokens ?? this.options.maxTokens ?? 4096;
    const len = (await this.generator.maxModelLen?.()) ?? null;
    if (len === null) return asked;
    const fitted = fitToContext(asked, prompt.ids.length, len, 'prompt_ids');
    if ('fault' in fitted) throw new GeneratorFault(fitted.fault);
    if (fitted.fit) recorder.annotate('max_tokens_fit', fitted.fit);
    return fitted.maxTokens;
  }

  /**
   * Streams the generation: sampled ids decoded (stop ids left out), cut at a stop string, parsed into
   * reasoning, text and tool calls as they come; returns the sampled ids and how the generation ended.
   */
  private async *sample(
    request: CanonicalRequest,
    context: CallContext,
    prompt: PreparedPrompt,
    parser: OutputParser,
    toolCalls: ToolCall[],
    maxTokens: number,
  ): AsyncGenerator<StreamEvent, Sampled> {
    const { recorder } = context;
    const decoder = new StreamDecoder(this.tokenizer);
    const ids: number[] = [];
    const logprobs: (number | null)[] = [];
    const iterator = this.generator.generate(
      {
        promptIds: prompt.ids,
        maxTokens,
        temperature: request.temperature ?? this.options.temperature ?? 1,
        topP: request.topP ?? this.options.topP ?? 1,
        ...(this.options.seed !== undefined ? { seed: this.options.seed + this.sampled++ } : {}),
        stopTokenIds: this.stopIds,
        ...(request.stop?.length ? { stop: request.stop } : {}),
      },
      { signal: context.signal, recorder },
    );
    const stops = request.stop?.length ? new StopStrings(request.stop) : null;
    let result: { finishReason: 'stop' | 'length'; serverPromptIds: number[] | null };
    for (;;) {
      const outcome = await iterator.next();
      if (outcome.done) {
        result = outcome.value;
        break;
      }
      const chunk = outcome.value;
      for (let i = 0; i < chunk.ids.length; i++) {
        ids.push(chunk.ids[i]!);
        logprobs.push(chunk.logprobs[i] ?? null);
      }
      let text = decoder.push(chunk.ids.filter((t) => !this.stopSet.has(t)));
      if (stops) text = stops.push(text);
      if (text) yield* toStreamEvents(parser.push(text), toolCalls);
      if (stops?.hit != null) {
        // a stop string completed: end the generation here (the engine is told to stop); the ids
        // sampled so far, up to the token that completed it, are what the policy produced
        await iterator.return({ finishReason: 'stop', serverPromptIds: null });
        recorder.annotate('stop_string', { stop: stops.hit, after_tokens: ids.length });
        result = { finishReason: 'stop', serverPromptIds: null };
        break;
      }
    }
    let tail = decoder.flush();
    if (stops) tail = stops.hit != null ? '' : stops.push(tail) + stops.flush();
    if (tail) yield* toStreamEvents(parser.push(tail), toolCalls);
    yield* toStreamEvents(parser.end(), toolCalls);
    return { ids, logprobs, ...result };
  }

  /** Parse errors, a prompt the server saw differently, missing logprobs; then the call's token ids. */
  private record(
    recorder: CallContext['recorder'],
    prompt: PreparedPrompt,
    parser: OutputParser,
    sampled: Sampled,
  ): void {
    if (parser.errors.length > 0) {
      recorder.annotate('tool_parse_errors', parser.errors);
      recorder.warn(`${parser.errors.length} tool call(s) did not parse and were passed on as text`);
    }
    if (sampled.serverPromptIds && !sameIds(sampled.serverPromptIds, prompt.ids)) {
      recorder.warn('the server reports other prompt ids than polar sent');
    }
    const missingLogprob = sampled.logprobs.some((lp) => lp === null);
    if (missingLogprob) recorder.warn('the server returned no logprob for some sampled tokens');
    recorder.tokens({
      promptTokenIds: prompt.ids,
      completionTokenIds: sampled.ids,
      completionLogprobs: missingLogprob ? null : (sampled.logprobs as number[]),
    });
  }

  /** Keeps the sampled turn in the session's splice state; returns the signature minted for it. */
  private remember(
    context: CallContext,
    prompt: PreparedPrompt,
    parser: OutputParser,
    toolCalls: ToolCall[],
    ids: number[],
  ): string {
    const signature = newId('psig');
    const endsWithStop = ids.length > 0 && this.stopSet.has(ids[ids.length - 1]!);
    const imEnd = this.tokenizer.tokenId('<|im_end|>');
    const eotAdded = !endsWithStop && imEnd !== undefined;
    SpliceState.of(context.sessionState).add({
      callId: context.callId,
      content: parser.content,
      reasoning: parser.reasoning,
      toolCalls,
      signature,
      turnIds: [...prompt.headerIds, ...ids, ...(eotAdded ? [imEnd] : [])],
      promptIds: prompt.ids,
      completionIds: ids,
      eotAdded,
    });
    return signature;
  }
}

/** What one generation sampled, and how it ended. */
interface Sampled {
  ids: number[];
  logprobs: (number | null)[];
  finishReason: 'stop' | 'length';
  serverPromptIds: number[] | null;
}

function annotatePrompt(recorder: CallContext['recorder'], prompt: PreparedPrompt): void {
  recorder.annotate('prompt', {
    mode: prompt.splices.length > 0 ? 'spliced' : 'rendered',
    tokens: prompt.ids.length,
    extends_call: prompt.extendsCall,
    render_ms: round(prompt.renderMs),
    tokenize_ms: round(prompt.tokenizeMs),
    encoded_chars: prompt.encodedChars,
    rendered_chars: prompt.renderedChars,
    prompt_chars: prompt.text.length,
  });
  recorder.annotate('splices', prompt.splices);
  recorder.annotate('render_mismatches', prompt.mismatches);
}

/** Parsed output -> canonical stream events; each tool call (numbered in toolCalls) whole at once. */
function toStreamEvents(events: ParsedEvent[], toolCalls: ToolCall[]): StreamEvent[] {
  const out: StreamEvent[] = [];
  for (const event of events) {
    if (event.type === 'reasoning') out.push({ type: 'reasoning-delta', text: event.text });
    else if (event.type === 'text') out.push({ type: 'text-delta', text: event.text });
    else {
      const index = toolCalls.length;
      const call: ToolCall = { id: newId('call'), name: event.name, arguments: event.arguments };
      toolCalls.push(call);
      out.push({ type: 'tool-call-start', index, id: call.id, name: call.name });
      out.push({ type: 'tool-call-delta', index, arguments: call.arguments });
      out.push({ type: 'tool-call-end', index });
    }
  }
  return out;
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}

function sameIds(a: number[], b: number[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

/** which token API the server speaks: `server` wins, else a URL ending in /generate means SGLang */
export function completionServer(url: string, server?: CompletionServer): CompletionServer {
  if (server) return server;
  return /\/generate\/?$/.test(url) ? 'sglang' : 'vllm';
}

export async function createTokensBackend(
  options: BackendOptions & { server?: CompletionServer },
): Promise<Backend> {
  if (!options.url) {
    throw new UsageError(
      '--backend tokens needs --backend-url',
      'point it at a vLLM (http://host:8000) or SGLang (http://host:30000/generate) server',
    );
  }
  const source = options.tokenizer ?? options.model;
  if (!source) throw new UsageError('--backend tokens needs --tokenizer (a directory or a hub id)');
  const tokenizer = await loadChatTokenizer(source);
  const server = completionServer(options.url, options.server);
  // (HttpCompletions takes the server's root: rootUrl drops /generate, /v1 and the like)
  const generator = new HttpCompletions(server, options.url, options.model, {
    ...(options.apiKey ? { apiKey: options.apiKey } : {}),
    ...(options.timeoutMs ? { timeoutMs: options.timeoutMs } : {}),
    ...(options.idleTimeoutMs !== undefined ? { idleTimeoutMs: options.idleTimeoutMs } : {}),
  });
  return new TokenBackend({ kind: 'tokens', tokenizer, generator, options });
}
