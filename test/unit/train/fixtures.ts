/** Shared by the train tests: hand-made trajectory records and the Python (with torch) to run, if any. */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { findPython, type PythonPackages } from '../../../src/train/env.ts';
import { tempDir as makeTempDir } from '../../support/temp.ts';

/** A tiny random Qwen3 (transformers' Qwen3ForCausalLM built from a config: src/train/worker/polar_train/tiny.py). */
export const TINY = 'tiny:arch=qwen3,vocab=32,dim=16,layers=1,heads=2,seed=0';

export interface TraceSpec {
  prompt: number[];
  response: number[];
  mask: (0 | 1)[];
  logprobs?: number[] | null;
}

export function trajectory(
  id: string,
  traces: TraceSpec[],
  reward: number | null,
  group = 'g0',
): Record<string, unknown> {
  return {
    v: 2,
    id,
    session: `s-${id}`,
    task_id: group,
    sample: 0,
    group_id: group,
    harness: 'test',
    model: 'tiny',
    status: 'completed',
    reward,
    traces: traces.map((t) => ({
      kind: 'root',
      prompt_ids: t.prompt,
      response_ids: t.response,
      loss_mask: t.mask,
      response_logprobs:
        t.logprobs === undefined ? t.response.map((_, i) => (t.mask[i] ? -1.5 : 0)) : t.logprobs,
      finish_reason: 'stop',
      calls: ['c1'],
      token_exact: t.logprobs !== null,
    })),
    stats: {
      calls: 1,
      calls_merged: 1,
      chains: 1,
      truncations: 0,
      spliced_turns: 0,
      tokens_trainable: 0,
      tokens_total: 0,
    },
  };
}

/** Two groups of four rollouts over a 32-token vocabulary, alternating rewards. */
export function smallBatch(options: { logprobs?: boolean } = {}): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (let g = 0; g < 2; g++) {
    for (let i = 0; i < 4; i++) {
      const response = [3, 5, 7, 11, 13, 17].map((t) => (t + g * 3 + i) % 32);
      out.push(
        trajectory(
          `r${g}-${i}`,
          [
            {
              prompt: [1, 2, 3 + g],
              response,
              mask: [1, 1, 0, 0, 1, 1],
              ...(options.logprobs === false ? { logprobs: null } : {}),
            },
          ],
          i % 2,
          `g${g}`,
        ),
      );
    }
  }
  return out;
}

/** A fresh temp directory, removed when the test file's process exits (test/support/temp.ts). */
export async function tempDir(prefix = 'polar-train-'): Promise<string> {
  return makeTempDir(prefix);
}

export async function writeJsonl(path: string, records: unknown[]): Promise<string> {
  await writeFile(path, records.map((r) => JSON.stringify(r)).join('\n') + '\n');
  return path;
}

let cached: Promise<PythonPackages | null> | undefined;

/**
 * The Python the launcher would pick when it has the worker's packages (torch 2.x, transformers, peft),
 * or null (tests that need it skip with a message).
 */
export function pythonWithTorch(): Promise<PythonPackages | null> {
  cached ??= findPython(process.env.POLAR_PYTHON)
    .then((p) => {
      const ready = Number.parseInt(p.torch ?? '', 10) >= 2 && p.transformers !== null && p.peft !== null;
      return ready ? p : null;
    })
    .catch(() => null);
  return cached;
}

export const NO_TORCH =
  "no Python with torch 2.x, transformers and peft found ($POLAR_PYTHON, .venv, python3): make polar's Python environment with npm run setup:python (.ci/run does)";

/**
 * train.json for the batches above: their logprobs are made up (no model sampled them), so the check that
 * they match the model's own (sampling_gap_limit, docs/train.md) is off.
 */
export async function madeUpLogprobs(dir: string): Promise<string> {
  const file = join(dir, 'made-up-logprobs.json');
  await writeFile(file, `${JSON.stringify({ sampling_gap_limit: 0 })}\n`);
  return file;
}
