/**
 * Does the sandbox work on this machine? Runs one empty sandbox with the flags a real run uses and,
 * when it fails, names the fix for the failures users of bubblewrap sandboxes report:
 * - `loopback: Failed RTM_NEWADDR` / `setting up uid map: Permission denied`: Ubuntu's AppArmor
 *   restriction of unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1, Ubuntu
 *   23.10+): openai/codex issues 15057 and 15982 (also 29908);
 * - `Failed to make / slave`: a container without CAP_SYS_ADMIN whose root mount is not shared
 *   (openai/codex issues 15434 and 23468);
 * - `Can't mount proc on /newroot/proc`: a container's seccomp profile forbids mounting proc;
 * - `Creating new namespace failed` / `No permissions to create new namespace`: unprivileged user
 *   namespaces switched off (sysctl).
 * `polar doctor --runtime sandbox` prints the same report, with which limits mechanism applies.
 */
import { tmpdir } from 'node:os';
import { execTree } from '../exec.ts';
import { makeTempDir, removeTempDir } from '../temp-dirs.ts';
import { bwrapArgs, systemLayout } from './bwrap.ts';
import { checkCgroupParent } from './limits.ts';

export interface SandboxProbe {
  ok: boolean;
  /** user: unprivileged bwrap in a user namespace; root: bwrap as root, commands under their own uid */
  mode: 'user' | 'root';
  bwrap: string;
  version: string | null;
  /** how memory and process limits are enforced */
  limits: 'cgroup v2' | 'rlimits';
  limitsNote: string;
  error?: string;
  fix?: string;
}

interface KnownFailure {
  match: RegExp;
  fix: string;
}

const KNOWN: KnownFailure[] = [
  {
    match: /RTM_NEWADDR|setting up uid map: Permission denied|RTM_NEWLINK/,
    fix: [
      "Ubuntu's AppArmor blocks unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1).",
      'Allow them for bwrap only: sudo apt install apparmor-profiles && sudo install -m 0644',
      '/usr/share/apparmor/extra-profiles/bwrap-userns-restrict /etc/apparmor.d/ && sudo apparmor_parser -r',
      '/etc/apparmor.d/bwrap-userns-restrict (openai/codex issues 15057, 15982). Inside gVisor the loopback',
      'cannot be set up at all (google/gvisor issue 13438): use --runtime docker there.',
    ].join(' '),
  },
  {
    match: /Failed to make \/ slave/,
    fix: [
      'polar runs in a container that cannot make mounts (no CAP_SYS_ADMIN, root mount not shared):',
      'start that container with --cap-add SYS_ADMIN and run `mount --make-rshared /` in it, or use',
      '--runtime docker from outside (openai/codex issues 15434, 23468).',
    ].join(' '),
  },
  {
    match: /Can't mount proc/,
    fix: 'the container polar runs in forbids mounting /proc (its seccomp profile): start it with --security-opt seccomp=unconfined, or use --runtime docker from outside.',
  },
  {
    match: /Creating new namespace failed|No permissions to create (a )?new namespace|unshare failed/,
    fix: 'unprivileged user namespaces are off: sudo sysctl -w kernel.unprivileged_userns_clone=1 (Debian) or user.max_user_namespaces=10000, or run polar as root.',
  },
  {
    match: /setpriv: .*(not found|No such file)/,
    fix: 'install util-linux (setpriv): polar drops to an unprivileged uid inside the sandbox when it runs as root.',
  },
];

/** The fix for a bwrap failure message, when it is a known one. */
export function knownFix(output: string): string | undefined {
  return KNOWN.find((k) => k.match.test(output))?.fix;
}

/** Which limits mechanism a run gets: a delegated cgroup v2 directory, else rlimits. */
export async function limitsMechanism(
  cgroupParent: string | undefined,
  mode: 'user' | 'root',
): Promise<Pick<SandboxProbe, 'limits' | 'limitsNote'>> {
  if (cgroupParent) {
    const check = await checkCgroupParent(cgroupParent);
    if (check.ok)
      return {
        limits: 'cgroup v2',
        limitsNote: `memory and processes of the whole sandbox by a cgroup under ${cgroupParent}`,
      };
    return { limits: 'rlimits', limitsNote: `--cgroup-parent not usable (${check.why}); rlimits instead` };
  }
  return {
    limits: 'rlimits',
    limitsNote: [
      'memory per process (RLIMIT_DATA), processes per sandbox (RLIMIT_NPROC',
      mode === 'root' ? 'of its own uid)' : 'in its user namespace, Linux >= 5.14)',
      'and largest file (RLIMIT_FSIZE); no delegated cgroup v2: pass --cgroup-parent DIR (a cgroup v2',
      'directory you may write, with +memory +pids in its cgroup.subtree_control) to limit the whole tree',
    ].join(' '),
  };
}

export async function probeSandbox(
  options: { bwrap?: string; network?: 'none' | 'host'; cgroupParent?: string } = {},
): Promise<SandboxProbe> {
  const bwrap = options.bwrap ?? 'bwrap';
  const mode = process.getuid?.() === 0 ? 'root' : 'user';
  const mechanism = await limitsMechanism(options.cgroupParent, mode);
  const base = { mode, bwrap, version: null, ...mechanism } as const;
  const v = await execTree(bwrap, ['--version'], { timeoutMs: 10_000 });
  if (v.spawnError || v.exitCode !== 0) {
    return {
      ...base,
      ok: false,
      error: `${bwrap} is not installed (${v.spawnError ?? v.output.trim()})`,
      fix: 'install bubblewrap: sudo apt-get install -y bubblewrap (dnf install bubblewrap; pacman -S bubblewrap)',
    };
  }
  const version = v.output.trim().replace(/^bubblewrap\s*/, '');
  const dir = await makeTempDir(tmpdir(), 'probe');
  try {
    const argv = bwrapArgs(
      {
        mode,
        ...(mode === 'root' ? { uid: 65534 } : {}),
        system: systemLayout(),
        binds: [{ host: dir, inside: '/testbed', writable: mode === 'user' }],
        chdir: '/testbed',
        network: options.network ?? 'none',
        limits: { pids: 64 },
        bwrap,
      },
      ['sh', '-c', 'test -d /proc/self && test ! -e /root/.ssh && echo polar-sandbox-ok'],
    );
    const r = await execTree(argv[0]!, argv.slice(1), {
      timeoutMs: 30_000,
      extendEnv: false,
      env: { PATH: process.env.PATH ?? '' },
    });
    if (r.exitCode === 0 && r.output.includes('polar-sandbox-ok')) return { ...base, version, ok: true };
    const output = r.output.trim();
    return {
      ...base,
      version,
      ok: false,
      error: output.split('\n').pop() || `exit ${r.exitCode}`,
      fix:
        knownFix(output) ?? 'run the command of `polar doctor --runtime sandbox --json` by hand to see why',
    };
  } finally {
    await removeTempDir(dir);
  }
}

/** The doctor's lines for a probe. */
export function formatSandboxProbe(probe: SandboxProbe): string {
  const lines = [
    `sandbox (bubblewrap ${probe.version ?? 'missing'}, ${probe.mode} mode): ${probe.ok ? 'works' : 'does not work'}`,
  ];
  if (probe.error) lines.push(`  error: ${probe.error}`);
  if (probe.fix) lines.push(`  fix: ${probe.fix}`);
  lines.push(`  limits: ${probe.limits}: ${probe.limitsNote}`);
  if (probe.mode === 'root')
    lines.push(
      '  as root: bwrap sets the sandbox up, every command runs under an unprivileged uid of its own',
    );
  return lines.join('\n');
}
