import assert from 'node:assert/strict';
import { chmodSync, existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { EnvironmentError, UsageError } from '../../../src/errors.ts';
import {
  checkEnvironment,
  findPython,
  type Prober,
  type PythonProbe,
  VENV_PYTHON,
} from '../../../src/train/env.ts';
import { runTrain } from '../../../src/train/launch.ts';
import { smallBatch, TINY, tempDir, writeJsonl } from './fixtures.ts';

const probe = (over: Partial<PythonProbe>): PythonProbe => ({
  python: 'python3',
  executable: '/usr/bin/python3',
  version: '3.11.2',
  torch: '2.11.0',
  cuda: true,
  cuda_devices: 1,
  device_names: ['H200'],
  transformers: '5.17.0',
  peft: '0.17.0',
  safetensors: '0.6.0',
  numpy: '2.0.0',
  ...over,
});

describe('train environment', () => {
  test('the .venv of npm run setup:python first, then python3, then /usr/bin/python3', async () => {
    const seen: string[] = [];
    const prober: Prober = async (python) => {
      seen.push(python);
      if (python === VENV_PYTHON) return { python, problem: 'not found' };
      return python === 'python3' ? probe({ python, torch: null }) : probe({ python, torch: '2.13.0' });
    };
    const p = await findPython(undefined, prober);
    assert.equal(p.python, '/usr/bin/python3');
    assert.deepEqual(seen, [VENV_PYTHON, 'python3', '/usr/bin/python3']);
    assert.match(VENV_PYTHON, /\.venv\/bin\/python$/);
  });

  test('an explicit --python is the only candidate, and no torch anywhere names every attempt', async () => {
    const prober: Prober = async (python) =>
      python === '/opt/py' ? { python, problem: 'not found' } : probe({ python, torch: null });
    await assert.rejects(findPython('/opt/py', prober), (e: unknown) => {
      assert.ok(e instanceof EnvironmentError);
      assert.match(e.message, /\/opt\/py \(not found\)/);
      assert.doesNotMatch(e.message, /python3/);
      return true;
    });
    await assert.rejects(findPython(undefined, prober), (e: unknown) => {
      assert.ok(e instanceof EnvironmentError);
      assert.match(e.message, /python3 \(Python 3\.11\.2, no torch\), \/usr\/bin\/python3/);
      assert.match(e.hint ?? '', /npm run setup:python/);
      assert.match(e.hint ?? '', /--python PATH or POLAR_PYTHON/);
      return true;
    });
  });

  test('each missing or too old piece is named with the command that makes the environment', () => {
    const needs = { device: 'cuda' as const, gpus: 1, lora: true };
    for (const [over, what] of [
      [{ transformers: null }, /no transformers/],
      [{ safetensors: null }, /no safetensors/],
      [{ peft: null }, /no peft/],
      [{ torch: '1.13.1' }, /torch 1\.13\.1: polar's worker needs torch 2\.x/],
      [{ transformers: '4.57.6' }, /transformers 4\.57\.6: polar's worker needs transformers 5\.x/],
    ] as const) {
      assert.throws(
        () => checkEnvironment(probe(over), needs),
        (e: unknown) =>
          e instanceof EnvironmentError &&
          what.test(e.message) &&
          (e.hint ?? '').includes('npm run setup:python') &&
          (e.hint ?? '').includes('-m pip install -r ') &&
          (e.hint ?? '').includes('requirements.txt'),
      );
    }
    // peft is only needed for LoRA
    checkEnvironment(probe({ peft: null }), { ...needs, lora: false });
  });

  test('refuses without a GPU unless the device is cpu', () => {
    const cpuOnly = probe({ torch: '2.11.0+cpu', cuda: false, cuda_devices: 0 });
    assert.throws(
      () => checkEnvironment(cpuOnly, { device: 'cuda', gpus: 1, lora: false }),
      (e: unknown) =>
        e instanceof EnvironmentError &&
        /no CUDA GPU/.test(e.message) &&
        /CPU-only/.test(e.message) &&
        /--device cpu/.test(e.hint ?? ''),
    );
    checkEnvironment(cpuOnly, { device: 'cpu', gpus: 1, lora: false });
    assert.throws(() => checkEnvironment(probe({}), { device: 'cuda', gpus: 4, lora: false }), UsageError);
  });
});

describe('the worker reports the devices', () => {
  test("the worker's environment event is checked: no GPU stops the worker and leaves nothing in --out", async () => {
    const dir = await tempDir();
    const traj = await writeJsonl(join(dir, 'traj.jsonl'), smallBatch());
    // a stand-in worker: reports a CPU-only torch as its first event, then would run for ever
    const python = join(dir, 'python');
    const event = {
      event: 'environment',
      python,
      torch: '2.9.0+cpu',
      cuda: false,
      cuda_devices: 0,
      device_names: [],
    };
    writeFileSync(
      python,
      `#!${process.execPath}\nconsole.log(${JSON.stringify(JSON.stringify(event))}); setInterval(() => {}, 1000);\n`,
    );
    chmodSync(python, 0o755);
    const packages = {
      python,
      executable: python,
      version: '3.11.2',
      torch: '2.9.0+cpu',
      transformers: '5.1.0',
      peft: null,
      safetensors: '0.6.0',
      numpy: null,
    };
    const out = join(dir, 'out');
    await assert.rejects(
      runTrain(
        { trajectories: traj, out, flags: { model: TINY, device: 'cuda' } },
        { probe: async () => packages },
      ),
      (e: unknown) =>
        e instanceof EnvironmentError &&
        /no CUDA GPU available: torch 2\.9\.0\+cpu \(a CPU-only build\)/.test(e.message),
    );
    assert.equal(existsSync(out), false);
  });
});
