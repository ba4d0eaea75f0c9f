/** PrefixCache (src/util/prefix-cache.ts): entries under their key, least recently used out past the bound. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PrefixCache } from '../../../src/util/prefix-cache.ts';

const cache = () =>
  new PrefixCache<string, string>(
    (e) => e.slice(0, 2),
    (e) => e.length,
    10,
  );

test('entries are found under their key, in the order added', () => {
  const c = cache();
  c.add('abcd');
  c.add('abxy');
  c.add('zz'); // 10 in all: the bound, nothing goes
  assert.deepEqual(c.candidates('ab'), ['abcd', 'abxy']);
  assert.deepEqual(c.candidates('zz'), ['zz']);
  assert.equal(c.candidates('qq'), undefined);
});

test('past the bound the least recently used go first; a touched entry goes last', () => {
  const c = cache();
  c.add('abcd'); // 4
  c.add('ab12'); // 8
  c.touch('abcd');
  c.add('zz1'); // 11 > 10: ab12, the least recently used, goes
  assert.deepEqual(c.candidates('ab'), ['abcd']);
  c.add('zz2345'); // 4 + 3 + 6 = 13: abcd goes
  assert.equal(c.candidates('ab'), undefined);
  assert.deepEqual(c.candidates('zz'), ['zz1', 'zz2345']);
});

test('an entry larger than the bound is not kept and sends nothing out; drop removes one', () => {
  const c = cache();
  c.add('abcd');
  c.add('ab-longer-than-ten');
  assert.deepEqual(c.candidates('ab'), ['abcd']);
  c.drop('abcd');
  c.drop('abcd');
  assert.equal(c.candidates('ab'), undefined);
  c.add('ab123456'); // the bound counts only what is held: 8 fits after the drop
  assert.deepEqual(c.candidates('ab'), ['ab123456']);
});
