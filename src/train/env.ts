/**
 * Finds a Python that imports torch and reports what it has (torch, CUDA, transformers, peft, safetensors),
 * so a missing piece is named with the command that installs it before the worker starts.
 */
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

const TORCH_HINT =
  'install PyTorch for that Python (pip install torch; a CUDA build: https://pytorch.org/get-started/locally/; ' +
  'Debian/Ubuntu: apt-get install python3-torch), or point polar at a Python that has it: --python PATH or POLAR_PYTHON';

/** --python / POLAR_PYTHON if given (must import torch), else the first of python3, /usr/bin/python3 that does. */
export async function findPython(
  explicit: string | undefined,
  probe: Prober = probePython,
): Promise<PythonProbe> {
  const candidates = explicit ? [explicit] : ['python3', '/usr/bin/python3'];
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
  throw new EnvironmentError(`no Python with PyTorch found: tried ${tried.join(', ')}`, TORCH_HINT);
}

export interface EnvNeeds {
  device: 'cuda' | 'cpu';
  gpus: number;
  lora: boolean;
  /** a Hugging Face model (not the tiny test model) */
  hfModel: boolean;
}

/** Names each missing piece with the command that installs it; refuses CUDA training without a GPU. */
export function checkEnvironment(p: PythonProbe, needs: EnvNeeds): void {
  const via = `${p.python} -m pip install`;
  if (needs.hfModel && p.transformers === null) {
    throw new EnvironmentError(
      `${p.python} has no transformers (needed to load the model)`,
      `install it: ${via} transformers`,
    );
  }
  if (needs.hfModel && p.safetensors === null) {
    throw new EnvironmentError(
      `${p.python} has no safetensors (needed to write checkpoints)`,
      `install it: ${via} safetensors`,
    );
  }
  if (needs.hfModel && needs.lora && p.peft === null) {
    throw new EnvironmentError(`${p.python} has no peft (needed for --lora)`, `install it: ${via} peft`);
  }
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
