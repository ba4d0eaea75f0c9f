/**
 * dependency-cruiser's configuration for src/: the house of the code, bottom to top, and the rules that
 * keep it. `node scripts/house.mjs` draws the house from it (floors, import circles, imports pointing up;
 * the definitions are at the top of that script); `npm run check:shape` (scripts/check-shape.mjs) fails
 * on a broken rule. README, "Layout", says what each folder holds.
 *
 * LAYERS: every top-level entry of src/ (a folder, or a file at its root), bottom to top; the names on one
 * line share a layer (they import nothing of each other). A file may import from its own folder and from
 * the folders of the layers below; an import to a folder above points up and is refused unless UPWARD
 * lists it (the importing file and the imported one, with why). A new folder goes into LAYERS first.
 */
const LAYERS = [
  ['errors.ts', 'version.ts'],
  ['util'],
  ['options'],
  ['http'],
  ['protocols'],
  ['tokenizer'],
  ['backends', 'harnesses'],
  ['proxy'],
  ['capture'],
  ['trajectory'],
  ['build', 'train'],
  ['rollout'],
  ['eval', 'gym', 'grade', 'env', 'serve', 'doctor', 'export', 'setup'],
  ['loop'],
  ['inspect'],
  ['cli.ts'],
];

/** The imports allowed to point up, each with why (scripts/house.mjs counts them). */
const UPWARD = [
  {
    from: 'src/options/backend.ts',
    to: 'src/train/schema.ts',
    why:
      "--backend embedded refuses a polar train checkpoint by its files (checkEmbeddedModel reads CHECKPOINT_FILES): the one list of them, which the Python worker reads too (train/schema.ts writes it into schema.json); kept there rather than putting the trainer's file contract among the flags' defaults",
  },
];

/** `src/<name>` as a path pattern: a folder and all below it, or a root file. */
const at = (name) => `^src/${name.replaceAll('.', '\\.')}${name.endsWith('.ts') ? '$' : '/'}`;
const any = (names) => `(${names.map(at).join('|')})`;

/** One rule per layer: nothing below imports a folder above, but for the UPWARD imports. */
function layerRules() {
  const rules = [];
  LAYERS.forEach((names, i) => {
    for (const name of names)
      if (names.length > 1)
        rules.push({
          name: `layer-${name}-beside`,
          comment: `src/${name} imports nothing of the folders that share its layer: .dependency-cruiser.cjs, LAYERS`,
          severity: 'error',
          from: { path: at(name) },
          to: { path: any(names.filter((other) => other !== name)) },
        });
    const above = LAYERS.slice(i + 1).flat();
    if (above.length === 0) return;
    for (const name of names) {
      const exceptions = UPWARD.filter((u) => new RegExp(at(name)).test(u.from));
      rules.push({
        name: `layer-${name}`,
        comment: `src/${name} imports nothing above its layer (${above.join(', ')}): .dependency-cruiser.cjs, LAYERS`,
        severity: 'error',
        from: { path: at(name), ...(exceptions.length ? { pathNot: exceptions.map((u) => `^${u.from}$`) } : {}) },
        to: { path: any(above) },
      });
      for (const u of exceptions)
        rules.push({
          name: `layer-${name}-upward`,
          comment: `${u.from} points up only as UPWARD lists`,
          severity: 'error',
          from: { path: `^${u.from}$` },
          to: {
            path: any(above),
            pathNot: UPWARD.filter((v) => v.from === u.from).map((v) => `^${v.to}$`),
          },
        });
    }
  });
  return rules;
}

module.exports = {
  forbidden: [
    {
      name: 'no-cross-folder-circle',
      comment:
        'an import circle through two top-level folders of src/: put the shared type or constant on the lower side',
      severity: 'error',
      from: { path: '^src/([^/]+)/' },
      to: { circular: true, via: { pathNot: '^src/$1/' } },
    },
    {
      name: 'no-undeclared-folder',
      comment: 'every top-level entry of src/ has its place in LAYERS (.dependency-cruiser.cjs)',
      severity: 'error',
      from: { path: '^src/', pathNot: any(LAYERS.flat()) },
      to: {},
    },
    ...layerRules(),
  ],
  options: {
    includeOnly: '^src/',
    doNotFollow: { path: 'node_modules' },
    // type-only imports count: a type is a dependency of the code that names it
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    moduleSystems: ['es6'],
    exclude: { path: '(^|/)__pycache__/' },
  },
};
// for scripts/house.mjs; not enumerable, so dependency-cruiser's own command line accepts the file too
Object.defineProperty(module.exports, 'layers', { value: LAYERS });
Object.defineProperty(module.exports, 'upward', { value: UPWARD });
