/**
 * Finds a Python that imports torch and reports what it has (torch, CUDA, transformers, peft, safetensors),
 * so a missing piece is named with the command that installs it before the worker starts. Without
 * --python / POLAR_PYTHON the candidates are the clone's .venv (`npm run setup:python`) and the environment
 * `polar setup` makes in polar's cache, both from src/train/worker/requirements.txt (the one declaration of
 * polar's Python environment).
 */
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { EnvironmentError, UsageError } from '../errors.ts';

export interface PythonProbe {
  python: string;
  executable: string;
  version: string;
  torch: string | null;
  cuda: boolean;
  cuda_devices: number;
  device_names: string[];
  transformers: string | null;
  peft: string | null;
  safetensors: string | null;
  numpy: string | null;
}

const PROBE = `
import json, sys
out = {"executable": sys.executable, "version": sys.version.split()[0], "torch": None, "cuda": False,
       "cuda_devices": 0, "device_names": []}
for name in ("transformers", "peft", "safetensors", "numpy"):
    try:
        out[name] = __import__(name).__version__
    except Exception:
        out[name] = None
try:
    import torch
    out["torch"] = torch.__version__
    out["cuda"] = bool(torch.cuda.is_available())
    if out["cuda"]:
        out["cuda_devices"] = torch.cuda.device_count()
        out["device_names"] = [torch.cuda.get_device_name(i) for i in range(out["cuda_devices"])]
except Exception:
    pass
print(json.dumps(out))
`;

export type Prober = (python: string) => Promise<PythonProbe | { python: string; problem: string }>;

export const probePython: Prober = async (python) => {
  const r = await execa(python, ['-c', PROBE], { reject: false, timeout: 120_000 });
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
      ...(JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '') as Omit<PythonProbe, 'python'>),
    };
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

/**
 * --python / POLAR_PYTHON if given (must import torch), else the first that does of: the clone's .venv,
 * the environment `polar setup` makes in polar's cache, python3, /usr/bin/python3.
 */
export async function findPython(
  explicit: string | undefined,
  probe: Prober = probePython,
): Promise<PythonProbe> {
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
 * safetensors; peft for --lora); refuses CUDA training without a GPU.
 */
export function checkEnvironment(p: PythonProbe, needs: EnvNeeds): void {
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
  if (needs.device === 'cuda') {
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
}
