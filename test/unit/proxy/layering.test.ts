/** The proxy forwards and the capture side records: nothing under src/proxy/ imports from src/capture/. */
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';

const root = resolve(import.meta.dirname, '../../..');

/** every module specifier in a file: static imports/exports, dynamic import(), require() */
function specifiers(source: string): string[] {
  const out: string[] = [];
  const patterns = [
    /\b(?:import|export)\s[^'"]*?\bfrom\s*['"]([^'"]+)['"]/g,
    /\bimport\s*['"]([^'"]+)['"]/g,
    /\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g,
    /\brequire\s*\(\s*['"]([^'"]+)['"]\s*\)/g,
  ];
  for (const pattern of patterns) for (const m of source.matchAll(pattern)) out.push(m[1]!);
  return out;
}

test('the scan sees every kind of import (so the check below can fail)', () => {
  const found = specifiers(
    "import { a } from '../capture/a.ts';\nimport type {\n  B,\n} from \"../capture/b.ts\";\nexport * from '../capture/c.ts';\nimport '../capture/d.ts';\nconst e = await import('../capture/e.ts');",
  );
  assert.deepEqual(found.sort(), [
    '../capture/a.ts',
    '../capture/b.ts',
    '../capture/c.ts',
    '../capture/d.ts',
    '../capture/e.ts',
  ]);
});

test('src/proxy/ imports nothing from src/capture/', async () => {
  const proxyDir = join(root, 'src/proxy');
  const files = (await readdir(proxyDir, { recursive: true })).filter((f) => /\.[cm]?ts$/.test(f));
  assert.ok(files.includes('server.ts'), 'the scan found the proxy sources');
  const offending: string[] = [];
  for (const file of files) {
    const path = join(proxyDir, file);
    for (const spec of specifiers(await readFile(path, 'utf8'))) {
      if (!spec.startsWith('.')) continue;
      const target = relative(root, resolve(dirname(path), spec));
      if (target.startsWith(join('src', 'capture'))) offending.push(`src/proxy/${file} imports ${spec}`);
    }
  }
  assert.deepEqual(offending, []);
});
