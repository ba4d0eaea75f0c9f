import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { EnvironmentError, UsageError } from '../../../src/errors.ts';
import { checkEnvironment, findPython, type Prober, type PythonProbe } from '../../../src/train/env.ts';

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
  test('falls back from python3 to /usr/bin/python3 when python3 has no torch', async () => {
    const seen: string[] = [];
    const prober: Prober = async (python) => {
      seen.push(python);
      return python === 'python3' ? probe({ python, torch: null }) : probe({ python, torch: '1.13.0' });
    };
    const p = await findPython(undefined, prober);
    assert.equal(p.python, '/usr/bin/python3');
    assert.deepEqual(seen, ['python3', '/usr/bin/python3']);
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
      assert.match(e.hint ?? '', /pip install torch/);
      assert.match(e.hint ?? '', /apt-get install python3-torch/);
      return true;
    });
  });

  test('each missing piece is named with the command that installs it', () => {
    const needs = { device: 'cuda' as const, gpus: 1, lora: true, hfModel: true };
    for (const [missing, cmd] of [
      ['transformers', 'pip install transformers'],
      ['safetensors', 'pip install safetensors'],
      ['peft', 'pip install peft'],
    ] as const) {
      assert.throws(
        () => checkEnvironment(probe({ [missing]: null }), needs),
        (e: unknown) =>
          e instanceof EnvironmentError && e.message.includes(missing) && (e.hint ?? '').includes(cmd),
      );
    }
    // the tiny test model needs none of them
    checkEnvironment(probe({ transformers: null, peft: null, safetensors: null }), {
      ...needs,
      hfModel: false,
    });
  });

  test('refuses without a GPU unless the device is cpu', () => {
    const cpuOnly = probe({ torch: '2.11.0+cpu', cuda: false, cuda_devices: 0 });
    assert.throws(
      () => checkEnvironment(cpuOnly, { device: 'cuda', gpus: 1, lora: false, hfModel: true }),
      (e: unknown) =>
        e instanceof EnvironmentError &&
        /no CUDA GPU/.test(e.message) &&
        /CPU-only/.test(e.message) &&
        /--device cpu/.test(e.hint ?? ''),
    );
    checkEnvironment(cpuOnly, { device: 'cpu', gpus: 1, lora: false, hfModel: true });
    assert.throws(
      () => checkEnvironment(probe({}), { device: 'cuda', gpus: 4, lora: false, hfModel: true }),
      UsageError,
    );
  });
});
