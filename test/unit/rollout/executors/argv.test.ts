/** What a cluster node runs: the user's eval words less the driver's; torchrun's arguments per node. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nodeArgv, wordsAfter } from '../../../../src/rollout/executors/argv.ts';
import { nodeRole } from '../../../../src/train/command.ts';
import { workerCommand } from '../../../../src/train/launch.ts';

test('node argv keeps the run flags (runtime ones too) and drops the driver flags in both spellings', () => {
  const words = wordsAfter(
    [
      'node',
      'polar',
      'eval',
      '--dataset',
      'd.jsonl',
      '--cluster',
      'ray=10.0.0.1:6379',
      '--out=runs/x',
      '--runtime',
      'sandbox',
      '--sandbox-mount',
      '/data',
      '--resume',
      '--concurrency',
      '8',
      '--backend-url',
      'http://a/v1,http://b/v1',
      '-q',
      '--json',
      '--instances',
      'a,b',
      '--agent-timeout',
      '60',
    ],
    'eval',
  );
  assert.deepEqual(nodeArgv(words), [
    '--dataset',
    'd.jsonl',
    '--runtime',
    'sandbox',
    '--sandbox-mount',
    '/data',
    '--agent-timeout',
    '60',
  ]);
});

test('a node of a run across nodes: c10d rendezvous hosted by rank 0, its address, the socket interface', () => {
  const base = {
    out: 'o',
    nnodes: 2,
    rdzvEndpoint: '10.0.0.1:29400',
    localAddr: '10.0.0.2',
    socketIfname: 'eth0',
  };
  const role = nodeRole({ ...base, nodeRank: 1 }).nodes;
  const cmd = workerCommand({ python: 'py', configPath: 'c.json', processes: 1, nodes: role });
  assert.deepEqual(cmd.args.slice(0, 11), [
    '-m',
    'torch.distributed.run',
    '--nnodes=2',
    '--node-rank=1',
    '--nproc_per_node=1',
    '--rdzv-backend=c10d',
    '--rdzv-endpoint=10.0.0.1:29400',
    '--rdzv-id=polar-10-0-0-1-29400',
    '--rdzv-conf=is_host=0',
    '--local-addr=10.0.0.2',
    '-m',
  ]);
  assert.equal(cmd.env.GLOO_SOCKET_IFNAME, 'eth0');
  const host = workerCommand({
    python: 'py',
    configPath: 'c.json',
    processes: 1,
    nodes: nodeRole({ ...base, nodeRank: 0 }).nodes,
  });
  assert.ok(host.args.includes('--rdzv-conf=is_host=1'));
  assert.throws(() => nodeRole({ out: 'o', nnodes: 2 }), /needs --node-rank/);
  assert.throws(() => nodeRole({ ...base, nodeRank: 2 }), /--node-rank 2: expected 0 to 1/);
});
