/**
 * Builds the mini SWE-bench fixture (fixtures/swe/): one git repository per fixtures/swe/src/<owner>/<name>
 * tree, committed once with a fixed author, committer and date so base_commit is the same on every
 * machine, into fixtures/swe/repos/ (ignored by git: nested repositories cannot be committed), and the
 * wheel of every repository with an in-tree build backend (`_build/`, no index needed) at its base
 * state into fixtures/swe/wheels/ (ignored: what an environment's pip installs as the released base
 * version). With --write it also regenerates fixtures/swe/mini.jsonl from fixtures/swe/tasks/<id>/
 * (meta.json, fix/ = files after the gold fix, tests/ = test files after the test patch), diffing with
 * git, fixtures/swe/envs.jsonl from fixtures/swe/env-tasks/<id>/ (rows whose environment polar
 * builds: `pip_packages`, `install`) and fixtures/swe/shapes.jsonl from fixtures/swe/shape-tasks/<id>/
 * (environments in the shapes real repositories have: a `[build-system]` build requirement, a test
 * runner that crashes on a newer Python).
 *
 *   node --import tsx scripts/swe-fixtures.ts            build repos, check mini.jsonl is current
 *   node --import tsx scripts/swe-fixtures.ts --write    build repos, rewrite mini.jsonl
 */
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { commitTree } from '../src/rollout/dataset-repos.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../fixtures/swe');
// an empty global config polar owns (never /dev/null: `git config --global` would replace it)
const GLOBAL_CONFIG_DIR = mkdtempSync(join(tmpdir(), 'polar-fixture-gitconfig-'));
const GLOBAL_CONFIG = join(GLOBAL_CONFIG_DIR, 'gitconfig');
writeFileSync(GLOBAL_CONFIG, '');
// removed with the process (this file is imported by the tests, one process per test file)
process.on('exit', () => rmSync(GLOBAL_CONFIG_DIR, { recursive: true, force: true }));

function git(cwd: string, args: string[], input?: string): string {
  return execFileSync('git', args, {
    cwd,
    input,
    encoding: 'utf8',
    stdio: ['pipe', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH,
      HOME: cwd,
      GIT_CONFIG_GLOBAL: GLOBAL_CONFIG,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_AUTHOR_NAME: 'polar fixtures',
      GIT_AUTHOR_EMAIL: 'fixtures@polar.invalid',
      GIT_COMMITTER_NAME: 'polar fixtures',
      GIT_COMMITTER_EMAIL: 'fixtures@polar.invalid',
      TZ: 'UTC',
    },
  });
}

function walk(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    if (name === '__pycache__' || name.endsWith('.pyc') || name === 'node_modules') continue;
    const full = join(dir, name);
    if (statSync(full).isDirectory()) out.push(...walk(full));
    else out.push(full);
  }
  return out;
}

/** Copies a tree file by file (fixed 0644 modes, no caches) into `to`. */
function copyTree(from: string, to: string): void {
  for (const file of walk(from)) {
    const target = join(to, relative(from, file));
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, readFileSync(file), { mode: 0o644 });
  }
}

function repoNames(root = ROOT): string[] {
  const src = join(root, 'src');
  return readdirSync(src)
    .sort()
    .flatMap((owner) =>
      readdirSync(join(src, owner))
        .sort()
        .map((name) => `${owner}/${name}`),
    );
}

/**
 * Builds one repository at its base state (src/rollout/dataset-repos.ts, what polar itself does on first
 * use of a dataset that ships its sources); a repository there at another commit is replaced. Returns its
 * HEAD (the base_commit).
 */
function buildRepo(repo: string, root: string, reposDir: string): string {
  return commitTree(join(root, 'src', ...repo.split('/')), join(reposDir, ...repo.split('/')), {
    replace: true,
  });
}

/** Builds every fixture repository into `reposDir` (default fixtures/swe/repos); idempotent. */
export function ensureFixtureRepos(
  options: { root?: string; reposDir?: string } = {},
): Record<string, string> {
  const root = options.root ?? ROOT;
  const reposDir = options.reposDir ?? join(root, 'repos');
  const heads: Record<string, string> = {};
  for (const repo of repoNames(root)) heads[repo] = buildRepo(repo, root, reposDir);
  return heads;
}

function diffAfter(repoDir: string, overlay: string): string {
  const tmp = mkdtempSync(join(tmpdir(), 'polar-fixture-diff-'));
  try {
    git(tmp, ['clone', '-q', repoDir, 'r']);
    const work = join(tmp, 'r');
    copyTree(overlay, work);
    git(work, ['add', '-A']);
    return git(work, ['diff', '--cached', '--no-color', '--no-ext-diff', 'HEAD']);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/**
 * The wheels of the repositories with an in-tree build backend, built at their base state, and of the
 * build backends in fixtures/swe/backends/ (each builds itself: what an index would hold for them).
 */
export function ensureFixtureWheels(options: { root?: string; wheelsDir?: string } = {}): string {
  const root = options.root ?? ROOT;
  const wheelsDir = options.wheelsDir ?? join(root, 'wheels');
  mkdirSync(wheelsDir, { recursive: true });
  const backends = join(root, 'backends');
  for (const name of existsSync(backends) ? readdirSync(backends).sort() : []) {
    const module = name.replaceAll('-', '_');
    const code = `import sys; sys.path.insert(0, 'src'); import ${module}; print(${module}.build_wheel(sys.argv[1]))`;
    execFileSync('python3', ['-c', code, wheelsDir], {
      cwd: join(backends, name),
      env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
    });
  }
  for (const repo of repoNames(root)) {
    const src = join(root, 'src', ...repo.split('/'));
    const pyproject = join(src, 'pyproject.toml');
    const backend = existsSync(pyproject)
      ? /build-backend = "(\w+)"/.exec(readFileSync(pyproject, 'utf8'))?.[1]
      : undefined;
    if (!backend || !existsSync(join(src, '_build', `${backend}.py`))) continue;
    const code = `import sys; sys.path.insert(0, '_build'); import ${backend}; print(${backend}.build_wheel(sys.argv[1]))`;
    execFileSync('python3', ['-c', code, wheelsDir], {
      cwd: src,
      env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
    });
  }
  return wheelsDir;
}

/** The dataset rows, computed from the task folders (`tasks`, or `env-tasks`). */
export function generateRows(
  options: { root?: string; reposDir?: string; tasks?: string } = {},
): Array<Record<string, unknown>> {
  const root = options.root ?? ROOT;
  const reposDir = options.reposDir ?? join(root, 'repos');
  const heads = ensureFixtureRepos({ root, reposDir });
  const rows: Array<Record<string, unknown>> = [];
  const tasks = join(root, options.tasks ?? 'tasks');
  for (const id of readdirSync(tasks).sort(
    (a, b) => Number(a.split('-').pop()) - Number(b.split('-').pop()),
  )) {
    const dir = join(tasks, id);
    const meta = JSON.parse(readFileSync(join(dir, 'meta.json'), 'utf8')) as Record<string, unknown>;
    const repo = meta.repo as string;
    const repoDir = join(reposDir, ...repo.split('/'));
    rows.push({
      repo,
      instance_id: id,
      base_commit: heads[repo],
      patch: diffAfter(repoDir, join(dir, 'fix')),
      test_patch: diffAfter(repoDir, join(dir, 'tests')),
      problem_statement: meta.problem_statement,
      hints_text: meta.hints_text ?? '',
      created_at: meta.created_at,
      version: meta.version,
      // as in the published datasets: JSON-encoded lists inside strings
      FAIL_TO_PASS: JSON.stringify(meta.FAIL_TO_PASS),
      PASS_TO_PASS: JSON.stringify(meta.PASS_TO_PASS),
      environment_setup_commit: heads[repo],
      difficulty: meta.difficulty ?? '',
      test_cmd: meta.test_cmd,
      log_parser: meta.log_parser,
      // the environment polar builds for the row (env-tasks only)
      ...Object.fromEntries(
        ['python', 'pip_packages', 'pre_install', 'install']
          .filter((k) => k in meta)
          .map((k) => [k, meta[k]]),
      ),
    });
  }
  return rows;
}

export const MINI_DATASET = join(ROOT, 'mini.jsonl');
export const ENVS_DATASET = join(ROOT, 'envs.jsonl');
/** rows of the environment shapes met on real repositories (fixtures/swe/shape-tasks) */
export const SHAPES_DATASET = join(ROOT, 'shapes.jsonl');
export const FIXTURE_REPOS = join(ROOT, 'repos');
export const FIXTURE_WHEELS = join(ROOT, 'wheels');

function main(argv: string[]): number {
  ensureFixtureWheels();
  for (const [file, tasks] of [
    [MINI_DATASET, 'tasks'],
    [ENVS_DATASET, 'env-tasks'],
    [SHAPES_DATASET, 'shape-tasks'],
  ] as const) {
    const rows = generateRows({ tasks });
    const text = rows.map((r) => JSON.stringify(r)).join('\n') + '\n';
    if (argv.includes('--write')) {
      writeFileSync(file, text);
      process.stderr.write(`wrote ${file} (${rows.length} tasks)\n`);
      continue;
    }
    const current = existsSync(file) ? readFileSync(file, 'utf8') : '';
    if (current !== text) {
      process.stderr.write(`${file} is out of date: run node --import tsx scripts/swe-fixtures.ts --write\n`);
      return 1;
    }
    process.stderr.write(`${file} is current (${rows.length} tasks)\n`);
  }
  process.stderr.write(`fixture repos built in ${FIXTURE_REPOS}, wheels in ${FIXTURE_WHEELS}\n`);
  return 0;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url))
  process.exitCode = main(process.argv.slice(2));
