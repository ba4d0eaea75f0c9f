/**
 * `polar doctor` of the embedded backend (issue 47 item 4): whether its model can be loaded here, checked
 * offline first. A local directory must hold what the engine loads (tokenizer.json, config.json,
 * onnx/*.onnx); a hub id (the default, onnx-community/Qwen3-0.6B-ONNX) is ready when its files are in
 * Transformers.js's cache, or when the hub answers (it downloads on first use); otherwise not ready, with
 * the offline way (a tiny model made in one command, a local model, a server). It said "ready" offline
 * for a default model it could not download, and capture failed a minute later.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { ProbeCheck } from '../backends/probe.ts';
import { TINY_TRIAL_COMMAND } from '../options/defaults.ts';
import { isLocalPath } from '../tokenizer/chat-tokenizer.ts';

/** What to do without the hub (the capture's own offline hint says the same). */
export const OFFLINE_WAYS = `make a tiny model offline in one command: ${TINY_TRIAL_COMMAND}, then --model ./tiny-model; or give a local model directory (--model ./dir), or a server (--backend vllm --backend-url http://HOST:8000/v1 --model NAME)`;

/** the tokenizer files the embedded backend loads beside the model's */
const TOKENIZER_FILES = ['tokenizer.json', 'tokenizer_config.json'];

export interface ModelCheckDeps {
  /** Transformers.js's cache folder (default: its env.cacheDir) */
  cacheDir?: string;
  /** the hub's address (default: Transformers.js's env.remoteHost, https://huggingface.co/) */
  hub?: string;
  /** how long the hub may take to answer */
  timeoutMs?: number;
  fetch?: typeof fetch;
}

/** The model check of the embedded backend for `model` at `dtype` (q4 for a hub id, as the engine loads it). */
export async function embeddedModelCheck(
  model: string,
  dtype: string,
  deps: ModelCheckDeps = {},
): Promise<ProbeCheck> {
  if (isLocalPath(model) || existsSync(model)) return localModelCheck(model);
  const { env, ModelRegistry } = await import('@huggingface/transformers');
  const cacheDir = deps.cacheDir ?? env.cacheDir ?? '';
  const saved = { cacheDir: env.cacheDir, allowRemoteModels: env.allowRemoteModels };
  let missing: string[];
  try {
    env.cacheDir = cacheDir;
    env.allowRemoteModels = false;
    const files = await ModelRegistry.is_cached_files(model, { dtype: dtype as never }).catch(() => ({
      files: [{ file: 'config.json', cached: false }],
    }));
    missing = files.files.filter((f) => !f.cached).map((f) => f.file);
    for (const name of TOKENIZER_FILES) if (!existsSync(join(cacheDir, model, name))) missing.push(name);
  } finally {
    Object.assign(env, saved);
  }
  if (missing.length === 0)
    return { name: 'model', status: 'ok', detail: `${model} (${dtype}) is in the cache ${cacheDir}` };
  const notCached = `${model} (${dtype}) is not in the cache ${cacheDir} (missing ${missing.slice(0, 3).join(', ')})`;
  if (process.env.POLAR_OFFLINE === '1')
    return {
      name: 'model',
      status: 'fail',
      detail: `${notCached}, and POLAR_OFFLINE=1 forbids the download`,
      fix: OFFLINE_WAYS,
    };
  const hub = deps.hub ?? env.remoteHost ?? 'https://huggingface.co/';
  const url = `${hub.replace(/\/$/, '')}/${model}/resolve/main/config.json`;
  const answer = await reach(url, deps);
  if (answer.status !== null && answer.status < 400)
    return {
      name: 'model',
      status: 'ok',
      detail: `${notCached}; ${new URL(url).host} answers: downloaded on first use`,
    };
  if (answer.status !== null)
    return {
      name: 'model',
      status: 'fail',
      detail: `${notCached}, and ${new URL(url).host} answers ${answer.status} for it`,
      fix: `check the model id (--model), or ${OFFLINE_WAYS}`,
    };
  return {
    name: 'model',
    status: 'fail',
    detail: `${notCached}, and ${new URL(url).host} cannot be reached (${answer.error}): the first call would fail`,
    fix: `offline? ${OFFLINE_WAYS}`,
  };
}

/** HEAD of `url` within the time limit: its status, or the network error. */
async function reach(url: string, deps: ModelCheckDeps): Promise<{ status: number | null; error?: string }> {
  try {
    const r = await (deps.fetch ?? fetch)(url, {
      method: 'HEAD',
      redirect: 'manual',
      signal: AbortSignal.timeout(deps.timeoutMs ?? 10_000),
    });
    return { status: r.status };
  } catch (error) {
    const e = error as Error & { cause?: { code?: string; message?: string } };
    return {
      status: null,
      error:
        e.name === 'TimeoutError' ? 'no answer in time' : (e.cause?.code ?? e.cause?.message ?? e.message),
    };
  }
}

/** A local model directory: what the embedded engine loads from it. */
function localModelCheck(model: string): ProbeCheck {
  const dir = resolve(model);
  const onnx = join(dir, 'onnx');
  const missing = [
    ...['config.json', ...TOKENIZER_FILES].filter((f) => !existsSync(join(dir, f))),
    ...(existsSync(onnx) && readdirSync(onnx).some((f) => f.endsWith('.onnx')) ? [] : ['onnx/*.onnx']),
  ];
  if (!existsSync(dir))
    return { name: 'model', status: 'fail', detail: `no directory ${dir}`, fix: OFFLINE_WAYS };
  if (missing.length === 0) return { name: 'model', status: 'ok', detail: `local model directory ${dir}` };
  return {
    name: 'model',
    status: 'fail',
    detail: `${dir} lacks ${missing.join(', ')}: not a model the embedded backend loads`,
    fix: `give a directory written by polar export (a training checkpoint: polar export CKPT --out DIR first); or ${OFFLINE_WAYS}`,
  };
}
