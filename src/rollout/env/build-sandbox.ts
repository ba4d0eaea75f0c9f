/**
 * Environment builds with the least rights that work (issue 43, item 3). A build runs the spec's
 * interpreter (`python -m venv`), pip (which builds sdists: their setup.py or build backend is code),
 * and the environment's own Python once installed (whose .pth files run at start). Each of these steps
 * runs here in a bubblewrap sandbox (src/rollout/runtime/bwrap.ts, the samples' sandbox) that sees:
 * - the system directories read-only, a private /tmp (tmpfs), /proc and /dev;
 * - the environment's folder, the only writable path (at its own path: a venv records it);
 * - read-only: the interpreter's prefix, pip's configuration files, each local package source (a
 *   `file://` index with its parent, a find-links folder; src/rollout/env/pip-sources.ts) and certificates;
 * - nothing else: not the home folder (but its pip.conf), not /root, not --repos, not the cache's other
 *   environments. As root, bwrap sets the mounts up and the step drops to a uid of its own (no
 *   capabilities, no new privileges); the folder is handed to that uid for the build and back after.
 * The network is the host's only for a pip step whose sources include a remote one (PyPI, the default
 * index, unless `no-index`); every other step, and every pip step on local sources, has none. Variables:
 * an allow-list (pip's, locale, proxies, certificates, compiler flags); never the caller's tokens.
 *
 * Where the sandbox does not work (no bwrap, user namespaces off: the probe of `polar doctor --runtime
 * sandbox`), steps run unsandboxed with polar's rights and full environment, as before, and polar says
 * so once, naming why and the fix. `openBuildSandbox` is the reusable part: a step is `run(argv, {
 * readOnly, network })`, so another build step (a wheelhouse, say) gets the same walls.
 */
import { existsSync, realpathSync } from 'node:fs';
import { chown, lstat, mkdir, realpath, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { log } from '../../util/log.ts';
import { type ExecResult, execTree } from '../exec.ts';
import { type Bind, bwrapArgs, SYSTEM_DIRS, systemLayout } from '../runtime/bwrap.ts';
import { probeSandbox } from '../runtime/probe.ts';
import { pipSources } from './pip-sources.ts';
import { EnvBuildError, type PythonInfo } from './types.ts';

const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** variables a build step gets from polar's environment (names, or prefixes ending in `_`) */
const PASSED = [
  'PIP_',
  'LANG',
  'LC_',
  'http_proxy',
  'https_proxy',
  'no_proxy',
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'NO_PROXY',
  'ALL_PROXY',
  'SSL_CERT_FILE',
  'SSL_CERT_DIR',
  'REQUESTS_CA_BUNDLE',
  'CC',
  'CXX',
  'CFLAGS',
  'CXXFLAGS',
  'CPPFLAGS',
  'LDFLAGS',
  'MAKEFLAGS',
  'SOURCE_DATE_EPOCH',
  'XDG_CONFIG_HOME',
  'XDG_CONFIG_DIRS',
];

export interface StepOptions {
  /** more host paths the step reads, visible read-only at the same path */
  readOnly?: string[];
  /** 'pip': the host's network when pip's sources include a remote one, else none; 'none': none */
  network?: 'pip' | 'none';
  timeoutMs?: number;
  /** more variables (over the sandbox's own) */
  env?: Record<string, string>;
}

export interface BuildSandbox {
  /** false: bwrap does not work here; steps run unsandboxed, with polar's rights */
  readonly sandboxed: boolean;
  /** why the steps run unsandboxed (sandboxed: null) */
  readonly unsandboxedBecause: string | null;
  /** pip's remote sources: pip steps get the host's network when there is one */
  readonly remote: string[];
  /** the folder, the only writable path */
  readonly dir: string;
  /** one step, with the folder as the only writable path */
  run(argv: string[], options?: StepOptions): Promise<ExecResult>;
  /** the folder back to polar's own user (as root); the steps are over */
  close(): Promise<void>;
}

const probed = new Map<string, Promise<{ ok: boolean; why?: string; fix?: string }>>();
let warned = false;

/** Whether the build sandbox works here (probed once per process and bwrap). */
function sandboxWorks(bwrap: string): Promise<{ ok: boolean; why?: string; fix?: string }> {
  let probe = probed.get(bwrap);
  if (!probe) {
    probe = probeSandbox({ bwrap, network: 'none' }).then((p) =>
      p.ok ? { ok: true } : { ok: false, why: p.error ?? 'the sandbox does not start', fix: p.fix ?? '' },
    );
    probed.set(bwrap, probe);
  }
  return probe;
}

/** a uid of its own for the build's steps (root mode), as the sandbox runtime gives each sample */
const buildUid = () => 1_000_000_000 + Math.floor(Math.random() * 2 ** 28);

const underSystem = (path: string) => SYSTEM_DIRS.some((d) => path === d || path.startsWith(`${d}/`));

/** The variables a sandboxed step starts from. */
export function stepEnv(base: NodeJS.ProcessEnv, python: PythonInfo): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(base)) {
    if (value === undefined) continue;
    if (PASSED.some((p) => (p.endsWith('_') ? name.startsWith(p) : name === p))) env[name] = value;
  }
  return {
    ...env,
    PATH: `${dirname(python.executable)}:${SYSTEM_PATH}`,
    // HOME keeps its value (pip finds its configuration there, bound alone); nothing else of it is there
    HOME: base.HOME ?? '/tmp',
    TMPDIR: '/tmp',
    PIP_CACHE_DIR: '/tmp/polar-pip-cache',
    LANG: env.LANG ?? 'C.UTF-8',
  };
}

/**
 * Opens the sandbox for building `dir` (made here, empty) with `python`; `env` holds pip's variables
 * (pipEnv), which also decide its sources.
 */
export async function openBuildSandbox(
  dir: string,
  python: PythonInfo,
  env: Record<string, string>,
  options: { bwrap?: string } = {},
): Promise<BuildSandbox> {
  await mkdir(dir, { recursive: true });
  const all = { ...process.env, ...env };
  const sources = pipSources(all);
  const bwrap = options.bwrap ?? 'bwrap';
  const works = await sandboxWorks(bwrap);
  if (!works.ok) {
    if (!warned)
      log.warn(
        `environment builds run unsandboxed, with polar's rights (pip builds and runs package code as ${process.getuid?.() === 0 ? 'root' : 'you'}): the sandbox does not work here: ${works.why}${works.fix ? `; ${works.fix}` : ''}`,
      );
    warned = true;
    return {
      sandboxed: false,
      unsandboxedBecause: works.why ?? 'the sandbox does not work',
      remote: sources.remote,
      dir,
      run: (argv, o = {}) =>
        execTree(argv[0]!, argv.slice(1), { env: { ...env, ...o.env }, timeoutMs: o.timeoutMs }),
      close: async () => {},
    };
  }
  const mode = process.getuid?.() === 0 ? 'root' : 'user';
  const uid = mode === 'root' ? buildUid() : null;
  const real = realpathSync(dir);
  if (uid !== null) await chown(real, uid, uid);
  // (the interpreter: its prefix, and its file where that lies elsewhere; paths that are not there are left out)
  const readable = [
    python.prefix,
    python.executable,
    ...sources.configFiles,
    ...sources.local,
    ...sources.certificates,
  ]
    .filter((p) => existsSync(p))
    .filter((p, i, all) => !all.some((q, j) => j !== i && p.startsWith(`${q}/`)));
  const system = systemLayout();
  const base = stepEnv(all, python);
  return {
    sandboxed: true,
    unsandboxedBecause: null,
    remote: sources.remote,
    dir,
    run(argv, o = {}) {
      const network = o.network === 'pip' && sources.remote.length > 0 ? 'host' : 'none';
      const binds: Bind[] = [
        ...[...readable, ...(o.readOnly ?? [])]
          .filter((p) => !underSystem(p))
          .map((p) => ({ host: p, inside: p })),
        { host: real, inside: dir, writable: true },
      ];
      const args = bwrapArgs(
        { mode, ...(uid !== null ? { uid } : {}), system, binds, chdir: dir, network, bwrap },
        argv,
      );
      return execTree(args[0]!, args.slice(1), {
        env: { ...base, ...env, ...o.env },
        extendEnv: false,
        timeoutMs: o.timeoutMs,
      });
    },
    async close() {
      // (-h: a symlink the build left is changed itself, never what it points at)
      if (uid !== null)
        await execTree('chown', ['-R', '-h', `${process.getuid?.()}:${process.getgid?.()}`, real], {
          timeoutMs: 10 * 60_000,
        });
    },
  };
}

/** One line for the build log: how the steps ran. */
export function sandboxLine(sandbox: BuildSandbox): string {
  if (!sandbox.sandboxed) return `unsandboxed, with polar's rights: ${sandbox.unsandboxedBecause}`;
  const pip = sandbox.remote.length
    ? `pip steps the host's network (remote sources: ${sandbox.remote.join(' ')})`
    : 'pip steps network none (local sources only)';
  return `sandboxed: bwrap, ${sandbox.dir} the only writable path; venv and site-packages steps network none, ${pip}`;
}

/**
 * Writes a file polar owns into a folder a build wrote: whatever the build left at `path` (a symlink
 * to a file of the host, say) is removed first, and the file is created new (O_EXCL), so the write
 * lands in the folder and nowhere else. `within` is the environment's folder: `path` must resolve
 * inside it.
 */
export async function writeInside(within: string, path: string, text: string): Promise<void> {
  const root = await realpath(within);
  const parent = await realpath(dirname(path));
  if (parent !== root && !parent.startsWith(`${root}/`))
    throw new EnvBuildError(`environment ${within}: ${path} is not inside it (it resolves to ${parent})`, '');
  const target = `${parent}/${path.slice(dirname(path).length + 1)}`;
  const existing = await lstat(target).catch(() => null);
  if (existing) await rm(target, { recursive: true, force: true });
  await writeFile(target, text, { flag: 'wx' });
}
