import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { StopStrings } from '../../../src/tokenizer/stop-strings.ts';

describe('stop strings over a text stream', () => {
  test('holds back a possible stop string, releases it when it is not one', () => {
    const s = new StopStrings(['</stop>']);
    assert.equal(s.push('hello </st'), 'hello ');
    assert.equal(s.push('ill here'), '</still here');
    assert.equal(s.flush(), '');
    assert.equal(s.hit, null);
  });

  test('cuts at the first stop string of several and ends the stream', () => {
    const s = new StopStrings(['END', 'x']);
    assert.equal(s.push('abc E'), 'abc ');
    assert.equal(s.push('ND more x'), '');
    assert.equal(s.hit, 'END');
    assert.equal(s.push('after'), '');
    assert.equal(s.flush(), '');
  });

  test('any split of the stream gives the text before the first stop string (property)', () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 40 }),
        fc.array(fc.nat(40), { maxLength: 6 }),
        fc.constantFrom('ab', 'b', 'zzz'),
        (text, cuts, stop) => {
          const s = new StopStrings([stop]);
          const points = [...new Set(cuts.map((c) => Math.min(c, text.length)))].sort((a, b) => a - b);
          let out = '';
          let prev = 0;
          for (const p of [...points, text.length]) {
            out += s.push(text.slice(prev, p));
            prev = p;
          }
          out += s.flush();
          const at = text.indexOf(stop);
          assert.equal(out, at < 0 ? text : text.slice(0, at));
          assert.equal(s.hit, at < 0 ? null : stop);
        },
      ),
    );
  });
});
