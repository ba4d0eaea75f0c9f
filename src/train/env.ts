/**
 * Finds a Python that has torch and reports what it has (torch, transformers, peft, safetensors), so a
 * missing piece is named with the command that installs it before the worker starts. The probe imports
 * nothing heavy: versions come from the installed packages' metadata (stdlib importlib.metadata, tens of
 * milliseconds), so torch, transformers and peft are imported once per `polar train` / `polar export`,
 * by the worker. What only an imported torch knows (CUDA, the devices) the worker reports as its first
 * event (`environment`, src/train/schema.ts) and the launcher checks it then (checkDevice). Without
 * --python / POLAR_PYTHON the candidates are the clone's .venv (`npm run setup:python`) and the environment
 * `polar setup` makes in polar's cache, both from src/train/worker/requirements.txt (the one declaration of
 * polar's Python environment).
 */
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { EnvironmentError, UsageError } from '../errors.ts';

/** What the probe learns without importing torch: the interpreter and the installed packages' versions. */
export interface PythonPackages {
  python: string;
  executable: string;
  version: string;
  torch: string | null;
  transformers: string | null;
  peft: string | null;
  safetensors: string | null;
  numpy: string | null;
}

/** What the worker learns from an imported torch (its `environment` event). */
export interface PythonDevices {
  cuda: boolean;
  cuda_devices: number;
  device_names: string[];
}

export type PythonProbe = PythonPackages & PythonDevices;

// find_spec locates a top-level package without importing it; a distribution's metadata gives its version
const PROBE = `
import json, sys, importlib.util, importlib.metadata as md
out = {"executable": sys.executable, "version": sys.version.split()[0]}
for name in ("torch", "transformers", "peft", "safetensors", "numpy"):
    try:
        out[name] = md.version(name) if importlib.util.find_spec(name) is not None else None
    except Exception:
        out[name] = None
print(json.dumps(out))
`;

export type Prober = (python: string) => Promise<PythonPackages | { python: string; problem: string }>;

export const probePython: Prober = async (python) => {
  const r = await execa(python, ['-c', PROBE], { reject: false, timeout: 60_000 });
  if (r.failed || r.exitCode !== 0) {
    const code = (r as { code?: string }).code;
    const problem =
      code === 'ENOENT'
        ? 'not found'
        : `failed (${String(r.stderr || r.shortMessage)
            .split('\n')
            .at(-1)})`;
    return { python, problem };
  }
  try {
    return {
      python,
      ...(JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '') as Omit<PythonPackages, 'python'>),
    };
  } catch {
    return { python, problem: 'printed something unexpected' };
  }
};

const DEVICE_PROBE = `
import json, torch
n = torch.cuda.device_count() if torch.cuda.is_available() else 0
print(json.dumps({"cuda": n > 0, "cuda_devices": n, "device_names": [torch.cuda.get_device_name(i) for i in range(n)]}))
`;

export type DeviceProber = (python: string) => Promise<PythonDevices | { python: string; problem: string }>;

/**
 * What only an imported torch knows (CUDA, the devices), for the checks that must come before the worker
 * starts: `polar loop`'s preflight with --device cuda (before any rollout) and `polar setup`'s check of
 * what it installed. `polar train` and `polar export` learn it from the worker's `environment` event.
 */
export const probeDevices: DeviceProber = async (python) => {
  const r = await execa(python, ['-c', DEVICE_PROBE], { reject: false, timeout: 120_000 });
  if (r.failed || r.exitCode !== 0)
    return {
      python,
      problem: `could not import torch (${String(r.stderr || r.shortMessage)
        .trim()
        .split('\n')
        .at(-1)})`,
    };
  try {
    return JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '') as PythonDevices;
  } catch {
    return { python, problem: 'printed something unexpected' };
  }
};

/** The Python of `npm run setup:python` in a clone: .venv at the repository root. */
export const VENV_PYTHON = fileURLToPath(new URL('../../.venv/bin/python', import.meta.url));
/** The pinned packages of polar's Python environment. */
export const REQUIREMENTS = fileURLToPath(new URL('./worker/requirements.txt', import.meta.url));
/** the optional cluster group (Ray; docs/cluster.md): `polar setup --cluster` */
export const CLUSTER_REQUIREMENTS = fileURLToPath(
  new URL('./worker/requirements-cluster.txt', import.meta.url),
);
/** the optional experiment-tracking group (--report-to tensorboard): `polar setup --report` */
export const REPORT_REQUIREMENTS = fileURLToPath(
  new URL('./worker/requirements-report.txt', import.meta.url),
);
/** W&B (--report-to wandb): `polar setup --wandb` */
export const WANDB_REQUIREMENTS = fileURLToPath(new URL('./worker/requirements-wandb.txt', import.meta.url));
export const SETUP_COMMAND = 'polar setup';

/** polar's own cache (the one the environments and datasets use): $POLAR_CACHE_DIR, else $XDG_CACHE_HOME/polar, else ~/.cache/polar. */
export function polarHome(): string {
  return (
    process.env.POLAR_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'polar')
  );
}

/** Where `polar setup` makes the environment by default: <polar's cache>/python. */
export function polarVenv(): string {
  return join(polarHome(), 'python');
}

const setupHint = (python?: string): string =>
  `make polar's Python environment: ${SETUP_COMMAND} (it installs ${REQUIREMENTS} into ${polarVenv()}; in a clone, npm run setup:python makes .venv)` +
  (python ? `, or install it into ${python}: ${python} -m pip install -r ${REQUIREMENTS}` : '') +
  '; or point polar at a Python that has it: --python PATH or POLAR_PYTHON';

const found = new Map<string, Promise<PythonPackages>>();

/**
 * --python / POLAR_PYTHON if given (must have torch), else the first that does of: the clone's .venv, the
 * environment `polar setup` makes in polar's cache, python3, /usr/bin/python3. With the real probe the
 * answer is kept for the process (a loop trains and exports every step).
 */
export function findPython(
  explicit: string | undefined,
  probe: Prober = probePython,
): Promise<PythonPackages> {
  if (probe !== probePython) return searchPython(explicit, probe);
  const key = explicit ?? '';
  let known = found.get(key);
  if (!known) {
    known = searchPython(explicit, probe);
    found.set(key, known);
    known.catch(() => found.delete(key));
  }
  return known;
}

async function searchPython(explicit: string | undefined, probe: Prober): Promise<PythonPackages> {
  const candidates = explicit
    ? [explicit]
    : [VENV_PYTHON, join(polarVenv(), 'bin', 'python'), 'python3', '/usr/bin/python3'];
  const tried: string[] = [];
  for (const python of [...new Set(candidates)]) {
    const r = await probe(python);
    if ('problem' in r) {
      tried.push(`${python} (${r.problem})`);
      continue;
    }
    if (r.torch === null) {
      tried.push(`${python} (Python ${r.version}, no torch)`);
      continue;
    }
    return r;
  }
  throw new EnvironmentError(`no Python with PyTorch found: tried ${tried.join(', ')}`, setupHint());
}

export interface EnvNeeds {
  device: 'cuda' | 'cpu';
  gpus: number;
  lora: boolean;
}

const major = (version: string | null): number => Number.parseInt(version ?? '', 10);

/**
 * Names each missing or too old piece with the command that installs it (torch 2.x, transformers 5.x,
 * safetensors; peft for --lora): before the worker starts.
 */
export function checkPackages(p: PythonPackages, needs: EnvNeeds): void {
  const missing = (what: string, why: string) =>
    new EnvironmentError(`${p.python} has no ${what} (${why})`, setupHint(p.python));
  if (major(p.torch) < 2) {
    throw new EnvironmentError(
      `${p.python} has torch ${p.torch}: polar's worker needs torch 2.x`,
      setupHint(p.python),
    );
  }
  if (p.transformers === null) throw missing('transformers', 'needed to load the model');
  if (major(p.transformers) < 5) {
    throw new EnvironmentError(
      `${p.python} has transformers ${p.transformers}: polar's worker needs transformers 5.x`,
      setupHint(p.python),
    );
  }
  if (p.safetensors === null) throw missing('safetensors', 'needed to write checkpoints');
  if (needs.lora && p.peft === null) throw missing('peft', 'needed for --lora');
}

/** Refuses CUDA training without a GPU, or with fewer than --gpus: on the worker's `environment` event. */
export function checkDevice(p: Pick<PythonProbe, 'python' | 'torch'> & PythonDevices, needs: EnvNeeds): void {
  if (needs.device !== 'cuda') return;
  if (!p.cuda) {
    const build = p.torch?.includes('+cpu') ? ' (a CPU-only build)' : '';
    throw new EnvironmentError(
      `no CUDA GPU available: torch ${p.torch}${build} in ${p.python} reports torch.cuda.is_available() = False`,
      'train on a machine with an NVIDIA GPU and a CUDA build of torch, or pass --device cpu (slow: for tests and tiny models)',
    );
  }
  if (needs.gpus > p.cuda_devices) {
    throw new UsageError(`--gpus ${needs.gpus}: only ${p.cuda_devices} CUDA device(s) visible`);
  }
}

/** Both checks on what the probe and the worker reported together. */
export function checkEnvironment(p: PythonProbe, needs: EnvNeeds): void {
  checkPackages(p, needs);
  checkDevice(p, needs);
}
