/**
 * `polar eval --cluster ray` when a worker node dies mid-run (every process of its namespace killed by
 * pid): the run completes, the samples it held run again on the other worker under a new attempt, none is
 * lost, none counted twice, none scored as an error. Own file (and cluster): each file has its time limit.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { assertEachSampleOnce, readResultLines } from '../support/cluster/compare.ts';
import { goldEvalArgs, goldIds } from '../support/cluster/eval.ts';
import { evalOnHead, RAY_SKIP, useRayCluster } from '../support/cluster/ray.ts';

describe('polar eval --cluster ray, a node lost', { skip: RAY_SKIP ?? false, timeout: 590_000 }, () => {
  const c = useRayCluster('polar-ray-kill-');

  test('a worker killed mid-run: its samples run again on the other one, none lost or doubled', async () => {
    const ids = goldIds();
    const out = join(c.tmp, 'ray-kill');
    const [victim, survivor] = c.ray.workers;
    let killed = false;
    const r = await evalOnHead(
      c.net,
      c.ray,
      [...goldEvalArgs(ids, 3), '--cluster', `ray=${c.ray.address}`, '--out', out],
      420_000,
      () => {
        // at the first finished sample the victim has samples in flight (2 slots a worker, 6 samples)
        if (
          !killed &&
          existsSync(join(out, 'results.jsonl')) &&
          readFileSync(join(out, 'results.jsonl'), 'utf8').trim()
        ) {
          killed = true;
          c.net.killNode(victim!);
        }
      },
    );
    assert.ok(killed, 'the worker was killed during the run');
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /runs again elsewhere/);
    const lines = readResultLines(out);
    assertEachSampleOnce(lines, ids.length * 3);
    const again = lines.filter((l) => (l.cluster as { attempt: number }).attempt > 1);
    assert.ok(again.length > 0, 'some sample ran a second time');
    for (const l of again) assert.equal((l.cluster as { node: string }).node, survivor!.ip);
  });
});
