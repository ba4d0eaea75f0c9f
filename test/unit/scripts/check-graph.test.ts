/**
 * The house check of scripts/check-shape.mjs (dependency-cruiser over .dependency-cruiser.cjs's rules) on
 * made-up trees: an import circle planted through two folders fails it, so does an import to a layer
 * above, one beside, and a folder LAYERS does not place; the documented import up, a circle inside one
 * folder and imports down pass. (This checkout's own src/ passes it in `npm run lint`.)
 */
import assert from 'node:assert/strict';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
// @ts-expect-error: a plain .mjs script without type declarations
import { checkGraph } from '../../../scripts/check-shape.mjs';
import { tempDir } from '../../support/temp.ts';

interface Offender {
  file: string;
  name: string;
  length: string;
}

/** A tree of `files` (path -> text) under a fresh folder; checked against this checkout's rules. */
function tree(files: Record<string, string>): string {
  const root = tempDir('polar-graph-');
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

const made: string[] = [];
const check = async (files: Record<string, string>): Promise<Offender[]> => {
  const root = tree(files);
  made.push(root);
  return checkGraph(root);
};
const rules = (found: Offender[]) => [...new Set(found.map((o) => o.length))].sort();

describe('the house check', () => {
  after(() => {
    for (const root of made) rmSync(root, { recursive: true, force: true });
  });

  it('fails on an import circle through two folders, naming the circle', async () => {
    const found = await check({
      'src/util/a.ts': "import { b } from '../options/b.ts';\nexport const a = () => b;\n",
      'src/options/b.ts': "import type { A } from '../util/a.ts';\nexport const b = 1;\nexport type B = A;\n",
    });
    assert.ok(rules(found).includes('no-cross-folder-circle'), JSON.stringify(found));
    const circle = found.find((o) => o.length === 'no-cross-folder-circle')!;
    assert.match(circle.name, /circle: src\/(util\/a|options\/b)\.ts -> .* -> src\/(util\/a|options\/b)\.ts/);
    // (a circle through two folders always has an import up in it)
    assert.ok(rules(found).includes('layer-util'));
  });

  it('fails on an import up (static, type-only or dynamic), one beside, and a folder in no layer', async () => {
    const found = await check({
      'src/capture/record.ts': 'export type R = string;\nexport const w = 1;\n',
      'src/proxy/bad.ts': "import type { R } from '../capture/record.ts';\nexport type X = R;\n",
      'src/proxy/dynamic.ts': "export const load = () => import('../capture/record.ts');\n",
      'src/gym/g.ts': 'export const g = 1;\n',
      'src/eval/e.ts': "import { g } from '../gym/g.ts';\nexport const e = g;\n",
      'src/newthing/x.ts': 'export const x = 1;\n',
    });
    assert.deepEqual(found.map((o) => `${o.file} ${o.length}`).sort(), [
      'src/eval/e.ts layer-eval-beside',
      'src/newthing no-undeclared-folder',
      'src/proxy/bad.ts layer-proxy',
      'src/proxy/dynamic.ts layer-proxy',
    ]);
  });

  it('passes imports down, a circle inside one folder, and the documented import up', async () => {
    const found = await check({
      'src/errors.ts': 'export class PolarError extends Error {}\n',
      'src/util/x.ts':
        "import { y } from './y.ts';\nimport { PolarError } from '../errors.ts';\nexport const x = () => [y, PolarError];\n",
      'src/util/y.ts': "import { x } from './x.ts';\nexport const y = () => x;\n",
      'src/train/schema.ts':
        "import { d } from '../options/defaults.ts';\nexport const CHECKPOINT_FILES = { latest: d };\n",
      'src/options/defaults.ts': "export const d = 'latest';\n",
      'src/options/backend.ts':
        "import { CHECKPOINT_FILES } from '../train/schema.ts';\nexport const f = CHECKPOINT_FILES;\n",
    });
    assert.deepEqual(found, []);
  });
});
