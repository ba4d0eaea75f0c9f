import assert from 'node:assert/strict';
import { test } from 'node:test';
import { stringifyJson, stringifyJsonPieces } from '../../../src/util/json-text.ts';
import { seededRandom } from '../../../src/util/random.ts';

// the characters JSON.stringify escapes or leaves, lone surrogates among them
const CHARS = ['a', '"', '\\', '\n', '\u0000', '\u001f', '\u2028', '\ud800', '\udc00', '😀', 'é', '\u007f'];

function randomValue(rand: () => number, depth: number): unknown {
  const text = (n: number) => {
    let s = '';
    for (let i = 0; i < n; i++) s += rand() < 0.9 ? 'x' : CHARS[(rand() * CHARS.length) | 0];
    return s;
  };
  if (depth > 4) return text(3);
  switch ((rand() * 12) | 0) {
    case 0:
      return null;
    case 1:
      return rand() < 0.5;
    case 2:
      return [1e21, -0, Number.NaN, Number.POSITIVE_INFINITY, 1.5, -3][(rand() * 6) | 0];
    case 3:
      // long enough to be remembered, often
      return text((rand() * 3000) | 0);
    case 4:
      return undefined;
    case 5:
      return () => 1;
    case 6:
      return new Date(0);
    case 7:
      return Array.from({ length: (rand() * 4) | 0 }, () => randomValue(rand, depth + 1));
    case 8:
      return Array.from({ length: (rand() * 4) | 0 }, (_, i) => i * 7);
    case 9:
      return Object.assign(Object.create(null), { [text(2)]: randomValue(rand, depth + 1) });
    default: {
      const o: Record<string, unknown> = {};
      for (let i = 0; i < ((rand() * 5) | 0); i++)
        o[rand() < 0.2 ? String(i) : text(4)] = randomValue(rand, depth + 1);
      return o;
    }
  }
}

test('stringifyJson gives the text JSON.stringify gives, byte for byte, seen strings or not', () => {
  const rand = seededRandom(7);
  const values = Array.from({ length: 3000 }, () => ({ a: randomValue(rand, 0), b: [randomValue(rand, 0)] }));
  // twice: the second pass finds the long strings remembered
  for (const pass of [1, 2]) {
    for (const value of values) assert.equal(stringifyJson(value), JSON.stringify(value), `pass ${pass}`);
  }
});

test('a long string equal to one seen before (another string object) gets the same text', () => {
  const long = `${'line "quoted" \\ \n'.repeat(2000)}end`;
  const first = stringifyJson({ content: long });
  const again = stringifyJson({ content: JSON.parse(JSON.stringify(long)) as string });
  assert.equal(first, JSON.stringify({ content: long }));
  assert.equal(again, first);
});

test('deep values, toJSON and class instances follow JSON.stringify; a cycle throws as it does', () => {
  let deep: unknown[] = [];
  const root = deep;
  for (let i = 0; i < 200; i++) {
    const next: unknown[] = ['y'.repeat(1500)];
    deep.push(next);
    deep = next;
  }
  assert.equal(stringifyJson(root), JSON.stringify(root));
  const odd = {
    when: new Date(86_400_000),
    map: new Map([[1, 2]]),
    boxed: Object('s'),
    buf: Buffer.from('ab'),
  };
  assert.equal(stringifyJson(odd), JSON.stringify(odd));
  const cycle: Record<string, unknown> = { text: 'z'.repeat(2000) };
  cycle.self = cycle;
  assert.throws(() => stringifyJson(cycle), TypeError);
  assert.throws(() => stringifyJson({ n: 1n }), TypeError);
  // a cycle that branches at every level (the walk for long strings is bounded: it throws, it does not hang)
  for (const text of ['short', 'w'.repeat(2000)]) {
    const branching: Record<string, unknown> = {};
    Object.assign(branching, { a: branching, b: [branching, branching], text });
    assert.throws(() => stringifyJson({ x: branching }), TypeError);
    assert.throws(() => stringifyJsonPieces({ x: branching }), TypeError);
  }
});

test('a value with no long string, or one past the first few thousand nodes, is the same text', () => {
  const plain = { a: [1, 2, { b: 'c', d: [true, null, 'e'.repeat(1023)] }], f: { g: -0, h: undefined } };
  assert.equal(stringifyJson(plain), JSON.stringify(plain));
  const wide = {
    items: Array.from({ length: 5000 }, (_, i) => ({ i, s: 'v'.repeat(i % 7) })),
    last: 'q'.repeat(3000),
  };
  assert.equal(stringifyJson(wide), JSON.stringify(wide));
  assert.equal(Buffer.concat(stringifyJsonPieces(wide)).toString('utf8'), JSON.stringify(wide));
});

test('stringifyJsonPieces gives the same text as UTF-8 buffers', () => {
  const rand = seededRandom(5);
  for (let i = 0; i < 2000; i++) {
    const value = { a: randomValue(rand, 0), b: [randomValue(rand, 0), `é${'"'.repeat(1500)}😀`] };
    assert.equal(Buffer.concat(stringifyJsonPieces(value)).toString('utf8'), JSON.stringify(value));
  }
});
