/** `polar eval --merge`: shard folders into the folder one machine writes; overlaps and gaps refused by id. */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { runView } from '../../../support/cluster/compare.ts';
import { tempDir } from '../../../support/temp.ts';
import { fixtures, localEval, runnableIds } from '../run/helpers.ts';

let tmp: string;
const ids = () => runnableIds().slice(0, 3).join(',');
before(() => {
  fixtures();
  tmp = tempDir('polar-merge-');
});
after(() => rmSync(tmp, { recursive: true, force: true }));

test('two shard folders merge into what one run writes; overlap and gaps are refused with the ids', () => {
  const sel = ['--instances', ids(), '--samples', '2'];
  assert.equal(localEval('gold', join(tmp, 'one'), sel).code, 0);
  assert.equal(localEval('gold', join(tmp, 's1'), [...sel, '--shard', '1/2']).code, 0);
  assert.equal(localEval('gold', join(tmp, 's2'), [...sel, '--shard', '2/2']).code, 0);
  const merged = localEval('gold', join(tmp, 'merged'), [
    ...sel,
    '--merge',
    join(tmp, 's1'),
    join(tmp, 's2'),
  ]);
  assert.equal(merged.code, 0, merged.stderr);
  assert.deepEqual(runView(join(tmp, 'merged')), runView(join(tmp, 'one')));

  const twice = localEval('gold', join(tmp, 'twice'), [...sel, '--merge', join(tmp, 's1'), join(tmp, 's1')]);
  assert.equal(twice.code, 2);
  assert.match(twice.stderr, /in more than one folder: polar-fixtures__\S+__s\d/);
  const gap = localEval('gold', join(tmp, 'gap'), [...sel, '--merge', join(tmp, 's1')]);
  assert.equal(gap.code, 2);
  assert.match(gap.stderr, /of the selection in no folder: polar-fixtures__\S+__s\d/);
});
