/**
 * `polar eval --resume` continues a run only with the settings it was made with (issue 31 item 6): a
 * flag that changes results (here --max-tokens-cap and --agent-timeout) is refused, naming the flag and
 * both values, before anything runs; a flag that only changes how the run goes (--concurrency) is not.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { settingsDiff } from '../../../../src/rollout/run/settings.ts';
import { tempDir } from '../../../support/temp.ts';
import { fixtures, localEval } from './helpers.ts';

const tmp = tempDir('polar-resume-settings-');
const ONE = ['--instances', 'polar-fixtures__jsutil-5'];

before(() => fixtures());

test('--resume refuses a changed setting that decides results, naming the flag', () => {
  const out = join(tmp, 'run');
  const first = localEval('empty', out, [...ONE, '--max-tokens-cap', '64']);
  assert.equal(first.code, 0, first.stderr);
  const recorded = JSON.parse(readFileSync(join(out, 'run.json'), 'utf8')).settings;
  assert.equal(recorded['--max-tokens-cap'], 64);
  assert.equal(recorded['--agent'], 'empty');

  const capped = localEval('empty', out, [...ONE, '--resume', '--max-tokens-cap', '32']);
  assert.equal(capped.code, 2, capped.stderr);
  assert.match(capped.stderr, /--resume: --max-tokens-cap 32 \(the run: 64\)/);
  assert.match(capped.stderr, /another --out, or --overwrite/);
  assert.doesNotMatch(capped.stderr, /without isolation/, 'refused before the runtime is set up');

  const dropped = localEval('empty', out, [...ONE, '--resume', '--agent-timeout', '5']);
  assert.equal(dropped.code, 2, dropped.stderr);
  assert.match(
    dropped.stderr,
    /--max-tokens-cap \(not given\) \(the run: 64\), --agent-timeout 5 \(the run: 1800\)/,
  );

  const same = localEval('empty', out, [...ONE, '--resume', '--max-tokens-cap', '64', '--concurrency', '3']);
  assert.equal(same.code, 0, same.stderr);
});

test('settingsDiff: a flag given on one side only is a difference; equal values are not', () => {
  assert.deepEqual(settingsDiff({ '--seed': 1, '--model': 'm' }, { '--seed': 1, '--model': 'm' }), []);
  assert.deepEqual(settingsDiff({ '--seed': 1 }, { '--seed': undefined }), ['--seed']);
  assert.deepEqual(settingsDiff({ '--a': { x: 1 } }, { '--a': { x: 2 } }), ['--a']);
});
