/**
 * `polar train --nnodes 2` for real on one host: two `polar train` processes, node ranks 0 and 1, each
 * starting torchrun with one process, meeting at a c10d rendezvous on loopback (node 0 hosts it, gloo on
 * `lo`), the tiny model on the CPU. For the same global batch the two nodes give the update one process
 * gives (metrics and weights within float tolerance), the node that holds global rank 0 writes the
 * checkpoint, the other finishes without one, each node keeps its own log.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { closedPort } from '../support/cli.ts';
import { assertSameUpdate } from '../support/cluster/train-compare.ts';
import { oneNode, polarTrain, probe, trainArgs } from '../support/cluster/train-run.ts';
import { NO_TORCH, tempDir } from '../unit/train/fixtures.ts';

describe(
  'polar train --nnodes 2 (one host, gloo on loopback)',
  { skip: probe ? false : NO_TORCH, timeout: 590_000 },
  () => {
    test('two nodes give one process its update; one of them checkpoints', async () => {
      const dir = await tempDir();
      const common = await trainArgs(dir, '0.01');
      const one = join(dir, 'one');
      await oneNode(common, one);

      const two = join(dir, 'two');
      // a loopback port nothing listens on: node 0's rendezvous
      const endpoint = `127.0.0.1:${await closedPort()}`;
      const node = (rank: number) =>
        polarTrain([
          ...common,
          '--out',
          two,
          '--nnodes',
          '2',
          '--node-rank',
          String(rank),
          '--rdzv-endpoint',
          endpoint,
          '--local-addr',
          '127.0.0.1',
          '--socket-ifname',
          'lo',
        ]);
      const [r0, r1] = await Promise.all([node(0), node(1)]);
      assert.equal(r0.exitCode, 0, r0.stderr);
      assert.equal(r1.exitCode, 0, r1.stderr);
      assert.match(r0.stderr, /node 0 of 2/);
      assert.match(r1.stderr, /node 1 of 2/);
      // the rendezvous gives global rank 0 to either node: that one reports the steps and the checkpoint
      const said = [r0.stderr, r1.stderr];
      assert.equal(
        said.filter((e) => /done: 2 steps, checkpoint .*step-2/.test(e)).length,
        1,
        said.join('\n'),
      );
      assert.equal(
        said.filter((e) => /done: this node's processes finished/.test(e)).length,
        1,
        said.join('\n'),
      );
      assert.ok(existsSync(join(two, 'worker.log')) && existsSync(join(two, 'worker-node1.log')));

      // the metrics of each step and the weights after the last, tensor by tensor, finite
      await assertSameUpdate(probe!.python, one, two, 'step-2');
    });
  },
);
