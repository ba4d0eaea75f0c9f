import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { InputError } from '../../../src/errors.ts';
import { parseJsonLine, readLines, splitLines, TruncatedLine } from '../../../src/util/jsonl.ts';
import { tempDir } from '../../support/temp.ts';

const dir = tempDir('polar-jsonl-');
after(() => rmSync(dir, { recursive: true, force: true }));

const TEXT = '{"a":1}\r\n\n  \n{"b":2}\n{"c":';

test('a file streamed and a text split give the same lines: numbers, \\r dropped, blanks skipped, the cut last line', async () => {
  const path = join(dir, 'x.jsonl');
  writeFileSync(path, TEXT);
  const streamed = [];
  for await (const line of readLines(path)) streamed.push(line);
  const expected = [
    { line: 1, text: '{"a":1}', terminated: true },
    { line: 4, text: '{"b":2}', terminated: true },
    { line: 5, text: '{"c":', terminated: false },
  ];
  assert.deepEqual(streamed, expected);
  assert.deepEqual(splitLines(TEXT), expected);
  assert.deepEqual(splitLines(`${TEXT}3}\n`).at(-1), { line: 5, text: '{"c":3}', terminated: true });
  assert.deepEqual(splitLines(''), []);
});

test('parseJsonLine: bad JSON names file:line; an unterminated bad last line is a TruncatedLine', () => {
  assert.deepEqual(parseJsonLine('f.jsonl', { line: 2, text: '{"a":1}' }), { a: 1 });
  // a last line without newline that parses is a whole record
  assert.deepEqual(parseJsonLine('f.jsonl', { line: 2, text: '{"a":1}', terminated: false }), { a: 1 });
  assert.throws(
    () => parseJsonLine('f.jsonl', { line: 3, text: '{"a"', terminated: true }),
    (e: unknown) =>
      e instanceof InputError &&
      !(e instanceof TruncatedLine) &&
      /^f\.jsonl:3: not valid JSON/.test(e.message),
  );
  assert.throws(
    () => parseJsonLine('f.jsonl', { line: 4, text: '{"a"', terminated: false }),
    (e: unknown) =>
      e instanceof TruncatedLine && /^f\.jsonl:4: the last line is cut off \(4 characters/.test(e.message),
  );
});
