/**
 * One evaluation setup: `polar eval`, `polar loop` and `polar gym` given the same flags build the same
 * runtime and the same container command lines (the engine is a recorder: docker.ts builds argv without
 * one). The harness config dir is mounted for all three (it was missing for gym, see c01d727).
 */
import assert from 'node:assert/strict';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import { program } from '../../../src/cli.ts';
import type { EvalFlags } from '../../../src/eval/flags.ts';
import { evaluationSetup } from '../../../src/eval/job.ts';
import { type GymFlags, gymEvaluation } from '../../../src/gym/command.ts';
import { type LoopFlags, loopOptions } from '../../../src/loop/command.ts';
import { loopEvaluation } from '../../../src/loop/phases.ts';
import { DEFAULTS } from '../../../src/options/defaults.ts';
import { HarnessAgent, type RunCapture } from '../../../src/rollout/agents.ts';
import { loadDataset } from '../../../src/rollout/dataset.ts';
import type { ExecResult } from '../../../src/rollout/exec.ts';
import { createRuntime } from '../../../src/rollout/runtime/create.ts';
import { type EvaluationSetup, harnessSetup, setupEvaluation } from '../../../src/rollout/setup.ts';
import { parseArgv } from '../../support/argv.ts';
import { execResult } from '../../support/exec-result.ts';
import { tempDir } from '../../support/temp.ts';
import { MINI } from './run/helpers.ts';

const SHARED = [
  '--harness',
  'pi',
  '--pi-api',
  'openai-responses',
  '--backend-url',
  'http://127.0.0.1:8000/v1',
  '--model',
  'Qwen/Qwen3.5-4B',
  '--runtime',
  'podman',
  '--image',
  'registry.example/{instance_id}:v1',
  '--network',
  'polar-net',
];

function setups(extra: string[] = []): Record<'eval' | 'loop' | 'gym', EvaluationSetup> {
  const evalFlags = parseArgv(['eval', '--dataset', MINI, ...SHARED, ...extra]).flags as unknown as EvalFlags;
  const loopFlags = parseArgv(['loop', '--train-set', MINI, '--out', 'run', ...SHARED, ...extra])
    .flags as unknown as LoopFlags;
  const gymFlags = parseArgv(['gym', '--dataset', MINI, ...SHARED, ...extra]).flags as unknown as GymFlags;
  return {
    eval: evaluationSetup(evalFlags),
    loop: loopEvaluation(loopOptions(loopFlags)),
    gym: gymEvaluation(gymFlags),
  };
}

/** what one sample does in a container: start it, then start the harness in it under capture */
async function containerLines(setup: EvaluationSetup): Promise<string[][]> {
  const lines: string[][] = [];
  const runner = async (argv: string[]): Promise<ExecResult> => {
    lines.push(argv);
    return execResult();
  };
  const tmpRoot = tempDir('polar-setup-test-');
  const { runtime } = await setupEvaluation(setup, { runner, tmpRoot });
  const [instance] = await loadDataset(MINI);
  const env = await runtime.prepare(instance!, 'agent');
  const fake: RunCapture = async (o) => {
    // as runCapture does once its proxy listens: the runtime says how the harness starts inside
    const launched = await o.launch!({
      argv: o.command,
      env: { PATH: '/usr/bin' },
      proxyUrl: 'http://127.0.0.1:4567',
      runDir: `${o.runDirBase}/polar-run-x`,
    });
    await launched.close();
    lines.push(launched.command, [`runDirBase=${o.runDirBase}`], [`api=${o.harnessOptions?.api}`]);
    return {
      sessionId: 's',
      exitCode: 0,
      signal: null,
      status: 'completed',
      calls: 0,
      errors: 0,
      clientClosed: 0,
      cut: 0,
      lost: 0,
      output: o.output,
    };
  };
  // the harness agent as gym makes it per rollout (eval and loop: createAgent, from the same harnessSetup)
  const agent = new HarnessAgent({
    ...(await harnessSetup({ ...setup.agent, agent: 'pi' }, runtime)),
    runCapture: fake,
    createBackend: async () => ({}) as never,
  });
  await agent.run({ instance: instance!, sample: 0, env, timeoutMs: 1000, capturePath: 'c.jsonl', meta: {} });
  // the container name carries a random nonce and the config dir a temp name: the same for all three
  const name = lines[0]![lines[0]!.indexOf('--name') + 1]!;
  return lines.map((l) =>
    l.map((a) =>
      a
        .replaceAll(name, '<name>')
        .replace(/\/[^ :=]*polar-setup-test-[^/]+\/polar-container-[\w.-]+/g, '<dir>'),
    ),
  );
}

describe('one evaluation setup for eval, loop and gym', () => {
  test('the same options give the same runtime setup and harness', () => {
    const { eval: e, loop, gym } = setups();
    assert.deepEqual(loop, e);
    assert.deepEqual(gym, e);
    assert.deepEqual(e.runtime, {
      kind: 'podman',
      // no --repos: repos/ beside the dataset file
      repos: join(dirname(MINI), 'repos'),
      image: 'registry.example/{instance_id}:v1',
      network: 'polar-net',
      limits: { memoryBytes: 8 * 1024 ** 3, pids: 1024, diskBytes: 4 * 1024 ** 3 },
      // the runtime factory decides whether its kind builds environments (src/rollout/env/): local and sandbox do
      environments: { cacheDir: DEFAULTS.envCache.value, pythons: {} },
    });
  });

  test('the same container command lines, with the harness config dir mounted in all three', async () => {
    const all = setups();
    const lines = await containerLines(all.eval);
    assert.deepEqual(await containerLines(all.loop), lines);
    assert.deepEqual(await containerLines(all.gym), lines);
    const run = lines[0]!;
    assert.deepEqual(run.slice(0, 2), ['podman', 'run']);
    assert.ok(run.includes('registry.example/polar-fixtures__textkit-1:v1'), 'the --image template');
    assert.deepEqual(run.slice(run.indexOf('--network'), run.indexOf('--network') + 2), [
      '--network',
      'polar-net',
    ]);
    assert.ok(run.includes(`${process.execPath}:/polar/bin/node:ro`), 'node mounted read-only');
    assert.ok(
      run.some((a) => /node_modules:\/polar\/node_modules:ro$/.test(a)),
      'node_modules mounted',
    );
    assert.ok(
      run.includes('<dir>:<dir>'),
      "the container's private folder mounted writable at the same path",
    );
    assert.ok(
      run.some((a) => a.endsWith(':/polar/forward.mjs:ro')),
      'the proxy forwarder mounted',
    );
    assert.deepEqual(lines[1]!.slice(0, 2), ['podman', 'exec'], 'the history scrub at start');
    assert.match(lines[1]!.at(-1)!, /repack -a -d/);
    const harness = lines[2]!;
    assert.deepEqual(harness.slice(0, 3), ['podman', 'exec', '-i']);
    const node = harness.indexOf('/polar/bin/node');
    assert.deepEqual(
      harness.slice(node, node + 4),
      ['/polar/bin/node', '/polar/forward.mjs', '4567=<dir>/sock/port-0.sock', '--'],
      'the harness starts behind the forwarder, on the proxy port, with the mounted node',
    );
    assert.ok(harness.slice(node + 4).includes('/polar/bin/node'), 'the harness itself on the mounted node');
    assert.deepEqual(lines[3], ['runDirBase=<dir>/harness']);
    assert.deepEqual(lines[4], ['api=openai-responses']);
  });

  test('the local runtime refuses a harness without --allow-unsandboxed, for all three', async () => {
    for (const [name, setup] of Object.entries(setups(['--runtime', 'local']))) {
      await assert.rejects(
        createRuntime(setup.runtime, { harness: 'pi' }),
        /--runtime local would run the pi harness unsandboxed/,
        name,
      );
    }
  });
});

test('polar eval: --agent is the one flag; --harness, its old name, gives the same setup and warns once', () => {
  const argv = (name: string) =>
    parseArgv(['eval', '--dataset', MINI, ...SHARED.slice(2), name, 'pi']).flags as unknown as EvalFlags;
  const warnings: string[] = [];
  const viaAgent = evaluationSetup(argv('--agent'), (m) => warnings.push(m));
  assert.equal(warnings.length, 0);
  const viaHarness = evaluationSetup(argv('--harness'), (m) => warnings.push(m));
  assert.deepEqual(viaHarness, viaAgent);
  assert.deepEqual(warnings, [
    '--harness of polar eval is now --agent (the old name goes in the next release)',
  ]);
  // both names, the same harness: one agent, still the one warning for the old name
  const both = parseArgv(['eval', '--dataset', MINI, ...SHARED, '--agent', 'pi'])
    .flags as unknown as EvalFlags;
  assert.deepEqual(
    evaluationSetup(both, () => {}),
    viaAgent,
  );
  const help = program()
    .commands.find((c) => c.name() === 'eval')!
    .helpInformation();
  assert.match(help, /--agent <name>/);
  assert.doesNotMatch(help, /--harness/, 'the old name is hidden');
});
