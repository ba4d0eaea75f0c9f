/**
 * What a loop step's cluster rollouts run: the loop's words less the loop's flags, --harness as --agent,
 * the step's own flags first; the loop's flags parsed into a cluster (or refused with the embedded engine).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { UsageError } from '../../../src/errors.ts';
import { loopCluster, loopEvalWords, stepEvalArgv } from '../../../src/loop/cluster.ts';
import { loopArgv, parseArgv, SERVED_POLICY } from '../../support/argv.ts';

const ARGV = [
  'node',
  'polar',
  'loop',
  '--train-set',
  'train.jsonl',
  '--eval-set=held.jsonl',
  '--harness',
  'pi',
  ...SERVED_POLICY,
  '--train-model',
  'ckpt',
  '--group-size',
  '4',
  '--tasks-per-step',
  '2',
  '--steps',
  '3',
  '--eval-every',
  '1',
  '--runtime',
  'sandbox',
  '--grade-empty-patches',
  '--lora',
  '--lr',
  '1e-5',
  '--device',
  'cuda',
  '--train-config',
  'train.json',
  '--reload-cmd',
  './restart {checkpoint}',
  '--cluster',
  'ray=10.0.0.1:6379',
  '--cluster-memory',
  '4GiB',
  '--concurrency',
  '16',
  '--out',
  'runs/l',
  '--resume',
  '-q',
];

test("a step's eval words: the loop's flags dropped in both spellings, --harness as --agent", () => {
  assert.deepEqual(loopEvalWords(ARGV), [
    '--agent',
    'pi',
    ...SERVED_POLICY,
    '--runtime',
    'sandbox',
    '--grade-empty-patches',
    '--cluster',
    'ray=10.0.0.1:6379',
    '--cluster-memory',
    '4GiB',
  ]);
  assert.deepEqual(loopEvalWords(['node', 'polar', 'loop', '--harness=codex', '--', '--x']), [
    '--agent',
    'codex',
    '--',
    '--x',
  ]);
});

test("a step's eval: its dataset, tasks, samples, folder and session meta before the user's words", () => {
  const c = loopCluster({ engine: 'ray', address: '10.0.0.1:6379' }, ARGV);
  const argv = stepEvalArgv(c, {
    instanceIds: ['a__b-1', 'a__b-2'],
    samples: 4,
    out: '/runs/l/step-1/eval',
    dataset: 'train.jsonl',
    concurrency: 16,
    meta: { policy: 'step-0', loop_step: '1' },
    quiet: true,
  });
  assert.deepEqual(argv.slice(0, 15), [
    'eval',
    '--dataset',
    'train.jsonl',
    '--instances',
    'a__b-1,a__b-2',
    '--samples',
    '4',
    '--concurrency',
    '16',
    '--out',
    '/runs/l/step-1/eval',
    '--session-meta',
    '{"policy":"step-0","loop_step":"1"}',
    '--quiet',
    '--agent',
  ]);
  // polar eval itself parses it: the cluster and the step's meta arrive as a node's eval would see them
  const parsed = parseArgv(argv).flags;
  assert.deepEqual(parsed.cluster, { engine: 'ray', address: '10.0.0.1:6379' });
  assert.deepEqual(parsed.sessionMeta, { policy: 'step-0', loop_step: '1' });
  assert.deepEqual(parsed.instances, ['a__b-1', 'a__b-2']);
  assert.equal(parsed.agent, 'pi');
  // the loop's record: engine and address, not the words (which may hold a key)
  assert.deepEqual(JSON.parse(JSON.stringify({ cluster: c })).cluster, {
    engine: 'ray',
    address: '10.0.0.1:6379',
  });
});

test('polar loop --cluster with the embedded engine is refused, naming both flags', async () => {
  const { loopOptions } = await import('../../../src/loop/command.ts');
  const { flags } = parseArgv(
    loopArgv(['--cluster', 'slurm'], { policy: ['--backend', 'embedded', '--model', 'tiny'] }),
  );
  assert.throws(
    () => loopOptions(flags as never, []),
    (e: unknown) => e instanceof UsageError && /--cluster slurm with --backend embedded/.test(e.message),
  );
});

test("every flag of polar loop is polar eval's too, or one the step's eval does not get", async () => {
  const { program } = await import('../../../src/cli.ts');
  const root = program();
  const flags = (name: string) =>
    new Set(root.commands.find((c) => c.name() === name)!.options.flatMap((o) => [o.long, o.short]));
  const evalFlags = flags('eval');
  const words: string[] = [];
  for (const flag of flags('loop')) {
    if (!flag || evalFlags.has(flag) || flag === '--harness') continue;
    words.push(flag);
  }
  assert.ok(words.includes('--train-set') && words.includes('--group-size'), words.join(' '));
  // what loopEvalWords drops of them (a value after each: a switch's value stays as a stray word)
  const kept = loopEvalWords(['node', 'polar', 'loop', ...words.flatMap((w) => [`${w}=x`])]);
  assert.deepEqual(kept, [], `loop flags polar eval would refuse: ${kept.join(' ')}`);
});
