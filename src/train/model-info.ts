/**
 * What the launcher can learn about a training model without Python: its vocabulary (a `tiny:` spec's
 * `vocab`, a directory's config.json, a hub id's config.json in the Hugging Face cache) and whether it
 * can be found at all. `polar train` checks the trajectories' token ids against it before the worker
 * starts, and `polar loop` checks the trainer's whole set-up before its first rollout (checkTrainer).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { EnvironmentError, UsageError } from '../errors.ts';
import { DEFAULTS } from '../options/defaults.ts';
import {
  checkDevice,
  checkPackages,
  type DeviceProber,
  findPython,
  type Prober,
  type PythonPackages,
  probeDevices,
  probePython,
} from './env.ts';
import { CHECKPOINT_FILES, TINY_DEFAULTS } from './schema.ts';

/** The keys of a `tiny:` spec (`tiny:arch=qwen3,vocab=151669,...`), the defaults filled in. */
export function tinySpec(spec: string): Record<string, string | number> {
  const out: Record<string, string | number> = { ...TINY_DEFAULTS };
  for (const part of spec.slice('tiny:'.length).split(',').filter(Boolean)) {
    const [key = '', value = ''] = part.split('=', 2);
    if (!(key in TINY_DEFAULTS))
      throw new UsageError(
        `model ${spec}: unknown key ${key}`,
        `the keys of a tiny spec: ${Object.keys(TINY_DEFAULTS).join(', ')}`,
      );
    out[key] = key === 'arch' ? value : Number(value);
  }
  return out;
}

/** config.json of a hub id in the Hugging Face cache ($HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub). */
function cachedConfig(id: string): string | null {
  const hub =
    process.env.HF_HUB_CACHE ??
    join(
      process.env.HF_HOME ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'huggingface'),
      'hub',
    );
  const snapshots = join(hub, `models--${id.replaceAll('/', '--')}`, 'snapshots');
  if (!existsSync(snapshots)) return null;
  for (const snap of readdirSync(snapshots)) {
    const file = join(snapshots, snap, 'config.json');
    if (existsSync(file)) return file;
  }
  return null;
}

/** The model's vocabulary size (rows of its head), or null when it cannot be known without loading it. */
export function modelVocabSize(model: string): number | null {
  if (model.startsWith('tiny:')) return Number(tinySpec(model).vocab);
  const file = existsSync(model) ? join(model, 'config.json') : cachedConfig(model);
  if (!file || !existsSync(file)) return null;
  try {
    const config = JSON.parse(readFileSync(file, 'utf8')) as {
      vocab_size?: number;
      text_config?: { vocab_size?: number };
    };
    return config.vocab_size ?? config.text_config?.vocab_size ?? null;
  } catch {
    return null;
  }
}

/** Offline (POLAR_OFFLINE, HF_HUB_OFFLINE): a hub id must already be in the cache. */
export function checkModelFound(model: string, flag: string): void {
  if (model.startsWith('tiny:')) {
    tinySpec(model);
    return;
  }
  if (existsSync(model)) {
    if (!existsSync(join(model, 'config.json')))
      throw new UsageError(
        `${flag} ${model}: no config.json there`,
        'give a Hugging Face model directory or a polar train checkpoint',
      );
    checkWeights(model, flag);
    return;
  }
  const offline = process.env.POLAR_OFFLINE === '1' || process.env.HF_HUB_OFFLINE === '1';
  if (offline && !cachedConfig(model))
    throw new UsageError(
      `${flag} ${model}: not a directory, and not in the Hugging Face cache (offline)`,
      'give a local model directory, or a tiny:... spec (docs/train.md)',
    );
}

/** the files a model directory holds its trainable weights in (transformers' from_pretrained) */
const WEIGHT_FILES = [
  'model.safetensors',
  'model.safetensors.index.json',
  'pytorch_model.bin',
  'pytorch_model.bin.index.json',
  'adapter_config.json',
];

/**
 * A model directory with no trainable weights (issue 47 item 4): an ONNX export (what the embedded
 * backend serves, README's `polar export tiny:... --out tiny-model`) used to load, then fail in the worker
 * on a missing model.safetensors. Refused up front, naming what it was exported from when it says so
 * (config.json `polar_export.source`: a `tiny:` spec or a checkpoint) and otherwise the tiny spec.
 * A `polar train --out` folder (its `latest`) is a checkpoint the worker follows.
 */
function checkWeights(model: string, flag: string): void {
  if (existsSync(join(model, CHECKPOINT_FILES.latest))) return;
  if (WEIGHT_FILES.some((f) => existsSync(join(model, f)))) return;
  const onnx = existsSync(join(model, 'onnx')) || readdirSync(model).some((f) => f.endsWith('.onnx'));
  let source: unknown;
  try {
    source = JSON.parse(readFileSync(join(model, 'config.json'), 'utf8'))?.polar_export?.source;
  } catch {}
  const from =
    typeof source === 'string'
      ? `train what it was exported from: ${flag} ${source.startsWith('tiny:') ? `'${source}'` : source}`
      : `train a checkpoint or a tiny model spec (${flag} '${DEFAULTS.tinyTrialModel.value}', what README's tiny model is exported from)`;
  throw new UsageError(
    onnx
      ? `${flag} ${model} is an ONNX model (for the embedded backend, onnx/): it holds no weights to train (no ${WEIGHT_FILES[0]})`
      : `${flag} ${model}: no weights there (${WEIGHT_FILES.slice(0, 3).join(', ')})`,
    `${from}; or a Hugging Face model directory with safetensors`,
  );
}

export interface TrainerSetup {
  /** the model training starts from, and the flag that names it */
  model: string;
  flag: string;
  device: 'cuda' | 'cpu';
  gpus: number;
  lora: boolean;
  python?: string | undefined;
  /** the ids the rollouts will carry (the rollout tokenizer's size), when known */
  tokenizerVocab?: { size: number; what: string } | undefined;
}

/**
 * The trainer's whole set-up, checked before a long run spends anything on rollouts (polar loop): a
 * Python with torch (and CUDA for --device cuda), the model found, and its vocabulary holding every id the
 * rollouts' tokenizer can produce.
 */
export async function checkTrainer(
  setup: TrainerSetup,
  probe: Prober = probePython,
  devices: DeviceProber = probeDevices,
): Promise<PythonPackages> {
  checkModelFound(setup.model, setup.flag);
  const vocab = modelVocabSize(setup.model);
  if (vocab !== null && setup.tokenizerVocab && vocab < setup.tokenizerVocab.size)
    throw new UsageError(
      `${setup.flag} ${setup.model} has a vocabulary of ${vocab} ids, but ${setup.tokenizerVocab.what} has ${setup.tokenizerVocab.size}: training on the rollouts would fail`,
      setup.model.startsWith('tiny:')
        ? `give the spec vocab=${setup.tokenizerVocab.size}`
        : 'train the model the backend serves',
    );
  const python = await findPython(setup.python ?? process.env.POLAR_PYTHON, probe);
  checkPackages(python, setup);
  // only --device cuda needs what an imported torch knows; one import here, before any rollout
  if (setup.device === 'cuda') {
    const d = await devices(python.python);
    if ('problem' in d) throw new EnvironmentError(`${python.python}: ${d.problem}`);
    checkDevice({ ...python, ...d }, setup);
  }
  return python;
}

/** Where a served model's weights come from: a `polar export` folder names its source checkpoint. */
export function modelOrigin(model: string): string {
  try {
    const source = JSON.parse(readFileSync(join(model, 'config.json'), 'utf8'))?.polar_export?.source;
    if (typeof source === 'string') return source.startsWith('tiny:') ? source : resolve(source);
  } catch {}
  return model.startsWith('tiny:') || !existsSync(model) ? model : resolve(model);
}

/**
 * The models recorded in the trajectories that are not the one training starts from (following an
 * export back to its checkpoint; `vouched`: names the caller knows to serve the same weights, such as
 * polar loop's served model name). The sampling check on the first batch then decides.
 */
export function otherSamplers(recorded: string[], trained: string, vouched: string[] = []): string[] {
  const same = new Set([modelOrigin(trained), ...vouched.map(modelOrigin)]);
  return recorded.filter((m) => !same.has(modelOrigin(m)));
}
