/**
 * `--backend embedded` (the default): an in-process engine on Transformers.js + onnxruntime-node.
 * The model runs in a worker thread (worker.ts); this side implements the same TokenGenerator the
 * HTTP token backend uses, so prompt rendering, splicing and tool-call parsing are shared
 * (src/backends/tokens.ts).
 *
 * `reload(dir)` swaps the model in place (the loop serves each new checkpoint this way): the new model is
 * loaded while calls go on, and swapped in at its place in the call queue, so calls started before the
 * reload finish on the old weights and later calls use the new ones. The tokenizer is kept.
 */
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import { Worker } from 'node:worker_threads';
import { EnvironmentError } from '../../errors.ts';
import { DEFAULTS } from '../../options/defaults.ts';
import { isLocalPath, loadChatTokenizer } from '../../tokenizer/chat-tokenizer.ts';
import { log } from '../../util/log.ts';
import {
  type GenerateOutcome,
  type GenerateParams,
  type GeneratorContext,
  GeneratorFault,
  type TokenChunk,
  type TokenGenerator,
} from '../token-generator.ts';
import { TokenBackend } from '../tokens.ts';
import type { Backend, BackendOptions } from '../types.ts';
import type {
  CloseMessage,
  GenerateMessage,
  InitMessage,
  LoadMessage,
  SwapMessage,
  WorkerReply,
} from './worker.ts';

/** A small instruct model with a Transformers.js ONNX export, fetched into the Transformers.js cache on first use. */
export const DEFAULT_EMBEDDED_MODEL = DEFAULTS.embeddedModel.value;

export interface EmbeddedOptions {
  /** model directory (absolute or ./relative) or hub id */
  source: string;
  /** ONNX weights variant: fp32, fp16, q8, q4, q4f16 (default: fp32 for a local dir, q4 for a hub id) */
  dtype?: string;
  /** cpu (default) or cuda (falls back to cpu when the CUDA execution provider is missing) */
  device?: string;
  threads?: number;
  allowRemote?: boolean;
  cacheDir?: string;
}

type Pending = {
  push: (chunk: TokenChunk) => void;
  done: (finish: 'stop' | 'length') => void;
  fail: (error: GeneratorFault) => void;
};

function workerBootstrap(): string {
  // the worker is TypeScript: register tsx inside it, whatever way the parent was started
  const tsx = import.meta.resolve('tsx/esm/api');
  const target = new URL('./worker.ts', import.meta.url).href;
  return `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(target)}); });`;
}

export class EmbeddedGenerator implements TokenGenerator {
  readonly kind = 'embedded';
  url: string;
  /** the model being served (changes on reload) */
  model: string;
  device = 'cpu';
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private queue: Promise<void> = Promise.resolve();
  private dead: string | null = null;
  private readonly ready: Promise<void>;
  private readonly controls = new Map<number, { ok: () => void; fail: (message: string) => void }>();
  /** the abort flag of each generation the worker may still be running */
  private readonly aborts = new Map<number, Int32Array>();
  private closing: Promise<void> | null = null;
  private onClosed: (() => void) | null = null;

  constructor(options: EmbeddedOptions) {
    this.model = options.source;
    this.url = `embedded://${options.source}`;
    this.worker = new Worker(workerBootstrap(), { eval: true });
    this.worker.unref();
    this.ready = new Promise((resolveReady, rejectReady) => {
      this.worker.on('message', (reply: WorkerReply) => {
        if (reply.type === 'closed') this.onClosed?.();
        else if (reply.type === 'ready') {
          this.device = reply.device;
          for (const w of reply.warnings) log.warn(w);
          resolveReady();
        } else if (reply.type === 'init-error') {
          rejectReady(
            new EnvironmentError(`could not load the embedded model ${options.source}: ${reply.message}`),
          );
        } else this.onReply(reply);
      });
      this.worker.on('error', (error) => {
        this.dead = error.message;
        rejectReady(new EnvironmentError(`the embedded engine failed: ${error.message}`));
        for (const p of this.pending.values()) p.fail(new GeneratorFault('backend_error', error.message));
        this.pending.clear();
        this.failControls(error.message);
      });
      this.worker.on('exit', (code) => {
        this.dead ??= `worker exited with code ${code}`;
        rejectReady(new EnvironmentError(`the embedded engine stopped: ${this.dead}`));
        for (const p of this.pending.values()) p.fail(new GeneratorFault('backend_error', this.dead));
        this.pending.clear();
        this.failControls(this.dead);
        this.onClosed?.();
      });
    });
    const local = isLocalPath(options.source);
    const init: InitMessage = {
      type: 'init',
      source: local ? resolve(options.source) : options.source,
      local,
      allowRemote: options.allowRemote ?? process.env.POLAR_OFFLINE !== '1',
      dtype: options.dtype ?? (local ? 'fp32' : 'q4'),
      device: options.device ?? 'cpu',
      threads: options.threads ?? Math.max(1, Math.floor(availableParallelism() / 2)),
      ...(options.cacheDir ? { cacheDir: options.cacheDir } : {}),
    };
    this.worker.ref();
    this.worker.postMessage(init);
    this.ready.then(
      () => this.maybeUnref(),
      () => {},
    );
  }

  /** resolves once the model is loaded; rejects with an EnvironmentError when it cannot be */
  load(): Promise<void> {
    return this.ready;
  }

  /** the worker keeps the process alive only while a call, a reload or the close is outstanding */
  private maybeUnref(): void {
    if (this.pending.size === 0 && this.controls.size === 0 && !this.closing) this.worker.unref();
  }

  private failControls(message: string): void {
    for (const c of this.controls.values()) c.fail(message);
    this.controls.clear();
  }

  /** sends a load/swap message; resolves on its reply */
  private control(message: LoadMessage | SwapMessage): Promise<void> {
    return new Promise((ok, fail) => {
      if (this.dead || this.closing) {
        fail(new Error(this.dead ?? 'the backend closed'));
        return;
      }
      this.controls.set(message.id, { ok, fail: (m) => fail(new Error(m)) });
      this.worker.ref();
      this.worker.postMessage(message);
    });
  }

  /**
   * Serves `source` (a model directory, e.g. one written by `polar export`, or a hub id) from now on:
   * loads it beside the current model, then swaps it in after the calls already queued; rejects with an
   * EnvironmentError (and keeps the old model) when it cannot be loaded.
   */
  async reload(source: string): Promise<void> {
    await this.ready;
    const local = isLocalPath(source);
    const id = this.nextId++;
    const loaded = this.control({ type: 'load', id, source: local ? resolve(source) : source, local });
    loaded.catch(() => {});
    let release!: () => void;
    const previous = this.queue;
    this.queue = new Promise((r) => {
      release = r;
    });
    try {
      await previous;
      try {
        await loaded;
      } catch (error) {
        throw new EnvironmentError(
          `could not reload the embedded model from ${source}: ${(error as Error).message}`,
          'the previous model is still being served',
        );
      }
      await this.control({ type: 'swap', id });
      this.model = source;
      this.url = `embedded://${source}`;
    } finally {
      release();
      this.maybeUnref();
    }
  }

  private onReply(
    reply: Exclude<WorkerReply, { type: 'ready' } | { type: 'init-error' } | { type: 'closed' }>,
  ): void {
    if (reply.type === 'loaded' || reply.type === 'load-error' || reply.type === 'swapped') {
      const c = this.controls.get(reply.id);
      this.controls.delete(reply.id);
      if (reply.type === 'load-error') c?.fail(reply.message);
      else c?.ok();
      this.maybeUnref();
      return;
    }
    const p = this.pending.get(reply.id);
    if (!p) return;
    if (reply.type === 'tokens') p.push({ ids: reply.ids, logprobs: reply.logprobs });
    else if (reply.type === 'done') p.done(reply.finishReason);
    else p.fail(new GeneratorFault('backend_error', `embedded generation failed: ${reply.message}`));
  }

  async *generate(
    params: GenerateParams,
    context: GeneratorContext,
  ): AsyncGenerator<TokenChunk, GenerateOutcome> {
    const seed = params.seed ?? Math.floor(Math.random() * 2 ** 31);
    context.recorder.backendRequest(this.url, {
      model: this.model,
      prompt: params.promptIds,
      max_tokens: params.maxTokens,
      temperature: params.temperature,
      top_p: params.topP,
      ...(params.topK !== undefined ? { top_k: params.topK } : {}),
      seed,
      stop_token_ids: params.stopTokenIds,
    });
    await this.ready;
    // one generation at a time per worker: wait for the ones before
    let release!: () => void;
    const previous = this.queue;
    this.queue = new Promise((r) => {
      release = r;
    });
    await previous;
    const abort = new SharedArrayBuffer(4);
    const flag = new Int32Array(abort);
    const onAbort = () => Atomics.store(flag, 0, 1);
    if (context.signal.aborted) onAbort();
    context.signal.addEventListener('abort', onAbort, { once: true });
    const chunks: TokenChunk[] = [];
    let finish: 'stop' | 'length' | null = null;
    let failure: GeneratorFault | null = null;
    let wake: (() => void) | null = null;
    const notify = () => {
      wake?.();
      wake = null;
    };
    const id = this.nextId++;
    try {
      if (this.dead) throw new GeneratorFault('backend_error', `the embedded engine stopped: ${this.dead}`);
      if (this.closing) throw new GeneratorFault('backend_error', 'the backend closed');
      this.aborts.set(id, flag);
      this.pending.set(id, {
        push: (chunk) => {
          chunks.push(chunk);
          notify();
        },
        done: (reason) => {
          finish = reason;
          notify();
        },
        fail: (error) => {
          failure = error;
          notify();
        },
      });
      const message: GenerateMessage = {
        type: 'generate',
        id,
        promptIds: params.promptIds,
        maxTokens: params.maxTokens,
        temperature: params.temperature,
        topP: params.topP,
        ...(params.topK !== undefined ? { topK: params.topK } : {}),
        seed,
        stopTokenIds: params.stopTokenIds,
        abort,
      };
      this.worker.ref();
      this.worker.postMessage(message);
      for (;;) {
        while (chunks.length > 0) yield chunks.shift()!;
        if (failure) throw failure;
        if (finish) break;
        await new Promise<void>((r) => {
          wake = r;
        });
      }
      if (context.signal.aborted) throw new GeneratorFault('backend_error', 'the call was cancelled');
      return { finishReason: finish, serverPromptIds: null };
    } finally {
      // an abandoned stream (consumer stopped reading) must stop the worker too
      if (!finish && !failure) Atomics.store(flag, 0, 1);
      context.signal.removeEventListener('abort', onAbort);
      if (finish || failure || this.dead || this.closing) this.settled(id);
      // the worker still runs this one until it sees the flag: keep the worker referenced until then
      else
        this.pending.set(id, {
          push: () => {},
          done: () => this.settled(id),
          fail: () => this.settled(id),
        });
      this.maybeUnref();
      release();
    }
  }

  private settled(id: number): void {
    this.pending.delete(id);
    this.aborts.delete(id);
    this.maybeUnref();
  }

  /**
   * Shuts the engine down in order: calls still open fail, running generations are told to stop, and
   * the worker releases its ONNX sessions and says `closed` before the thread is ended (see worker.ts:
   * ending it while onnxruntime runs aborts the whole process). Resolves once the thread has exited;
   * the process never exits with the worker still running. Safe to call more than once.
   */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    for (const flag of this.aborts.values()) Atomics.store(flag, 0, 1);
    this.aborts.clear();
    for (const p of this.pending.values()) p.fail(new GeneratorFault('backend_error', 'the backend closed'));
    this.pending.clear();
    this.failControls('the backend closed');
    if (!this.dead) {
      // keep the process alive until the worker has let go of everything
      this.worker.ref();
      const closed = new Promise<void>((ok) => {
        this.onClosed = ok;
      });
      const message: CloseMessage = { type: 'close' };
      this.worker.postMessage(message);
      await closed;
    }
    this.dead ??= 'the backend closed';
    // nothing of onnxruntime is live in the worker now (or it is already gone): ending it is safe
    await this.worker.terminate();
  }
}

/** The token backend over an in-process generator, plus in-place model reload. */
export class EmbeddedBackend extends TokenBackend {
  /** serve a new model directory (same tokenizer) from the next call on; see EmbeddedGenerator.reload */
  reload(modelDir: string): Promise<void> {
    return (this.generator as EmbeddedGenerator).reload(modelDir);
  }
}

export function embeddedSource(options: BackendOptions): string {
  const model = options.model?.trim();
  return model && model !== 'default' ? model : DEFAULT_EMBEDDED_MODEL;
}

export async function createEmbeddedBackend(
  options: BackendOptions & { embedded?: Partial<EmbeddedOptions> },
): Promise<Backend> {
  const source = embeddedSource(options);
  const env = process.env;
  const generator = new EmbeddedGenerator({
    source,
    ...(env.POLAR_EMBEDDED_DTYPE ? { dtype: env.POLAR_EMBEDDED_DTYPE } : {}),
    ...(env.POLAR_EMBEDDED_DEVICE ? { device: env.POLAR_EMBEDDED_DEVICE } : {}),
    ...(env.POLAR_EMBEDDED_THREADS ? { threads: Number(env.POLAR_EMBEDDED_THREADS) } : {}),
    ...(options.embedded ?? {}),
  });
  try {
    const [tokenizer] = await Promise.all([loadChatTokenizer(options.tokenizer ?? source), generator.load()]);
    return new EmbeddedBackend({
      kind: 'embedded',
      tokenizer,
      generator,
      options: { ...options, model: source },
    });
  } catch (error) {
    await generator.close().catch(() => {});
    throw error;
  }
}
