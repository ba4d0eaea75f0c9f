/**
 * A training run across nodes against the same run on one node: the per-step metrics within float
 * tolerance and the last checkpoint's weights tensor by tensor (the trainer's Python reads both
 * safetensors files). Shared by the launcher tests (srun, Ray) on the test hosts.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';

export const stepMetrics = (out: string) =>
  readFileSync(join(out, 'metrics.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, number>)
    .filter((m) => (m as unknown as { event: string }).event === 'step');

/** Asserts that `two` (a run across nodes) made the update `one` (one node) made, up to `checkpoint`. */
export async function assertSameUpdate(
  python: string,
  one: string,
  two: string,
  checkpoint: string,
  tolerance = 1e-5,
): Promise<void> {
  const a = stepMetrics(one);
  const b = stepMetrics(two);
  assert.ok(a.length >= 1, 'the one-node run made a step');
  assert.equal(b.length, a.length);
  for (let i = 0; i < a.length; i++)
    for (const key of ['loss', 'grad_norm', 'entropy'])
      assert.ok(
        Math.abs(a[i]![key]! - b[i]![key]!) <= tolerance * Math.max(1, Math.abs(a[i]![key]!)),
        `step ${i + 1} ${key}: ${a[i]![key]} vs ${b[i]![key]}`,
      );
  const compare = await execa(
    python,
    [
      '-c',
      [
        'import sys, math, torch',
        'from safetensors.torch import load_file',
        'a, b = load_file(sys.argv[1]), load_file(sys.argv[2])',
        'assert a.keys() == b.keys(), (a.keys(), b.keys())',
        'for side, w in (("one node", a), ("across nodes", b)):',
        '    bad = [k for k in w if not torch.isfinite(w[k].float()).all()]',
        '    assert not bad, "non-finite weights (%s): %s" % (side, ", ".join(bad[:3]))',
        'print(max(float((a[k].float() - b[k].float()).abs().max()) for k in a))',
      ].join('\n'),
      join(one, checkpoint, 'model.safetensors'),
      join(two, checkpoint, 'model.safetensors'),
    ],
    { reject: false },
  );
  assert.equal(compare.exitCode, 0, compare.stderr);
  assert.ok(Number(compare.stdout.trim()) < tolerance, `largest weight difference ${compare.stdout}`);
}
