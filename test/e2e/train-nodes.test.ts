/**
 * `polar train --nnodes 2` for real on one host: two `polar train` processes, node ranks 0 and 1, each
 * starting torchrun with one process, meeting at a c10d rendezvous on loopback (node 0 hosts it, gloo on
 * `lo`), the tiny model on the CPU. For the same global batch the two nodes give the update one process
 * gives (metrics and weights within float tolerance), the node that holds global rank 0 writes the
 * checkpoint, the other finishes without one, each node keeps its own log.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import {
  madeUpLogprobs,
  NO_TORCH,
  pythonWithTorch,
  smallBatch,
  TINY,
  tempDir,
  writeJsonl,
} from '../unit/train/fixtures.ts';

const probe = await pythonWithTorch();
const BIN = fileURLToPath(new URL('../../bin/polar', import.meta.url));

function train(args: string[]) {
  return execa(process.execPath, [BIN, 'train', ...args], {
    reject: false,
    env: { NO_COLOR: '1', POLAR_PYTHON: probe?.python ?? '' },
    timeout: 400_000,
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

const steps = (out: string) =>
  readFileSync(join(out, 'metrics.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, number>)
    .filter((m) => (m as unknown as { event: string }).event === 'step');

describe(
  'polar train --nnodes 2 (one host, gloo on loopback)',
  { skip: probe ? false : NO_TORCH, timeout: 590_000 },
  () => {
    test('two nodes give one process its update; one of them checkpoints', async () => {
      const dir = await tempDir();
      const traj = await writeJsonl(join(dir, 'traj.jsonl'), smallBatch());
      // smallBatch's logprobs are made up: the sampling check is off (train.json)
      const config = await madeUpLogprobs(dir);
      const common = [
        traj,
        '--config',
        config,
        '--model',
        TINY,
        '--device',
        'cpu',
        '--batch-rollouts',
        '4',
        '--lr',
        '0.01',
      ];
      const one = join(dir, 'one');
      const single = await train([...common, '--out', one]);
      assert.equal(single.exitCode, 0, single.stderr);

      const two = join(dir, 'two');
      const endpoint = `127.0.0.1:${await freePort()}`;
      const node = (rank: number) =>
        train([
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

      const a = steps(one);
      const b = steps(two);
      assert.equal(b.length, a.length);
      for (let i = 0; i < a.length; i++)
        for (const key of ['loss', 'grad_norm', 'entropy'])
          assert.ok(
            Math.abs(a[i]![key]! - b[i]![key]!) <= 1e-5 * Math.max(1, Math.abs(a[i]![key]!)),
            `step ${i + 1} ${key}: ${a[i]![key]} vs ${b[i]![key]}`,
          );
      // the weights after the last step, tensor by tensor
      const compare = await execa(
        probe!.python,
        [
          '-c',
          [
            'import sys, torch',
            'from safetensors.torch import load_file',
            'a, b = load_file(sys.argv[1]), load_file(sys.argv[2])',
            'assert a.keys() == b.keys(), (a.keys(), b.keys())',
            'print(max(float((a[k].float() - b[k].float()).abs().max()) for k in a))',
          ].join('\n'),
          join(one, 'step-2', 'model.safetensors'),
          join(two, 'step-2', 'model.safetensors'),
        ],
        { reject: false },
      );
      assert.equal(compare.exitCode, 0, compare.stderr);
      assert.ok(Number(compare.stdout.trim()) < 1e-5, `largest weight difference ${compare.stdout}`);
    });
  },
);
