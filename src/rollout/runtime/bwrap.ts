/**
 * The bubblewrap command lines of the sandbox runtime, built by pure functions (unit-tested without
 * running anything). One sandbox per command: new mount, pid, ipc, uts and (unless `--network host`)
 * network namespaces; a tmpfs root holding only the system directories read-only, /proc, /dev, a private
 * /tmp, and the binds the caller names; `--die-with-parent`, so the whole process tree ends with the
 * command or with polar. Two modes:
 * - user (polar is not root): unprivileged bwrap in a new user namespace, nested user namespaces
 *   disabled (`--disable-userns`); the command keeps the user's uid;
 * - root (polar runs as root): bwrap sets the mounts up as root (so binds of anything root can read
 *   work), then the command drops to an unprivileged uid of its own with setpriv (no capabilities, no
 *   new privileges). Root is exempt from RLIMIT_NPROC, an unprivileged uid is not.
 * The design follows Codex's own bwrap pipeline (openai/codex codex-rs/linux-sandbox/README.md at
 * 1332fd5: bwrap first, `--unshare-pid`, a fresh /proc), with a tmpfs root instead of `--ro-bind / /`
 * so that nothing of the user's home or of other samples is visible at all.
 */
import { lstatSync, readlinkSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Limits } from './types.ts';

export interface Bind {
  host: string;
  inside: string;
  writable?: boolean;
}

export interface SystemPath {
  path: string;
  /** the host path is a symlink to this (usr merge: /bin -> usr/bin) */
  symlink?: string;
}

export interface SandboxSpec {
  mode: 'user' | 'root';
  /** root mode: the uid (and gid) the command runs as */
  uid?: number;
  system: SystemPath[];
  binds: Bind[];
  /** the working directory inside */
  chdir: string;
  network: 'none' | 'host';
  limits?: Limits;
  /** bytes of the private /tmp (tmpfs) */
  tmpBytes?: number;
  bwrap?: string;
}

/** The system directories a sandbox sees read-only (those that exist on this host). */
export const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32', '/etc'];

/** How this host lays out the system directories (a symlink is replicated, a directory bound). */
export function systemLayout(dirs: readonly string[] = SYSTEM_DIRS): SystemPath[] {
  const out: SystemPath[] = [];
  for (const path of dirs) {
    try {
      const stat = lstatSync(path);
      out.push(stat.isSymbolicLink() ? { path, symlink: readlinkSync(path) } : { path });
    } catch {
      // not on this host
    }
  }
  return out;
}

/** The `ulimit` flags of a limit set (bash: -d and -f in KiB). */
export function ulimitFlags(limits: Limits = {}): string[] {
  const flags: string[] = [];
  if (limits.memoryBytes) flags.push('-d', String(Math.ceil(limits.memoryBytes / 1024)));
  if (limits.pids) flags.push('-u', String(limits.pids));
  if (limits.diskBytes) flags.push('-f', String(Math.ceil(limits.diskBytes / 1024)));
  return flags;
}

/**
 * The command wrapped with its rlimits (soft and hard, so nothing inside raises them) and, in root
 * mode, the drop to the sandbox's own uid after them.
 */
export function limitedCommand(
  spec: Pick<SandboxSpec, 'mode' | 'uid' | 'limits'>,
  command: string[],
): string[] {
  const drop =
    spec.mode === 'root'
      ? [
          'setpriv',
          `--reuid=${spec.uid}`,
          `--regid=${spec.uid}`,
          '--clear-groups',
          '--no-new-privs',
          '--inh-caps=-all',
          '--bounding-set=-all',
          '--',
        ]
      : [];
  const flags = ulimitFlags(spec.limits);
  const limit = flags.length
    ? ['bash', '-c', `ulimit -S -H ${flags.join(' ')} && exec "$@"`, 'polar-limits']
    : [];
  return [...limit, ...drop, ...command];
}

/** Every directory above `path` (outermost first), without `/`. */
function parents(path: string): string[] {
  const out: string[] = [];
  for (let d = dirname(path); d !== '/' && d !== '.'; d = dirname(d)) out.unshift(d);
  return out;
}

/** The bwrap argv (bwrap ... -- command) of one sandboxed command. */
export function bwrapArgs(spec: SandboxSpec, command: string[]): string[] {
  const args = [spec.bwrap ?? 'bwrap', '--die-with-parent', '--new-session'];
  if (spec.mode === 'user') args.push('--unshare-user', '--disable-userns');
  args.push('--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try');
  if (spec.network === 'none') args.push('--unshare-net');
  args.push('--hostname', 'polar-sandbox');
  const system = new Set<string>();
  for (const s of spec.system) {
    system.add(s.path);
    if (s.symlink) args.push('--symlink', s.symlink, s.path);
    else args.push('--ro-bind', s.path, s.path);
  }
  args.push('--proc', '/proc', '--dev', '/dev', '--perms', '1777');
  if (spec.tmpBytes) args.push('--size', String(spec.tmpBytes));
  args.push('--tmpfs', '/tmp');
  // the directories above each bind, made traversable (bwrap would make them 0700, root's, in root mode)
  const made = new Set<string>(['/tmp', '/proc', '/dev', ...system]);
  for (const bind of spec.binds) {
    for (const dir of parents(bind.inside)) {
      if (made.has(dir)) continue;
      made.add(dir);
      args.push('--perms', '0755', '--dir', dir);
    }
    made.add(bind.inside);
    args.push(bind.writable ? '--bind' : '--ro-bind', bind.host, bind.inside);
  }
  args.push('--chdir', spec.chdir, '--', ...limitedCommand(spec, command));
  return args;
}

/** Wraps a command so it joins a cgroup (v2: its cgroup.procs file) before it starts anything. */
export function inCgroup(procsFile: string, command: string[]): string[] {
  return ['sh', '-c', 'echo $$ > "$0" && exec "$@"', procsFile, ...command];
}
