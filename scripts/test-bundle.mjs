// The fast tier's test files as one JavaScript file each (esbuild, the transpiler tsx runs too), for
// scripts/test.mjs: node runs each bundle without tsx. Under `node --import tsx` every test process
// starts tsx's loader thread and sends each of its few hundred src modules through its hooks; that cost
// about as much CPU as the tests of most files. A bundle holds the test file and every .ts module it
// imports (statically or by a literal dynamic import); packages stay external, resolved from the
// repository's node_modules as before. `import.meta.url`, `.dirname` and `.filename` are pinned to each
// module's own source file, so the paths the code derives from them (bin/polar, the watchdog, the
// worker folder, package.json) are the same as when it runs from the sources. The bundles go under
// .tmp/test-bundles/ (inside the repository: `import.meta.resolve` and packages resolve as from src/).
// The embedded engine's worker thread and every spawned `bin/polar` still run the sources through tsx.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';

/** Where the bundles go, under the repository root. */
export const BUNDLE_DIR = join('.tmp', 'test-bundles');

/** esbuild plugin: import.meta.url / dirname / filename of each repository module, as literals. */
const pinImportMeta = {
  name: 'pin-import-meta',
  setup(b) {
    b.onLoad({ filter: /\.(ts|mts|mjs|js)$/ }, async (args) => {
      if (args.path.includes('/node_modules/')) return undefined;
      const text = await readFile(args.path, 'utf8');
      if (!text.includes('import.meta')) return undefined;
      const contents = text
        .replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href))
        .replaceAll('import.meta.dirname', JSON.stringify(join(args.path, '..')))
        .replaceAll('import.meta.filename', JSON.stringify(args.path));
      return { contents, loader: /\.m?ts$/.test(args.path) ? 'ts' : 'js' };
    });
  },
};

/**
 * Bundles `files` (paths relative to `root`) in one esbuild run; returns the bundles' paths (relative
 * to `root`, in the same order): test/unit/a/b.test.ts -> .tmp/test-bundles/test/unit/a/b.test.mjs.
 */
export async function bundleTests(root, files) {
  const outdir = join(root, BUNDLE_DIR);
  await build({
    absWorkingDir: root,
    entryPoints: files,
    outbase: '.',
    outdir,
    outExtension: { '.js': '.mjs' },
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    packages: 'external',
    plugins: [pinImportMeta],
    logLevel: 'warning',
  });
  return files.map((f) => join(BUNDLE_DIR, f.replace(/\.ts$/, '.mjs')));
}
