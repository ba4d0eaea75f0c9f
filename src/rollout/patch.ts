/**
 * Taking the agent's patch and applying patches the way the SWE-bench harness does: `git apply`, then
 * `git apply --reject`, then `patch --fuzz=5`.
 */
import type { InstanceEnv } from './runtime/types.ts';

/** Directories harnesses and tools leave in the repository; never part of the patch. */
export const EXCLUDED_PATHS = [
  '.codex',
  '.claude',
  '.pi',
  '.polar',
  '.qwen',
  '.gemini',
  '.opencode',
  '.cursor',
  '.aider*',
  'node_modules',
  '__pycache__',
  '*.pyc',
  '.pytest_cache',
  '.mypy_cache',
  '.ruff_cache',
  '.tox',
  '.venv',
  '*.orig',
  '*.rej',
];

export function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

function excludePathspecs(): string {
  return EXCLUDED_PATHS.map(
    (p) => shellQuote(`:(exclude,glob)**/${p}`) + ' ' + shellQuote(`:(exclude,glob)**/${p}/**`),
  ).join(' ');
}

/** The pathspecs of a patch (shell words): the whole tree minus EXCLUDED_PATHS. */
export function patchPathspecs(): string {
  return `. ${excludePathspecs()}`;
}

/** The shell script that prints the patch: everything the agent changed since base_commit, binary-safe. */
export function diffScript(baseCommit: string): string {
  const specs = excludePathspecs();
  return [
    'set -e',
    `git -c safe.directory='*' add -A -- . ${specs}`,
    `git -c safe.directory='*' -c core.quotepath=off diff --cached --binary --no-color --no-ext-diff ${shellQuote(baseCommit)} -- . ${specs}`,
  ].join('\n');
}

export interface PatchResult {
  patch: string;
  error?: string;
}

export async function extractPatch(env: InstanceEnv, baseCommit: string): Promise<PatchResult> {
  const r = await env.exec(diffScript(baseCommit), { timeoutMs: 120_000 });
  if (r.exitCode !== 0) return { patch: '', error: `git diff failed: ${r.output.trim().slice(-500)}` };
  return { patch: r.output };
}

export interface ApplyResult {
  applied: boolean;
  method: 'git apply' | 'git apply --reject' | 'patch --fuzz=5' | null;
  output: string;
}

/**
 * Applies a patch in env's workdir with the harness's three fallbacks. Between attempts the work tree
 * is reset, so call it on a fresh environment (as grading does).
 */
export async function applyPatch(
  env: InstanceEnv,
  patch: string,
  name = 'polar-model.diff',
): Promise<ApplyResult> {
  const text = patch.endsWith('\n') ? patch : `${patch}\n`;
  const target = `${env.scratch}/${name}`;
  await env.writeFile(target, text);
  const attempts: Array<[ApplyResult['method'], string]> = [
    ['git apply', `git apply --verbose ${shellQuote(target)}`],
    ['git apply --reject', `git apply --verbose --reject ${shellQuote(target)}`],
    ['patch --fuzz=5', `patch --batch --fuzz=5 -p1 -i ${shellQuote(target)}`],
  ];
  let output = '';
  for (const [method, cmd] of attempts) {
    const r = await env.exec(cmd, { timeoutMs: 120_000 });
    output += `$ ${cmd}\n${r.output}`;
    if (r.exitCode === 0) return { applied: true, method, output };
    // a failed --reject leaves partial hunks behind; undo before the next attempt
    await env.exec('git checkout -q -- . && git clean -fdq -e "*.diff"', { timeoutMs: 60_000 });
  }
  return { applied: false, method: null, output };
}
