/**
 * `polar loop`'s weight-sync flags (issue 48): --weight-sync auto|disk|nccl|restart and
 * --weight-sync-pause wait|keep|abort, their defaults left out of the options (a run's config.json reads
 * as before the flags), --weight-sync-address HOST[:PORT] for nccl only, restart only with --reload-cmd,
 * and several --backend-url servers each published to.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { UsageError } from '../../../src/errors.ts';
import { type LoopFlags, loopOptions } from '../../../src/loop/command.ts';
import { loopEvaluation } from '../../../src/loop/phases.ts';
import { DEFAULTS } from '../../../src/options/defaults.ts';
import { parseArgv, usageError } from '../../support/argv.ts';

const base = ['loop', '--train-set', 't.jsonl', '--out', 'run', '--harness', 'pi'];
const vllm = ['--backend', 'vllm', '--backend-url', 'http://127.0.0.1:8000/v1', '--model', 'm'];
const options = (extra: string[]) =>
  loopOptions(parseArgv([...base, ...vllm, ...extra]).flags as unknown as LoopFlags);

describe('polar loop --weight-sync', () => {
  test('auto and wait by default, and left out of the options', () => {
    assert.equal(DEFAULTS.weightSync.value, 'auto');
    assert.equal(DEFAULTS.weightSyncPause.value, 'wait');
    const flags = parseArgv([...base, ...vllm]).flags;
    assert.equal(flags.weightSync, 'auto');
    assert.equal(flags.weightSyncPause, 'wait');
    assert.ok(!('weightSync' in options([])));
    assert.ok(!('weightSync' in options(['--weight-sync', 'auto', '--weight-sync-pause', 'wait'])));
  });

  test('nccl, keep and the rendezvous address reach the publisher', () => {
    assert.deepEqual(
      options([
        '--weight-sync',
        'nccl',
        '--weight-sync-pause',
        'keep',
        '--weight-sync-address',
        '10.0.0.5:29600',
      ]).weightSync,
      { choice: 'nccl', pause: 'keep', rendezvous: { host: '10.0.0.5', port: 29600 } },
    );
    assert.deepEqual(options(['--weight-sync', 'nccl', '--weight-sync-address', 'trainer-0']).weightSync, {
      choice: 'nccl',
      rendezvous: { host: 'trainer-0' },
    });
  });

  test('several servers: each is published to', () => {
    const two = options(['--backend-url', 'http://127.0.0.1:8001/v1']);
    assert.deepEqual(two.weightSync?.servers, ['http://127.0.0.1:8000/v1', 'http://127.0.0.1:8001/v1']);
    // the local loop's own rollouts use the first; a step's job on a cluster spreads over them all
    assert.equal(loopEvaluation(two).agent.backendUrls, undefined);
    const cluster = options(['--backend-url', 'http://127.0.0.1:8001/v1', '--cluster', 'ray=10.0.0.1:6379']);
    assert.deepEqual(loopEvaluation(cluster).agent.backendUrls, [
      'http://127.0.0.1:8000/v1',
      'http://127.0.0.1:8001/v1',
    ]);
  });

  test('--weight-sync-address without nccl, restart without --reload-cmd: refused, naming the fix', () => {
    assert.throws(
      () => options(['--weight-sync-address', '10.0.0.5']),
      (e: unknown) =>
        e instanceof UsageError && /--weight-sync-address with --weight-sync auto/.test(e.message),
    );
    assert.throws(
      () => options(['--weight-sync', 'restart']),
      (e: unknown) => e instanceof UsageError && /--weight-sync restart without --reload-cmd/.test(e.message),
    );
    assert.equal(options(['--weight-sync', 'restart', '--reload-cmd', 'true']).weightSync?.choice, 'restart');
  });

  test('a value outside the choices, or an address that is not HOST[:PORT], is a usage error', () => {
    assert.match(
      usageError([...base, '--weight-sync', 'ipc']) ?? '',
      /--weight-sync ipc is not one of auto, disk, nccl, restart/,
    );
    assert.match(
      usageError([...base, '--weight-sync-pause', 'stop']) ?? '',
      /is not one of wait, keep, abort/,
    );
    assert.match(usageError([...base, '--weight-sync-address', 'a:b:c']) ?? '', /expected HOST or HOST:PORT/);
    assert.match(
      usageError([...base, '--weight-sync-address', 'h:70000']) ?? '',
      /expected HOST or HOST:PORT/,
    );
  });
});
