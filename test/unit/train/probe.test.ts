/**
 * The Python probe starts Python once, cheaply: it reads the installed packages' versions from their
 * metadata and imports none of them (torch is imported once per polar train, by the worker).
 */
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { probePython } from '../../../src/train/env.ts';
import { tempDir } from './fixtures.ts';

describe('Python starts once', () => {
  test('the probe reads the installed versions without importing torch', async () => {
    const dir = await tempDir('polar-probe-');
    const site = join(dir, 'site');
    const marker = join(dir, 'torch-was-imported');
    mkdirSync(join(site, 'torch'), { recursive: true });
    mkdirSync(join(site, 'torch-2.9.0+cpu.dist-info'));
    writeFileSync(join(site, 'torch', '__init__.py'), `open(${JSON.stringify(marker)}, "w").write("x")\n`);
    writeFileSync(
      join(site, 'torch-2.9.0+cpu.dist-info', 'METADATA'),
      'Metadata-Version: 2.1\nName: torch\nVersion: 2.9.0+cpu\n',
    );
    const python = join(dir, 'python');
    writeFileSync(python, `#!/bin/sh\nPYTHONPATH=${site} exec python3 "$@"\n`);
    chmodSync(python, 0o755);
    const probe = await probePython(python);
    assert.ok(!('problem' in probe), JSON.stringify(probe));
    assert.equal(probe.torch, '2.9.0+cpu');
    assert.equal(existsSync(marker), false, 'the probe imported torch');
  });
});
