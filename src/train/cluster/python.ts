/**
 * The Python that drives a Ray cluster: the first of --python/POLAR_PYTHON, the repository's .venv (made
 * by `npm run setup`, which installs the pinned cluster group src/train/worker/requirements-cluster.txt)
 * and python3 that imports ray. None: an EnvironmentError with the command that installs it.
 */
import { execa } from 'execa';
import { EnvironmentError } from '../../errors.ts';
import { VENV_PYTHON } from '../env.ts';
import { WORKER_DIR } from '../launch.ts';

export const CLUSTER_REQUIREMENTS = `${WORKER_DIR}/requirements-cluster.txt`;

export async function rayPython(given?: string): Promise<{ python: string; ray: string }> {
  const candidates = [given, process.env.POLAR_PYTHON, VENV_PYTHON, 'python3'].filter((p): p is string =>
    Boolean(p),
  );
  const tried: string[] = [];
  for (const python of candidates) {
    const r = await execa(python, ['-c', 'import ray; print(ray.__version__)'], {
      reject: false,
      timeout: 120_000,
    });
    if (r.exitCode === 0) return { python, ray: String(r.stdout).trim() };
    tried.push(`${python}: ${(r as { code?: string }).code === 'ENOENT' ? 'not found' : 'no ray'}`);
  }
  throw new EnvironmentError(
    `--cluster ray needs a Python with ray (tried ${tried.join('; ')})`,
    `npm run setup installs it into .venv (${CLUSTER_REQUIREMENTS}); or: python3 -m pip install -r ${CLUSTER_REQUIREMENTS}`,
  );
}

/** The environment of a polar Python module (src/train/worker on PYTHONPATH). */
export function workerEnv(): Record<string, string> {
  const path = process.env.PYTHONPATH;
  return {
    PYTHONPATH: path ? `${WORKER_DIR}:${path}` : WORKER_DIR,
    PYTHONUNBUFFERED: '1',
    PYTHONDONTWRITEBYTECODE: '1',
    RAY_USAGE_STATS_ENABLED: '0',
  };
}
