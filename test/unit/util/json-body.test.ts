/**
 * parseJsonBody (src/util/json-body.ts): a body's value from its bytes, long string literals remembered
 * by their bytes, must be JSON.parse's value for the text, key for key, on the first parse and on every
 * parse after (when the literals are remembered), and throw JSON.parse's own error for a text that is not JSON.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseJsonBody } from '../../../src/util/json-body.ts';
import { MAX_JSON_DEPTH } from '../../../src/util/json-depth.ts';
import { seededRandom } from '../../../src/util/random.ts';

// characters JSON escapes or leaves, multi-byte ones and lone surrogates among them
const CHARS = [
  'a',
  '"',
  '\\',
  '\n',
  '\u0000',
  '\u001f',
  '\u2028',
  '\ud800',
  '\udc00',
  '😀',
  'é',
  '/',
  ':',
  '{',
];

function text(rand: () => number, n: number): string {
  let s = '';
  for (let i = 0; i < n; i++) s += rand() < 0.9 ? 'x' : CHARS[(rand() * CHARS.length) | 0];
  return s;
}

/** the same few long texts come back often, as a conversation resent does */
function randomValue(rand: () => number, pool: string[], depth: number): unknown {
  if (depth > 4) return text(rand, 3);
  switch ((rand() * 9) | 0) {
    case 0:
      return null;
    case 1:
      return [1.5, -3, 0, 1e21, true, false][(rand() * 6) | 0];
    case 2:
    case 3:
      return pool[(rand() * pool.length) | 0];
    case 4:
      return text(rand, (rand() * 2000) | 0);
    case 5:
      return Array.from({ length: (rand() * 4) | 0 }, () => randomValue(rand, pool, depth + 1));
    default: {
      const o: Record<string, unknown> = {};
      for (let i = 0; i < ((rand() * 5) | 0); i++) {
        const key = rand() < 0.1 ? pool[0]! : rand() < 0.2 ? String(i) : text(rand, 4);
        o[key] = randomValue(rand, pool, depth + 1);
      }
      return o;
    }
  }
}

/** JSON text with whitespace of every kind between the tokens, as some clients write it */
function spaced(json: string, rand: () => number): string {
  let out = '';
  let inString = false;
  for (let i = 0; i < json.length; i++) {
    const c = json[i]!;
    out += c;
    if (inString) {
      if (c === '\\') out += json[++i];
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    if (!inString && ':,[]{}"'.includes(c) && rand() < 0.3)
      out += [' ', '\n', '\t', '\r\n '][(rand() * 4) | 0];
  }
  return out;
}

function same(body: string | Buffer): void {
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  const expected = JSON.parse(bytes.toString('utf8')) as unknown;
  const parsed = parseJsonBody(bytes);
  assert.ok('value' in parsed);
  assert.deepEqual(parsed.value, expected);
  assert.equal(JSON.stringify(parsed.value), JSON.stringify(expected));
}

test('the value is JSON.parse of the text, key for key, first and when its long literals are remembered', () => {
  const rand = seededRandom(5);
  const pool = Array.from({ length: 4 }, () => text(rand, 1000 + ((rand() * 3000) | 0)));
  const bodies = Array.from({ length: 400 }, () => {
    const json = JSON.stringify({
      model: 'm',
      messages: [randomValue(rand, pool, 0), randomValue(rand, pool, 0)],
    });
    return rand() < 0.3 ? spaced(json, rand) : json;
  });
  for (const pass of [1, 2]) {
    for (const body of bodies) {
      try {
        same(body);
      } catch (error) {
        assert.fail(`pass ${pass}: ${(error as Error).message}\n${body.slice(0, 300)}`);
      }
    }
  }
});

test('long keys, duplicate keys, "__proto__" and a literal that is an escape-only text', () => {
  const long = 'k'.repeat(3000);
  same(`{"${long}":"${long}","b":["${long}",{"${long}":1}]}`);
  // the last of duplicate keys wins, as in JSON.parse
  same(`{"a":"${'1'.repeat(2000)}","a":"${'2'.repeat(2000)}","a":"${'1'.repeat(2000)}"}`);
  const proto = `{"__proto__":"${'p'.repeat(2000)}","x":{"__proto__":["${'q'.repeat(2000)}"]}}`;
  same(proto);
  const value = (parseJsonBody(Buffer.from(proto)) as { value: Record<string, unknown> }).value;
  assert.equal(Object.getPrototypeOf(value), Object.prototype);
  assert.ok(Object.hasOwn(value, '__proto__'));
  assert.equal(typeof value.__proto__, 'string');
  same(`["${'\\u00e9\\n\\"'.repeat(400)}", "${'\\ud83d\\ude00'.repeat(200)}"]`);
  // the same text escaped two ways: two literals, one string
  same(`["${'é'.repeat(1200)}","${'\\u00e9'.repeat(1200)}"]`);
});

test('bytes that are not UTF-8 in a long literal decode as the whole body decodes them', () => {
  const head = Buffer.from('{"a":"');
  const tail = Buffer.from('","b":"x"}');
  for (const bad of [[0xff], [0xe2, 0x82], [0xc3], [0xf0, 0x9f, 0x98]]) {
    const body = Buffer.concat([head, Buffer.alloc(1500, 0x61), Buffer.from(bad), tail]);
    same(body);
    same(body);
  }
});

test('a text that is not JSON throws what JSON.parse throws for the whole text', () => {
  const long = 'x'.repeat(2000);
  const bad = [
    `{"a":"${long}",}`,
    `{"a":"${long}"`,
    `{"a":"${long}" "b"}`,
    `{"a":"${long.slice(0, 1000)}\n${long}"}`,
    `{"a":"${long}\\q"}`,
    `["${long}"]]`,
    `{"a":"${long}",`,
    `x"${long}"`,
  ];
  for (const body of bad) {
    // twice: the second time, the well-formed literals of the first are remembered
    for (const pass of [1, 2]) {
      let expected = '';
      try {
        JSON.parse(body);
      } catch (error) {
        expected = (error as Error).message;
      }
      assert.ok(expected, `not JSON: ${body.slice(0, 40)}`);
      assert.throws(
        () => parseJsonBody(Buffer.from(body)),
        { name: 'SyntaxError', message: expected },
        `pass ${pass}`,
      );
    }
  }
});

test('a string that looks like a placeholder without its mark stays as it is; a deep body is refused unparsed', () => {
  const long = 'y'.repeat(2000);
  same(
    JSON.stringify({
      a: long,
      b: '\u0000polar-literal-0',
      c: ['\u0000polar-literal-00000000000000000000000-0'],
    }),
  );
  const deep = `{"a":"${long}","b":${'['.repeat(MAX_JSON_DEPTH + 1)}${']'.repeat(MAX_JSON_DEPTH + 1)}}`;
  assert.deepEqual(parseJsonBody(Buffer.from(deep)), { deep: true });
});

test('a remembered literal is stepped over only where the string ends right after it', () => {
  const a = 'a'.repeat(1500);
  same(`{"x":"${a}"}`);
  // the same bytes, then more of the string: a longer literal, an escaped quote, an escape cut in two
  same(`{"x":"${a}${'b'.repeat(600)}","y":1}`);
  same(`{"x":"${a}\\"","y":"${a}"}`);
  same(`{"x":"${a}\\\\","y":["${a}"]}`);
  // as a key, it is a key
  same(`{"${a}":"${a}","z":{"${a}":["${a}",{"${a}":2}]}}`);
  // a remembered literal inside a text that is not JSON after it
  const bad = `{"x":"${a}","y":[1,}`;
  let expected = '';
  try {
    JSON.parse(bad);
  } catch (error) {
    expected = (error as Error).message;
  }
  assert.throws(() => parseJsonBody(Buffer.from(bad)), { name: 'SyntaxError', message: expected });
});
