/**
 * The install memo: a sample's install step replayed from the install of the unpatched tree when the
 * patch touches nothing that install read (issue 46 item 4: on sympy, `pip install -e .` was 1.5-1.9 s
 * of a warm sample's 3.3-3.9 s overhead, paid twice by a harness sample: its agent's tree and its grading
 * tree).
 *
 * How: the install of the base tree runs once with a Python audit hook (PEP 578, Python 3.8+) in every
 * Python process it starts (a `.pth` in the layer), which writes what the processes open, list, write
 * and start. The result is kept when everything the install did is accounted for: every process it
 * started is a Python process of the layer that loaded the hook (or one of pip's own version probes),
 * and it removed no file of the tree. The memo holds the layer and the files the install wrote in the
 * tree, and what it depended on: the tree's files it read or wrote and the folders it listed. A later
 * sample at the same base commit, in the same environment, at the same paths (the sandbox's /testbed and
 * /polar/scratch) whose patch changes none of those files, and adds, removes or renames nothing in those
 * folders, gets the memo's layer and files copied in (tens of milliseconds) instead of running the
 * install; any other sample runs it as before.
 *
 * Trust: a memo is only ever made from the tree at base_commit (the repository's own code, the
 * operator's data), before any code of an agent has run in that environment (the agent's environment
 * before the harness starts, the grading environment before the patch is applied), and it is written by
 * polar on this host into the environment's cache folder, which every sample sees read-only. What a
 * sample does cannot change a memo; a patch that would change what the install does (setup.py,
 * pyproject.toml, a version file it reads) runs the install as before. A memo is skipped, not trusted,
 * when it does not parse. docs/eval.md, "The per-sample install".
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { cp, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join, posix } from 'node:path';
import { z } from 'zod';
import type { CachedEnv } from './types.ts';

/** bumped when a memo's layout or what it depends on changes: older memos are then not used */
export const MEMO_VERSION = 1;
/** the folder, in the environment's cache folder, that holds its memos */
export const MEMO_DIR = 'install-memo';
/** the output of the install a memo was made from, in its folder */
export const MEMO_LOG = 'install.log';
/** the hook's module and the .pth that loads it, in the layer's site-packages while the install runs */
export const TRACE_MODULE = '_polar_install_trace';
export const TRACE_PTH = '00-polar-install-trace.pth';

/**
 * The audit hook, loaded by `import _polar_install_trace` from a .pth in every Python process of the
 * layer while POLAR_INSTALL_TRACE names the log. Python 3.5+ syntax (it is imported by the environment's
 * interpreter, whatever its version); without sys.addaudithook (before 3.8) it writes nothing, and the
 * missing `start` record makes the install unmemoizable. The log is opened before the hook is added and
 * written with os.write, which raises no audit event (the hook never sees itself).
 */
export const TRACE_SOURCE = `import os, sys

def _polar_trace():
    log = os.environ.get("POLAR_INSTALL_TRACE")
    if not log or not hasattr(sys, "addaudithook"):
        return
    import json
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    pid = os.getpid()

    def path(p):
        if isinstance(p, bytes):
            p = os.fsdecode(p)
        if not isinstance(p, str):
            return None
        return os.path.abspath(p)

    def emit(*record):
        try:
            os.write(fd, (json.dumps([pid] + list(record)) + "\\n").encode("utf-8"))
        except Exception:
            pass

    def hook(event, args):
        try:
            if event == "open":
                p = path(args[0])
                if p is None:
                    return
                mode, flags = args[1], args[2]
                if isinstance(mode, str):
                    w = any(c in mode for c in "wax+")
                else:
                    w = isinstance(flags, int) and bool(flags & writing)
                emit("write" if w else "read", p)
            elif event in ("os.listdir", "os.scandir"):
                p = path(args[0]) if args and args[0] is not None else os.getcwd()
                if p is not None:
                    emit("list", p)
            elif event in ("os.rename", "os.replace", "shutil.move"):
                emit("move", path(args[0]), path(args[1]))
            elif event in ("shutil.copyfile", "shutil.copytree", "os.link", "os.symlink"):
                emit("copy", path(args[0]), path(args[1]))
            elif event in ("os.remove", "os.rmdir"):
                # a name relative to a folder's descriptor (shutil.rmtree's walk; -1: none) is not the cwd's: the
                # shutil.rmtree event before it names the folder
                if len(args) < 2 or not isinstance(args[1], int) or args[1] < 0:
                    emit("delete", path(args[0]))
            elif event in ("shutil.rmtree", "os.truncate"):
                emit("delete" if event != "os.truncate" else "write", path(args[0]))
            elif event in ("os.mkdir", "os.chmod", "os.utime", "os.chown"):
                fd = args[2] if event in ("os.mkdir", "os.chmod") else args[3]
                if not isinstance(fd, int) or fd < 0:
                    emit("touch", path(args[0]))
            elif event == "subprocess.Popen":
                argv = args[1]
                if isinstance(argv, (str, bytes)):
                    argv = [argv]
                emit("exec", str(args[0]), [str(a) for a in (argv or [])][:8])
            elif event in ("os.system", "os.exec", "os.posix_spawn", "os.spawn", "pty.spawn"):
                emit("exec", event, [str(a) for a in args][:4])
        except Exception:
            emit("error", event)

    emit("start", sys.executable, [str(a) for a in sys.argv[:4]])
    sys.addaudithook(hook)


_polar_trace()
`;

/**
 * Programs pip itself starts, read-only, to describe this machine in its User-Agent: `rustc --version`
 * (pip src/pip/_internal/network/session.py, user_agent(), pip 21.1+), `lsb_release -a` and
 * `uname -rs` (pip's vendored distro, src/pip/_vendor/distro/distro.py). They read nothing of the tree.
 */
const PIP_PROBES = new Set(['rustc --version', 'lsb_release -a', 'uname -rs']);

/**
 * Whether an install step is one Python command (pip or a setup.py) the hook sees whole: anything a
 * shell runs besides it (`&&`, `;`, a pipe, a substitution) would escape the trace.
 */
export function traceableInstall(install: string | null): boolean {
  if (!install) return false;
  if (/[;&|<>`$()\n\\]/.test(install)) return false;
  return /^\s*(python[0-9.]*\s+(-m\s+pip\s+install|setup\.py\s+(develop|install|build_ext))|pip[0-9.]*\s+install)\b/.test(
    install,
  );
}

const Memo = z.object({
  version: z.literal(MEMO_VERSION),
  key: z.string(),
  made: z.string(),
  /** the tree's files (relative) the install read or wrote */
  files: z.array(z.string()),
  /** the tree's folders (relative, '' the root) the install listed */
  listed: z.array(z.string()),
  /** the files the install left in the tree (relative), copied under tree/ */
  wrote: z.array(z.string()),
});
const Unmemoizable = z.object({
  version: z.literal(MEMO_VERSION),
  key: z.string(),
  made: z.string(),
  unmemoizable: z.string(),
});
export type InstallMemo = z.infer<typeof Memo> & { dir: string };
export type MemoState = InstallMemo | { unmemoizable: string };

/** What the memo of a sample's install is keyed on. */
export interface MemoPlace {
  repo: string;
  baseCommit: string;
  /** the tree and the layer as the sample's commands see them */
  tree: string;
  layer: string;
}

export function memoKey(cached: CachedEnv, place: MemoPlace): string {
  return createHash('sha256')
    .update(
      JSON.stringify([
        MEMO_VERSION,
        cached.key,
        // a replayed layer names them (its .pth, pyvenv.cfg): a cache seen at another path, or with
        // another interpreter path, is another memo
        cached.dir,
        cached.python.executable,
        place.repo,
        place.baseCommit,
        place.tree,
        place.layer,
        cached.recipe.preInstall,
        cached.recipe.install,
      ]),
    )
    .digest('hex')
    .slice(0, 24);
}

export const memoDir = (cached: CachedEnv, key: string) => join(cached.dir, MEMO_DIR, key);

/** The memo on disk: a memo, an unmemoizable verdict, or null (none, or one that does not parse). */
export async function readMemo(cached: CachedEnv, key: string): Promise<MemoState | null> {
  const dir = memoDir(cached, key);
  let value: unknown;
  try {
    value = JSON.parse(await readFile(join(dir, 'memo.json'), 'utf8'));
  } catch {
    return null;
  }
  const memo = Memo.safeParse(value);
  if (memo.success && memo.data.key === key) return { ...memo.data, dir };
  const no = Unmemoizable.safeParse(value);
  if (no.success && no.data.key === key) return { unmemoizable: no.data.unmemoizable };
  return null;
}

/** What the trace of one install says: what it depended on and wrote, or why it cannot be replayed. */
export type TraceVerdict =
  | { ok: true; files: string[]; listed: string[]; wrote: string[]; deleted: string[] }
  | { ok: false; why: string };

/**
 * Reads the install's trace. `tree`, `layer`: the paths the commands saw. Every Python process the install
 * started must have loaded the hook (a `start` record for each), and every other program must be one of
 * pip's probes; what it did outside the tree and the layer (pip's temporary folders, its configuration)
 * is the environment's and the same for every sample.
 */
export function judgeTrace(text: string, place: { tree: string; layer: string }): TraceVerdict {
  const inTree = (p: unknown): string | null => {
    if (typeof p !== 'string') return null;
    if (p === place.tree) return '';
    return p.startsWith(`${place.tree}/`) ? posix.normalize(p.slice(place.tree.length + 1)) : null;
  };
  const layerPython = `${place.layer}/bin/python`;
  const read = new Set<string>();
  const written = new Set<string>();
  const listed = new Set<string>();
  const deleted = new Set<string>();
  /** the records that name one path of the tree, by the set they add it to */
  const sets = new Map([
    ['read', read],
    ['write', written],
    ['touch', written],
    ['list', listed],
    ['delete', deleted],
  ]);
  let starts = 0;
  let pythons = 0;
  for (const line of text.split('\n')) {
    if (!line) continue;
    let record: unknown;
    try {
      record = JSON.parse(line);
    } catch {
      return { ok: false, why: 'its trace has a line that does not parse' };
    }
    if (!Array.isArray(record) || typeof record[1] !== 'string')
      return { ok: false, why: 'its trace has a record polar does not know' };
    const [, kind, a, b] = record as [number, string, unknown, unknown];
    const into = sets.get(kind);
    if (into) {
      const p = inTree(a);
      if (p !== null) into.add(p);
      continue;
    }
    switch (kind) {
      case 'start':
        starts++;
        break;
      case 'move':
      case 'copy': {
        const from = inTree(a);
        const to = inTree(b);
        if (from !== null) (kind === 'move' ? deleted : read).add(from);
        if (to !== null) written.add(to);
        break;
      }
      case 'exec': {
        const argv = Array.isArray(b) ? b.map(String) : [];
        const program = typeof a === 'string' ? a : '';
        if (program === layerPython || argv[0] === layerPython) pythons++;
        else if (!PIP_PROBES.has(argv.join(' ')))
          return {
            ok: false,
            why: `it runs ${argv.slice(0, 3).join(' ') || program}, which the trace cannot see into`,
          };
        break;
      }
      case 'error':
        return { ok: false, why: `its trace missed an event (${String(a)})` };
      default:
        return { ok: false, why: `its trace has a record polar does not know (${kind})` };
    }
  }
  if (starts === 0) return { ok: false, why: 'its Python has no audit hooks (PEP 578 needs Python 3.8+)' };
  if (starts < pythons + 1)
    return { ok: false, why: 'a Python process it started did not load the trace (python -S?)' };
  return {
    ok: true,
    files: [...new Set([...read, ...written])].filter((p) => p !== '').sort(),
    listed: [...listed].sort(),
    wrote: [...written].filter((p) => p !== '').sort(),
    deleted: [...deleted].sort(),
  };
}

/** The files a patch touches: every path it names, and those it adds, removes, renames or retypes. */
export interface PatchPaths {
  touched: Set<string>;
  structural: Set<string>;
}

/**
 * Reads the paths of a unified diff (git's or plain), from every header that names one: `diff --git`,
 * `---`/`+++`, renames and copies. null when a header names a path polar cannot read plainly (quoted,
 * absolute, `..`): such a patch runs the install.
 */
export function patchPaths(patch: string): PatchPaths | null {
  const touched = new Set<string>();
  const structural = new Set<string>();
  let current: string[] = [];
  // the `---` side of a plain diff: a file added (/dev/null) or removed (`+++ /dev/null`)
  let oldAbsent = false;
  let oldPath = '';
  const add = (raw: string, strip: boolean): string | null => {
    let p = raw.replace(/\t.*$/, '');
    if (p.startsWith('"')) return null;
    if (strip) {
      const slash = p.indexOf('/');
      if (slash < 0) return null;
      p = p.slice(slash + 1);
    }
    const n = posix.normalize(p);
    if (n.startsWith('/') || n === '..' || n.startsWith('../') || n === '.' || n === '') return null;
    touched.add(n);
    current.push(n);
    return n;
  };
  for (const line of patch.split('\n')) {
    const git = /^diff --git (\S+) (\S+)$/.exec(line);
    const side = /^(---|\+\+\+) (.+)$/.exec(line);
    const moved = /^(rename|copy) (from|to) (.+)$/.exec(line);
    if (git) {
      current = [];
      if (add(git[1]!, true) === null || add(git[2]!, true) === null) return null;
      if (current[0] !== current[1]) for (const p of current) structural.add(p);
    } else if (line.startsWith('diff --git ')) return null;
    else if (side) {
      const named = side[2]!;
      const none = /^\/dev\/null(\t|$)/.test(named);
      const p = none ? '' : add(named, /^[ab]\//.test(named));
      if (p === null) return null;
      if (side[1] === '---') {
        oldAbsent = none;
        oldPath = p;
      } else if (none) structural.add(oldPath);
      else if (oldAbsent) structural.add(p);
    } else if (moved) {
      const p = add(moved[3]!, false);
      if (p === null) return null;
      structural.add(p);
    } else if (/^(new file mode|deleted file mode|old mode|new mode) /.test(line)) {
      for (const p of current) structural.add(p);
    } else if (/^(Index|\*\*\*) /.test(line)) {
      return null; // a context diff or an svn header: names paths the readers above do not
    }
  }
  return { touched, structural };
}

/**
 * Why the memo does not stand for the tree with `patch` applied, or null when it does: the patch
 * changes a file the install read or wrote, or adds, removes, renames or retypes a path in a folder it
 * listed (or a path it listed itself).
 */
export function memoMisses(memo: Pick<InstallMemo, 'files' | 'listed'>, patch: string): string | null {
  if (patch.trim() === '') return null;
  const paths = patchPaths(patch);
  if (!paths) return 'the patch names a path polar cannot read plainly';
  const files = new Set(memo.files);
  const listed = new Set(memo.listed);
  for (const p of paths.touched) if (files.has(p)) return `the patch changes ${p}, which the install reads`;
  for (const p of paths.structural) {
    const parent = posix.dirname(p);
    if (listed.has(p) || listed.has(parent === '.' ? '' : parent))
      return `the patch adds, removes or renames ${p}, in a folder the install lists`;
  }
  return null;
}

/**
 * Writes a memo (or an unmemoizable verdict) beside the environment, from the host's copies of the
 * layer and the tree: written under a temporary name and renamed, so a reader sees all of it or none; a
 * memo another sample wrote first is kept. Returns what is now on disk for `key`.
 */
export async function saveMemo(
  cached: CachedEnv,
  key: string,
  verdict: TraceVerdict,
  host: { layer: string; tree: string },
  log: string,
): Promise<MemoState> {
  const dir = memoDir(cached, key);
  const part = `${dir}.part-${process.pid}-${randomBytes(4).toString('hex')}`;
  const head = { version: MEMO_VERSION, key, made: new Date().toISOString() };
  const record = verdict.ok
    ? { ...head, files: verdict.files, listed: verdict.listed, wrote: verdict.wrote }
    : { ...head, unmemoizable: verdict.why };
  const state: MemoState = verdict.ok
    ? { ...(record as Omit<InstallMemo, 'dir'>), dir }
    : { unmemoizable: verdict.why };
  try {
    await mkdir(part, { recursive: true });
    if (verdict.ok) {
      await cp(host.layer, join(part, 'layer'), { recursive: true, verbatimSymlinks: true });
      for (const p of [TRACE_PTH, `${TRACE_MODULE}.py`])
        await rm(join(part, 'layer', sitePackagesOf(cached, ''), p), { force: true });
      for (const rel of verdict.wrote) {
        const from = join(host.tree, rel);
        if (!existsSync(from)) continue;
        await mkdir(dirname(join(part, 'tree', rel)), { recursive: true });
        await cp(from, join(part, 'tree', rel), { recursive: true, verbatimSymlinks: true });
      }
    }
    // what the install said, for the samples that replay it
    await writeFile(join(part, MEMO_LOG), log, { mode: 0o644 });
    await writeFile(join(part, 'memo.json'), `${JSON.stringify(record)}\n`, { mode: 0o644 });
    await rename(part, dir).catch(async (error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOTEMPTY' && error.code !== 'EEXIST') throw error;
    });
  } catch {
    // a cache polar cannot write (read-only, full): this sample goes on; the caller keeps the verdict
  } finally {
    await rm(part, { recursive: true, force: true });
  }
  return (await readMemo(cached, key)) ?? state;
}

/** the environment's site-packages relative to its folder, under `root` (a layer has the same shape) */
export function sitePackagesOf(cached: CachedEnv, root: string): string {
  return join(root, cached.sitePackages.slice(cached.dir.length + 1));
}
