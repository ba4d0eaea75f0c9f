/**
 * A loop step's training across nodes (polar loop --train-nodes, src/train/cluster/train.ts) without a cluster:
 * the polar train words a node runs (parsed back by polar train's own parser into the request's options),
 * the srun and ray_torchrun command lines around them, and the combinations polar loop refuses (LoRA, from
 * the flag or from train.json, through the CLI as a user runs it); torchrun's arguments on each node.
 */
import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { UsageError } from '../../../src/errors.ts';
import { launcherArgv, nodesTraining, trainWords } from '../../../src/train/cluster/train.ts';
import { nodeRole } from '../../../src/train/command.ts';
import { workerCommand } from '../../../src/train/launch.ts';
import { flagsToOptions, optionsToFlags } from '../../../src/train/options.ts';
import { loopArgv, parseArgv } from '../../support/argv.ts';
import { polarInProcess, ROOT } from '../../support/cli.ts';
import { tempDir } from '../../support/temp.ts';

const COIN = join(ROOT, 'fixtures/loop/coin.jsonl');

// polar train reads its --config while it parses (docs/cli.md, "Options in a file"): a real train.json,
// as the node has the loop's
const CONFIG = join(tempDir('polar-train-words-'), 'train.json');
writeFileSync(CONFIG, '{}\n');

const REQUEST = {
  trajectories: '/runs/l/step-2/traj.jsonl',
  out: '/runs/l/step-2/train',
  resume: '/runs/l/step-1/train',
  configFile: CONFIG,
  allowZeroAdvantage: true,
  sampledBy: ['policy'],
  flags: { device: 'cpu', lora: undefined, lr: 0.001, batch_rollouts: 4, epochs: 1 },
};

test("a node's polar train words: the step's request, parsed back by polar train into the same options", () => {
  const words = trainWords(REQUEST, true);
  assert.deepEqual(words, [
    '/runs/l/step-2/traj.jsonl',
    '--out',
    '/runs/l/step-2/train',
    '--resume-from',
    '/runs/l/step-1/train',
    '--config',
    CONFIG,
    '--device',
    'cpu',
    '--lr',
    '0.001',
    '--batch-rollouts',
    '4',
    '--epochs',
    '1',
    '--allow-zero-advantage',
    '--sampled-by',
    'policy',
    '--quiet',
  ]);
  const parsed = parseArgv(['train', ...words]);
  assert.deepEqual(parsed.args, ['/runs/l/step-2/traj.jsonl']);
  const options = Object.fromEntries(
    Object.entries(flagsToOptions(parsed.flags as never)).filter(([, v]) => v !== undefined),
  );
  assert.deepEqual(options, { device: 'cpu', lr: 0.001, batch_rollouts: 4, epochs: 1 });
  assert.equal(parsed.flags.resumeFrom, '/runs/l/step-1/train');
  assert.equal(parsed.flags.allowZeroAdvantage, true);
  assert.deepEqual(parsed.flags.sampledBy, ['policy']);
});

test('train options as flags: switches in both forms, null and undefined left out, a key without a flag refused', () => {
  assert.deepEqual(optionsToFlags({ lora: true, tis: false, bf16: null, max_steps: null, model: 'tiny:x' }), [
    '--lora',
    '--no-tis',
    '--model',
    'tiny:x',
  ]);
  assert.deepEqual(optionsToFlags({ lora: false }), [], 'false without a --no- form is the switch not given');
  assert.throws(() => optionsToFlags({ weight_decay: 0.1 }), /weight_decay has no flag/);
});

test('srun: one task per node holding its processes, then srun_torchrun with how a node starts polar', () => {
  const t = nodesTraining({ engine: 'slurm' }, 2, '/opt/node /opt/polar/bin/polar')!;
  const argv = launcherArgv(t, '/venv/bin/python', { device: 'cpu', processes: 2 }, ['traj.jsonl']);
  assert.deepEqual(argv, [
    'srun',
    '--nodes=2',
    '--ntasks-per-node=1',
    '--cpus-per-task=2',
    '--kill-on-bad-exit=1',
    `--chdir=${process.cwd()}`,
    '/venv/bin/python',
    '-m',
    'polar_train.cluster.srun_torchrun',
    '--polar',
    '/opt/node /opt/polar/bin/polar',
    '--',
    'traj.jsonl',
  ]);
  const gpu = launcherArgv(t, 'python', { device: 'cuda', processes: 8 }, []);
  assert.ok(gpu.includes('--gpus-per-node=8') && !gpu.some((w) => w.startsWith('--cpus-per-task')));
});

test('ray: ray_torchrun at the --cluster address, a bundle per node of the processes it runs', () => {
  const t = nodesTraining({ engine: 'ray', address: '10.0.0.1:6379' }, 3, undefined)!;
  const argv = launcherArgv(t, 'python', { device: 'cuda', processes: 8 }, ['traj.jsonl']);
  assert.deepEqual(argv.slice(0, 11), [
    'python',
    '-m',
    'polar_train.cluster.ray_torchrun',
    '--address',
    '10.0.0.1:6379',
    '--nnodes',
    '3',
    '--cpus',
    '1',
    '--gpus',
    '8',
  ]);
  // the default polar is this node binary and bin/polar; a path with a space is quoted for shlex
  const spaced = nodesTraining({ engine: 'ray' }, 2, undefined)!;
  spaced.polar = ['/opt/my node/node', '/x/bin/polar'];
  const words = launcherArgv(spaced, 'python', { device: 'cpu', processes: 1 }, []);
  assert.equal(words[words.indexOf('--polar') + 1], "'/opt/my node/node' /x/bin/polar");
  assert.ok(words.includes('--cpus') && words[words.indexOf('--cpus') + 1] === '1');
});

test('--train-nodes 1 is this machine; more needs --cluster', () => {
  assert.equal(nodesTraining(undefined, 1), null);
  assert.equal(nodesTraining({ engine: 'slurm' }, 1), null);
  assert.throws(
    () => nodesTraining(undefined, 2),
    (e: unknown) =>
      e instanceof UsageError &&
      /--train-nodes 2 needs --cluster/.test(e.message) &&
      /--cluster slurm/.test(e.hint!),
  );
});

test('polar loop refuses --train-nodes with --max-staleness >= 1 and without --cluster', async () => {
  const { loopOptions } = await import('../../../src/loop/command.ts');
  const base = loopArgv(['--train-nodes', '2']);
  const refused = (extra: string[], pattern: RegExp) =>
    assert.throws(
      () => loopOptions(parseArgv([...base, ...extra]).flags as never),
      (e: unknown) => e instanceof UsageError && pattern.test(e.message),
    );
  refused(['--cluster', 'slurm', '--max-staleness', '1'], /--max-staleness 1 with --train-nodes 2/);
  refused([], /--train-nodes 2 needs --cluster/);
  const o = loopOptions(parseArgv([...base, '--cluster', 'ray=10.0.0.1:6379']).flags as never);
  assert.equal(o.trainNodes?.nodes, 2);
  assert.equal(o.trainNodes?.engine, 'ray');
  assert.equal(o.trainNodes?.address, '10.0.0.1:6379');
  // the default: no training across nodes
  const one = loopOptions(parseArgv(loopArgv()).flags as never);
  assert.equal(one.trainNodes, undefined);
});

test('LoRA with --train-nodes 2, from --lora or from the --train-config file, is refused before any rollout', async () => {
  const dir = tempDir('polar-train-nodes-lora-');
  const config = join(dir, 'train.json');
  writeFileSync(config, `${JSON.stringify({ lora: true, lr: 1e-5 })}\n`);
  const run = (name: string, extra: string[]) => {
    const out = join(dir, name);
    const argv = loopArgv([...extra, '--cluster', 'slurm', '--train-nodes', '2'], { trainSet: COIN, out });
    return { out, done: polarInProcess(argv) };
  };
  const fromFile = run('file', ['--train-config', config]);
  const file = await fromFile.done;
  assert.equal(file.code, 2, file.stderr);
  assert.ok(
    file.stderr.includes(`"lora": true in --train-config ${config} with --train-nodes 2 is not supported`),
    file.stderr,
  );
  assert.ok(file.stderr.includes(`set "lora" to false in ${config}`), file.stderr);
  assert.match(file.stderr, /or leave --train-nodes at 1/);
  assert.ok(!existsSync(fromFile.out), 'nothing written: refused before the first step');

  const fromFlag = run('flag', ['--lora']);
  const flag = await fromFlag.done;
  assert.equal(flag.code, 2, flag.stderr);
  assert.match(flag.stderr, /--lora with --train-nodes 2 is not supported/);
  assert.match(flag.stderr, /drop --lora/);
  assert.ok(!existsSync(fromFlag.out));
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
