/**
 * scripts/check-shape.mjs on a made-up checkout: each size limit, its edge, and the exit codes (the house
 * check over the same tree: test/unit/scripts/check-graph.test.ts).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
// @ts-expect-error: a plain .mjs script without type declarations
import { checkShape } from '../../../scripts/check-shape.mjs';
import { tempDir } from '../../support/temp.ts';

const script = new URL('../../../scripts/check-shape.mjs', import.meta.url).pathname;

/** A function declaration spanning exactly `lines` lines. */
function fn(name: string, lines: number): string {
  const body = Array.from({ length: lines - 2 }, (_, i) => `  const v${i} = ${i};`);
  return [`export function ${name}(): void {`, ...body, '}', ''].join('\n');
}

describe('check-shape', () => {
  let root: string;
  const put = async (path: string, text: string) => {
    await mkdir(dirname(join(root, path)), { recursive: true });
    await writeFile(join(root, path), text);
  };

  before(async () => {
    root = tempDir('polar-shape-');
    await put('src/util/ok.ts', fn('fits', 120));
    await put('src/util/long-fn.ts', fn('tooLong', 121));
    await put(
      'src/util/methods.ts',
      `export class Box {\n${fn('x', 130).replace('export function x(): void', '  method()')}}\nexport const arrow = () => {\n${'  void 0;\n'.repeat(125)}};\n`,
    );
    await put('src/util/big.ts', 'export const x = 1;\n'.repeat(451));
    await put('src/util/edge.ts', 'export const y = 1;\n'.repeat(450));
    await put('src/train/worker/big.py', 'x = 1\n'.repeat(451));
    // one import against the house: the proxy below the recorder
    await put('src/capture/record.ts', 'export type R = string;\n');
    await put('src/proxy/bad.ts', "import type { R } from '../capture/record.ts';\nexport type X = R;\n");
  });
  after(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('finds each offender with its file, line, name and length, and nothing at the limits', () => {
    const found = checkShape(root);
    assert.deepEqual(
      found.files.map((o: { file: string; length: number }) => `${o.file} ${o.length}`),
      ['src/train/worker/big.py 451', 'src/util/big.ts 451'],
    );
    assert.deepEqual(
      found.functions.map((o: { file: string; line: number; name: string; length: number }) =>
        [o.file, o.line, o.name, o.length].join(' '),
      ),
      [
        'src/util/long-fn.ts 1 tooLong 121',
        'src/util/methods.ts 2 Box.method 130',
        'src/util/methods.ts 133 arrow 127',
      ],
    );
  });

  it('exits 1 listing offenders, and 0 with --report', () => {
    const failing = spawnSync(process.execPath, [script, '--root', root], { encoding: 'utf8' });
    assert.equal(failing.status, 1);
    assert.match(failing.stdout, /src\/util\/long-fn\.ts:1 tooLong 121/);
    assert.match(failing.stdout, /src\/proxy\/bad\.ts:- src\/capture\/record\.ts layer-proxy/);
    assert.match(failing.stdout, /check-shape: 6 offenders/);
    const report = spawnSync(process.execPath, [script, '--root', root, '--report'], { encoding: 'utf8' });
    assert.equal(report.status, 0);
    assert.equal(report.stdout.replace(' (report only)', ''), failing.stdout);
  });

  it('exits 0 on a checkout in shape', async () => {
    const clean = tempDir('polar-shape-ok-');
    try {
      await mkdir(join(clean, 'src', 'util'), { recursive: true });
      await writeFile(join(clean, 'src', 'util', 'a.ts'), fn('a', 50));
      const run = spawnSync(process.execPath, [script, '--root', clean], { encoding: 'utf8' });
      assert.equal(run.status, 0);
      assert.match(run.stdout, /check-shape: ok/);
    } finally {
      await rm(clean, { recursive: true, force: true });
    }
  });
});
