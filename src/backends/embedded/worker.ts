/**
 * The embedded engine's worker thread: loads a causal LM with Transformers.js (onnxruntime-node) and
 * generates with polar's own sampler, streaming ids and logprobs back. Runs in a worker so that
 * `session.run`, a blocking native call, never stalls the proxy's event loop.
 *
 * Generation drives Transformers.js's `generate()` (it owns the KV cache for every architecture) with
 * a logits processor that draws the token itself (sampling.ts) and masks every other logit, so the
 * library's greedy pick is polar's sample. Abort is a flag in shared memory, read by a stopping
 * criterion between steps.
 *
 * Reload (a new model directory, e.g. each step of `polar loop`): `load` builds the new model beside the
 * current one (while calls go on), `swap` makes it current; the parent sends `swap` at its place in the
 * call queue, so calls before it finish on the old weights and calls after it use the new ones. The old
 * model is disposed once no generation still runs on it.
 *
 * Close (`close`, then `closed`): the worker stops taking work, raises the abort flag of every running
 * generation, waits for them and for any model still loading, releases every ONNX session
 * (`model.dispose()`, awaited), answers `closed` and closes its port. Only then may the parent end the
 * thread: terminating it while a `session.run` is on its stack makes that call's N-API result fail, and
 * onnxruntime-node's binding turns the failure into a C++ `Napi::Error` no one catches (std::terminate,
 * SIGABRT, the whole process gone with a good run behind it). Mechanism: node-addon-api built with C++
 * exceptions (napi-inl.h, `Error::ThrowAsJavaScriptException`) throws `Error::New(env)` when `napi_throw`
 * fails, which it does once the env is terminating; hence the empty `what():` in the abort message.
 */
import { parentPort } from 'node:worker_threads';
import {
  AutoModelForCausalLM,
  env,
  LogitsProcessor,
  StoppingCriteria,
  Tensor,
} from '@huggingface/transformers';
import { sampleToken, seededRandom } from './sampling.ts';

export interface InitMessage {
  type: 'init';
  source: string;
  local: boolean;
  allowRemote: boolean;
  dtype: string;
  device: string;
  threads: number;
  cacheDir?: string;
}

export interface GenerateMessage {
  type: 'generate';
  id: number;
  promptIds: number[];
  maxTokens: number;
  temperature: number;
  topP: number;
  topK?: number;
  seed: number;
  stopTokenIds: number[];
  abort: SharedArrayBuffer;
}

/** load a model into a staging slot (no effect on calls) */
export interface LoadMessage {
  type: 'load';
  id: number;
  source: string;
  local: boolean;
}

/** make staged model `id` current (or drop it: `discard`) */
export interface SwapMessage {
  type: 'swap';
  id: number;
  discard?: boolean;
}

/** stop: finish or abort what runs, release every session, answer `closed` */
export interface CloseMessage {
  type: 'close';
}

export type WorkerMessage = InitMessage | GenerateMessage | LoadMessage | SwapMessage | CloseMessage;

export type WorkerReply =
  | { type: 'ready'; device: string; warnings: string[] }
  | { type: 'init-error'; message: string }
  | { type: 'tokens'; id: number; ids: number[]; logprobs: number[] }
  | { type: 'done'; id: number; finishReason: 'stop' | 'length' }
  | { type: 'error'; id: number; message: string }
  | { type: 'loaded'; id: number }
  | { type: 'load-error'; id: number; message: string }
  | { type: 'swapped'; id: number }
  | { type: 'closed' };

type Model = Awaited<ReturnType<typeof AutoModelForCausalLM.from_pretrained>>;

const port = parentPort!;

/** a loaded model and the generations running on it */
interface Slot {
  model: Model;
  users: number;
  retired: boolean;
}

let current: Slot | null = null;
let settings: InitMessage | null = null;
const staged = new Map<number, Model>();
/** what runs now (init, loads, generations: the abort flag of each generation), for close to wait on */
const busy = new Set<Promise<void>>();
const aborts = new Set<Int32Array>();
/** session releases in flight */
const disposals = new Set<Promise<void>>();
let closing = false;

function dispose(model: Model): void {
  const done = model
    .dispose()
    .then(() => {})
    .catch(() => {})
    .finally(() => disposals.delete(done));
  disposals.add(done);
}

function release(slot: Slot): void {
  if (slot.retired && slot.users === 0) dispose(slot.model);
}

/** runs `work`, tracked so that close waits for it */
function track(work: Promise<void>): void {
  const tracked = work.finally(() => busy.delete(tracked));
  tracked.catch(() => {});
  busy.add(tracked);
}

function post(message: WorkerReply): void {
  port.postMessage(message);
}

class PolarSampler extends LogitsProcessor {
  constructor(
    private readonly message: GenerateMessage,
    private readonly random: () => number,
    private readonly onToken: (id: number, logprob: number) => void,
  ) {
    super();
  }

  override _call(_inputIds: bigint[][], logits: Tensor): Tensor {
    const data = logits.data as Float32Array;
    const { id, logprob } = sampleToken(data, this.message, this.random);
    this.onToken(id, logprob);
    data.fill(Number.NEGATIVE_INFINITY);
    data[id] = 0;
    return logits;
  }
}

class AbortCriteria extends StoppingCriteria {
  constructor(private readonly flag: Int32Array) {
    super();
  }
  override _call(inputIds: number[][]): boolean[] {
    const stop = Atomics.load(this.flag, 0) !== 0;
    return inputIds.map(() => stop);
  }
}

function loadModel(source: string, local: boolean, device: string): Promise<Model> {
  const s = settings!;
  env.allowRemoteModels = s.allowRemote && !local;
  return AutoModelForCausalLM.from_pretrained(source, {
    local_files_only: local,
    dtype: s.dtype as never,
    device: device as never,
    session_options: { intraOpNumThreads: s.threads, interOpNumThreads: 1 } as never,
  });
}

async function init(message: InitMessage): Promise<void> {
  settings = message;
  if (message.cacheDir) env.cacheDir = message.cacheDir;
  const warnings: string[] = [];
  let device = message.device;
  let model: Model;
  try {
    model = await loadModel(message.source, message.local, device);
  } catch (error) {
    if (device === 'cpu') throw error;
    warnings.push(`could not load on ${device} (${(error as Error).message}); using the CPU`);
    device = 'cpu';
    model = await loadModel(message.source, message.local, device);
  }
  settings = { ...message, device };
  current = { model, users: 0, retired: false };
  post({ type: 'ready', device, warnings });
}

async function load(message: LoadMessage): Promise<void> {
  if (!settings) throw new Error('model not loaded');
  const model = await loadModel(message.source, message.local, settings.device);
  if (closing) {
    dispose(model);
    throw new Error('the backend closed');
  }
  staged.set(message.id, model);
  post({ type: 'loaded', id: message.id });
}

function swap(message: SwapMessage): void {
  const next = staged.get(message.id);
  staged.delete(message.id);
  if (next && message.discard) dispose(next);
  else if (next) {
    const old = current;
    current = { model: next, users: 0, retired: false };
    if (old) {
      old.retired = true;
      release(old);
    }
  }
  post({ type: 'swapped', id: message.id });
}

async function generate(message: GenerateMessage): Promise<void> {
  const slot = current;
  if (!slot) throw new Error('model not loaded');
  slot.users++;
  try {
    await generateWith(slot.model, message);
  } finally {
    slot.users--;
    release(slot);
  }
}

async function generateWith(model: Model, message: GenerateMessage): Promise<void> {
  const flag = new Int32Array(message.abort);
  aborts.add(flag);
  try {
    await sample(model, message, flag);
  } finally {
    aborts.delete(flag);
  }
}

async function sample(model: Model, message: GenerateMessage, flag: Int32Array): Promise<void> {
  const stops = new Set(message.stopTokenIds);
  const sampled: number[] = [];
  const logprobs: number[] = [];
  let pending: { ids: number[]; logprobs: number[] } = { ids: [], logprobs: [] };
  const sampler = new PolarSampler(message, seededRandom(message.seed), (id, lp) => {
    sampled.push(id);
    logprobs.push(lp);
    pending.ids.push(id);
    pending.logprobs.push(lp);
  });
  const streamer = {
    first: true,
    put(_value: bigint[][]) {
      if (this.first) {
        this.first = false;
        return;
      }
      if (pending.ids.length > 0) {
        post({ type: 'tokens', id: message.id, ...pending });
        pending = { ids: [], logprobs: [] };
      }
    },
    end() {},
  };
  const n = message.promptIds.length;
  const inputIds = new Tensor('int64', BigInt64Array.from(message.promptIds, BigInt), [1, n]);
  const attention = new Tensor('int64', new BigInt64Array(n).fill(1n), [1, n]);
  await model.generate({
    input_ids: inputIds,
    attention_mask: attention,
    max_new_tokens: message.maxTokens,
    do_sample: false,
    num_beams: 1,
    repetition_penalty: 1.0,
    no_repeat_ngram_size: 0,
    min_new_tokens: null,
    eos_token_id: message.stopTokenIds,
    logits_processor: [sampler],
    stopping_criteria: [new AbortCriteria(flag)],
    streamer,
  } as never);
  if (pending.ids.length > 0) post({ type: 'tokens', id: message.id, ...pending });
  const last = sampled[sampled.length - 1];
  post({
    type: 'done',
    id: message.id,
    finishReason: last !== undefined && stops.has(last) ? 'stop' : 'length',
  });
}

/** the ordered shutdown (see the header): nothing of onnxruntime is live when `closed` goes out */
async function close(): Promise<void> {
  closing = true;
  for (const flag of aborts) Atomics.store(flag, 0, 1);
  // a generation or load settles its own tracking entry; loop until none is left
  while (busy.size > 0) await Promise.allSettled([...busy]);
  if (current) {
    current.retired = true;
    if (current.users === 0) dispose(current.model);
    current = null;
  }
  for (const model of staged.values()) dispose(model);
  staged.clear();
  while (disposals.size > 0) await Promise.allSettled([...disposals]);
  post({ type: 'closed' });
  port.close();
}

port.on('message', (message: WorkerMessage) => {
  if (message.type === 'close') {
    if (!closing) close().catch(() => port.close());
  } else if (closing) {
    // work sent after close is refused (the parent fails its calls itself; this is a safety net)
    if (message.type === 'generate') post({ type: 'error', id: message.id, message: 'the backend closed' });
    else if (message.type === 'load')
      post({ type: 'load-error', id: message.id, message: 'the backend closed' });
    else if (message.type === 'swap') post({ type: 'swapped', id: message.id });
  } else if (message.type === 'load') {
    track(
      load(message).catch((error: unknown) =>
        post({ type: 'load-error', id: message.id, message: (error as Error).message }),
      ),
    );
  } else if (message.type === 'swap') {
    swap(message);
  } else if (message.type === 'init') {
    track(
      init(message).catch((error: unknown) =>
        post({ type: 'init-error', message: (error as Error).message }),
      ),
    );
  } else if (message.type === 'generate') {
    track(
      generate(message).catch((error: unknown) =>
        post({ type: 'error', id: message.id, message: (error as Error).message }),
      ),
    );
  }
});
