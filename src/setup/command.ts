/**
 * `polar setup`: the trainer's Python environment (polar train, polar export, the loop's train steps):
 * a virtual environment with the pinned packages of src/train/worker/requirements.txt (torch,
 * transformers, peft, safetensors, onnx, ...). Installed as a package, polar keeps it in its cache
 * (`$POLAR_CACHE_DIR/python`, default `~/.cache/polar/python`), where polar train and export look for it; in a
 * clone `npm run setup:python` makes `.venv` at the repository root with the same command. docs/train.md.
 */
import { existsSync, readdirSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { execa } from 'execa';
import { EnvironmentError, EXIT, UsageError } from '../errors.ts';
import {
  CLUSTER_REQUIREMENTS,
  checkPackages,
  polarVenv,
  probeDevices,
  probePython,
  REPORT_REQUIREMENTS,
  REQUIREMENTS,
  WANDB_REQUIREMENTS,
} from '../train/env.ts';
import { log } from '../util/log.ts';

export interface SetupFlags {
  /** the interpreter the environment is made with (default python3) */
  python?: string;
  /** where to make it (default: polar's cache) */
  venv?: string;
  /** the optional cluster group too (Ray, src/train/worker/requirements-cluster.txt) */
  cluster?: boolean;
  /** the optional tracking group too (tensorboard, src/train/worker/requirements-report.txt) */
  report?: boolean;
  /** W&B too (src/train/worker/requirements-wandb.txt) */
  wandb?: boolean;
  /** remove an environment that is there and make it again (with --python, or python3) */
  rebuild?: boolean;
  quiet?: boolean;
}

export async function setupCommand(f: SetupFlags): Promise<number> {
  if (f.quiet) log.configure({ quiet: true });
  const dir = resolve(f.venv ?? polarVenv());
  const python = join(dir, 'bin', 'python');
  // --python names the interpreter: it is checked even when the environment is there already
  const base = f.python ?? 'python3';
  const wanted = f.python !== undefined || f.rebuild || !existsSync(python) ? await checkBase(base) : null;
  if (wanted && existsSync(dir) && readdirSync(dir).length > 0)
    await keepOrRemove(dir, base, wanted, Boolean(f.rebuild));
  if (!existsSync(python)) {
    log.info(`making the Python environment ${dir} with ${base}`);
    await mkdir(dirname(dir), { recursive: true });
    await run(base, ['-m', 'venv', dir], `${base} -m venv ${dir} failed`);
  }
  const groups = [
    REQUIREMENTS,
    ...(f.cluster ? [CLUSTER_REQUIREMENTS] : []),
    ...(f.report ? [REPORT_REQUIREMENTS] : []),
    ...(f.wandb ? [WANDB_REQUIREMENTS] : []),
  ];
  for (const requirements of groups) {
    log.info(
      `installing ${requirements} into ${dir}${requirements === REQUIREMENTS ? ' (torch alone is a few hundred MB)' : ''}`,
    );
    // --retries 0: an unreachable index fails at once instead of retrying for minutes
    await run(
      python,
      [
        '-m',
        'pip',
        'install',
        '--disable-pip-version-check',
        '--retries',
        '0',
        ...(f.quiet ? ['-q'] : []),
        '-r',
        requirements,
      ],
      `pip could not install ${requirements}`,
    );
  }
  const probe = await probePython(python);
  if ('problem' in probe) throw new EnvironmentError(`${python} ${probe.problem} after the install`);
  checkPackages(probe, { device: 'cpu', gpus: 1, lora: true });
  // the metadata probe imports nothing: import torch once to see that what was installed works
  const devices = await probeDevices(python);
  if ('problem' in devices) throw new EnvironmentError(`${python} ${devices.problem} after the install`);
  log.info(
    `polar's Python: ${python} (Python ${probe.version}, torch ${probe.torch}, transformers ${probe.transformers}, peft ${probe.peft}${devices.cuda ? `, ${devices.cuda_devices} CUDA device(s)` : ', no CUDA device'})`,
  );
  process.stdout.write(`${python}\n`);
  return EXIT.ok;
}

/** An interpreter as setup compares them: the real path of the base interpreter (a venv's base) and its version. */
interface Interpreter {
  executable: string;
  version: string;
}

const IDENTITY =
  'import os, sys; print(os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)); print("%d.%d.%d" % sys.version_info[:3])';

/** The base interpreter of a Python (for a venv's python: the interpreter that made the venv), or null. */
async function identity(python: string): Promise<Interpreter | null> {
  const r = await execa(python, ['-c', IDENTITY], { reject: false, timeout: 60_000 });
  const [executable, version] = r.exitCode === 0 ? r.stdout.trim().split('\n').slice(-2) : [];
  return executable && version ? { executable, version } : null;
}

/**
 * An environment that is there is installed into as it is, unless --python names another interpreter
 * than the one that made it: refused, naming both and --rebuild; with --rebuild (a virtual environment
 * only, never another folder) it is removed and made again.
 */
async function keepOrRemove(dir: string, base: string, wanted: Interpreter, rebuild: boolean): Promise<void> {
  const isVenv = existsSync(join(dir, 'pyvenv.cfg'));
  if (!isVenv)
    throw new UsageError(
      `${dir} is there and is not a Python virtual environment (no pyvenv.cfg)`,
      'give --venv a new folder, or remove that one',
    );
  const made = await identity(join(dir, 'bin', 'python'));
  if (!rebuild) {
    if (made && made.executable === wanted.executable) return;
    throw new UsageError(
      made
        ? `${dir} was made by ${made.executable} (Python ${made.version}), not by --python ${base} (${wanted.executable}, Python ${wanted.version})`
        : `${dir} is there but its Python does not run (the interpreter that made it is gone?)`,
      `add --rebuild to remove it and make it again with ${base}${made ? ', or leave out --python to install into it as it is' : ''}`,
    );
  }
  log.info(
    `--rebuild: removing ${dir}${made ? ` (made by ${made.executable}, Python ${made.version})` : ''}`,
  );
  await rm(dir, { recursive: true, force: true });
}

/** A Python 3.10+ with the venv module (Debian: python3-venv): its base interpreter and version. */
async function checkBase(python: string): Promise<Interpreter> {
  const r = await execa(
    python,
    ['-c', 'import sys, venv, ensurepip; print("%d.%d" % sys.version_info[:2])'],
    { reject: false },
  );
  if (r.exitCode !== 0) {
    const missing = (r as { code?: string }).code === 'ENOENT';
    throw new EnvironmentError(
      missing
        ? `no ${python} found`
        : `${python} cannot make a virtual environment (no venv/ensurepip module)`,
      missing
        ? 'install Python 3.10 or newer, or name one with --python'
        : 'install the venv module (Debian/Ubuntu: apt-get install python3-venv), or name another Python with --python',
    );
  }
  const [major = 0, minor = 0] = r.stdout.trim().split('.').map(Number);
  if (major < 3 || (major === 3 && minor < 10))
    throw new EnvironmentError(
      `${python} is Python ${r.stdout.trim()}: polar's worker needs 3.10 or newer`,
      'name another Python with --python',
    );
  const found = await identity(python);
  if (!found) throw new EnvironmentError(`${python} cannot say where it is installed (sys.executable)`);
  return found;
}

async function run(file: string, args: string[], failure: string): Promise<void> {
  const r = await execa(file, args, { reject: false, stdin: 'ignore', stdout: 'inherit', stderr: 'inherit' });
  if (r.exitCode !== 0)
    throw new EnvironmentError(
      `${failure} (exit code ${r.exitCode ?? r.signal})`,
      'pip needs a package index or a wheel mirror (pip config); see its messages above',
    );
}
