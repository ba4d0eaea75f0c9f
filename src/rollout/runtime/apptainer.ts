/**
 * Apptainer (formerly Singularity), for clusters where Docker is not allowed: the container runtime of
 * docker.ts through apptainer's commands. One instance per environment (`apptainer instance start`,
 * then `exec instance://NAME`, `instance stop`), from the official image as `docker://swebench/
 * sweb.eval.x86_64.<id>:latest` or a local `.sif` (`--image` with {instance_id}). `--containall`
 * (private /tmp, $HOME, IPC and PID namespaces, a clean environment), `--cleanenv`, `--writable-tmpfs`
 * (changes to /testbed live in memory and end with the instance; apptainer.conf's `sessiondir max
 * size` bounds them), and `--net --network none`: a loopback only, the one network configuration
 * unprivileged users may ask for by default (apptainer-userdocs networking.rst at 09c81a5). The capture
 * proxy is reached through the Unix socket in the environment's folder and forward.mjs, as in docker.
 * Variables reach the harness as APPTAINERENV_NAME in the client's environment, never on its command
 * line. No apptainer engine runs on the machines polar is developed on: these command lines are
 * unit-tested (test/unit/rollout/runtime-lines.test.ts), not run.
 */
import type { ContainerDialect, ExecOptions, Mount, StartOptions } from './docker.ts';
import { containerScript, officialImage, TESTBED, timeoutPrefix, WRITE_SCRIPT } from './docker.ts';

function bindSpec(m: Mount): string {
  return `${m.host}:${m.container}${m.readonly === false ? '' : ':ro'}`;
}

export function apptainerStartArgs(name: string, image: string, options: StartOptions): string[] {
  const args = ['apptainer', 'instance', 'start', '--containall', '--cleanenv', '--writable-tmpfs'];
  const network = options.network ?? 'none';
  // `host` is apptainer's default (no --net); anything else is a new network namespace of that type
  if (network !== 'host') args.push('--net', '--network', network);
  if (options.limits?.memoryBytes) args.push('--memory', `${options.limits.memoryBytes}`);
  if (options.limits?.pids) args.push('--pids-limit', String(options.limits.pids));
  for (const m of options.mounts ?? []) args.push('--bind', bindSpec(m));
  for (const [k, v] of Object.entries(options.env ?? {})) args.push('--env', `${k}=${v}`);
  args.push(image, name);
  return args;
}

export function apptainerExecArgs(name: string, script: string, options: ExecOptions = {}): string[] {
  const args = ['apptainer', 'exec', '--cleanenv', '--pwd', TESTBED];
  for (const [k, v] of Object.entries(options.env ?? {})) args.push('--env', `${k}=${v}`);
  args.push(`instance://${name}`, ...timeoutPrefix(options.timeoutMs));
  args.push('bash', '-c', containerScript(script, options.path));
  return args;
}

/** The harness inside the instance; its variables travel as APPTAINERENV_NAME in the client's environment. */
export function apptainerLaunch(
  name: string,
  argv: string[],
  passEnv: string[],
  env: Record<string, string>,
): { command: string[]; env: Record<string, string> } {
  const client: Record<string, string> = {};
  for (const key of ['PATH', 'HOME', 'APPTAINER_CACHEDIR', 'APPTAINER_TMPDIR']) {
    const value = env[key] ?? process.env[key];
    if (value !== undefined) client[key] = value;
  }
  for (const n of passEnv) if (env[n] !== undefined) client[`APPTAINERENV_${n}`] = env[n]!;
  return {
    command: ['apptainer', 'exec', '--cleanenv', '--pwd', TESTBED, `instance://${name}`, ...argv],
    env: client,
  };
}

/** A docker reference as apptainer pulls it (`docker://...`); a `.sif` file or a URI stays as it is. */
export function apptainerImage(image: string): string {
  return image.endsWith('.sif') || image.includes('://') ? image : `docker://${image}`;
}

/** Apptainer instance names: letters, digits, `_`, `-` and `.`. */
function instanceName(name: string): string {
  return name.replace(/[^a-zA-Z0-9_.-]/g, '-');
}

export function apptainerDialect(): ContainerDialect {
  return {
    engine: 'apptainer',
    info: () => ['apptainer', '--version'],
    start: (name, image, o) => apptainerStartArgs(instanceName(name), apptainerImage(image), o),
    exec: (name, script, o) => apptainerExecArgs(instanceName(name), script, o),
    write: (name, path) => [
      'apptainer',
      'exec',
      `instance://${instanceName(name)}`,
      'bash',
      '-c',
      WRITE_SCRIPT,
      'write',
      path,
    ],
    launch: (name, argv, passEnv, env) => apptainerLaunch(instanceName(name), argv, passEnv, env),
    remove: (name) => ['apptainer', 'instance', 'stop', instanceName(name)],
    defaultImage: (i) => i.image ?? officialImage(i.instance_id),
  };
}
