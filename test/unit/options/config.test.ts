/**
 * `--config FILE` (issue 47 item 3): eval, loop, gym, train and serve read their options from a YAML or
 * JSON file whose keys are the long flag names; the command line wins, an unknown key is exit 2 naming the
 * key, the file and the nearest flag, and what a run records (loop.json, an eval's run.json) given back as
 * --config resolves to the same options. Commands are parsed by the real program (src/cli.ts) with the
 * action replaced, so nothing runs.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { program } from '../../../src/cli.ts';
import { PolarError } from '../../../src/errors.ts';
import type { EvalFlags } from '../../../src/eval/flags.ts';
import { evalJob, evaluationSetup, selectedInstances } from '../../../src/eval/job.ts';
import { runSettings } from '../../../src/eval/settings.ts';
import { type LoopFlags, loopOptions } from '../../../src/loop/command.ts';
import { loopRecord } from '../../../src/loop/loop.ts';
import { GIVEN } from '../../../src/options/config.ts';
import { recordSettings } from '../../../src/rollout/run/settings.ts';
import { checkUserConfig, type TrainFlags } from '../../../src/train/config.ts';
import { ROOT, runPolar } from '../../support/cli.ts';
import { tempDir } from '../../support/temp.ts';

const MINI = join(ROOT, 'fixtures/swe/mini.jsonl');

/** The flags a command line parses to (the command's action replaced: nothing runs). */
async function flagsOf<T>(argv: string[]): Promise<T> {
  const root = program();
  const cmd = root.commands.find((c) => c.name() === argv[0])!;
  let flags: unknown;
  cmd.action((...args: unknown[]) => {
    flags = args.find((a) => a !== null && typeof a === 'object' && !Array.isArray(a) && !('commands' in a));
  });
  await root.parseAsync(['node', 'polar', ...argv]);
  return flags as T;
}

function file(name: string, text: string): string {
  const path = join(tempDir('polar-config-'), name);
  writeFileSync(path, text);
  return path;
}

describe('--config FILE', () => {
  test('the file gives the options, a required one too; the command line wins, before or after --config', async () => {
    const yaml = file(
      'eval.yaml',
      [
        `dataset: ${MINI}`,
        'agent: gold',
        'samples: 2',
        'pass-env: [A, B]',
        'agent_timeout: 90',
        'chat-template-kwargs: {enable_thinking: false}',
        'memory-limit: 1GiB',
        'no-envs: true',
      ].join('\n'),
    );
    const f = await flagsOf<EvalFlags>(['eval', '--config', yaml]);
    assert.equal(f.dataset, MINI);
    assert.equal(f.agent, 'gold');
    assert.equal(f.samples, 2);
    assert.deepEqual(f.passEnv, ['A', 'B']);
    assert.equal(f.agentTimeout, 90_000, 'seconds, through the flag parser');
    assert.deepEqual(f.chatTemplateKwargs, { enable_thinking: false });
    assert.equal(f.memoryLimit, 1024 ** 3);
    assert.equal(f.envs, false);
    const after = await flagsOf<EvalFlags>(['eval', '--config', yaml, '--samples', '3', '--pass-env', 'C']);
    assert.equal(after.samples, 3);
    assert.deepEqual(after.passEnv, ['C'], "a repeatable flag on the command line replaces the file's");
    const before = await flagsOf<EvalFlags>(['eval', '--samples', '4', '--config', yaml]);
    assert.equal(before.samples, 4);
    // --no-envs's attribute is envs: true unless the file or the command line says no
    assert.equal((await flagsOf<EvalFlags>(['eval', '--dataset', MINI])).envs, true);
  });

  test('JSON works as YAML does; each of eval, loop, gym, train and serve takes --config', async () => {
    const json = file('a.json', JSON.stringify({ 'train-set': MINI, agent: 'pi', out: '/tmp/x', steps: 2 }));
    const f = await flagsOf<LoopFlags>(['loop', '--config', json]);
    assert.deepEqual([f.trainSet, f.agent, f.out, f.steps], [MINI, 'pi', '/tmp/x', 2]);
    const root = program();
    for (const name of ['eval', 'loop', 'gym', 'train', 'serve'])
      assert.ok(
        root.commands.find((c) => c.name() === name)!.options.some((o) => o.long === '--config'),
        `polar ${name} --config`,
      );
    const served = await flagsOf<{ port: number }>(['serve', '--config', file('s.yaml', 'port: 8123\n')]);
    assert.equal(served.port, 8123);
  });

  test('an unknown key, a bad value, a broken file: refused, naming the key, the file and the nearest flag', async () => {
    const typo = file('loop.yaml', 'agent: pi\nout: /tmp/o\ntrain_sett: a.jsonl\n');
    const r = await runPolar(['loop', '--config', typo]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(
      r.stderr,
      new RegExp(`${typo.replaceAll('/', '\\/')}: train-sett is not a flag of polar loop`),
    );
    assert.match(r.stderr, /did you mean train-set \(--train-set\)\?/);
    const bad = file('eval.yaml', `dataset: ${MINI}\nsamples: 0\n`);
    const v = await runPolar(['eval', '--config', bad]);
    assert.equal(v.code, 2, v.stderr);
    assert.match(v.stderr, /--samples 0: expected a positive integer \(in .*eval\.yaml\)/);
    await assert.rejects(
      flagsOf(['gym', '--config', file('g.yaml', 'port: [1\n')]),
      (e: unknown) => PolarError.isInstance(e) && /g\.yaml:\d+: not valid YAML/.test(e.message),
    );
    await assert.rejects(
      flagsOf(['eval', '--config', file('s.yaml', 'resume: yes please\n')]),
      /a switch is true or false/,
    );
    await assert.rejects(
      flagsOf(['eval', '--config', file('n.yaml', 'config: other.yaml\n')]),
      /cannot name another/,
    );
  });

  test("polar train: train.json's keys (snake_case, with or without a flag) and train's flags in one file", async () => {
    const conf = file(
      'train.yaml',
      'lr: 2.0e-6\nlora_r: 8\nadam-betas: [0.9, 0.95]\nout: /tmp/t\ntis: false\n',
    );
    const f = await flagsOf<TrainFlags>(['train', 't.jsonl', '--config', conf, '--lr', '3e-6']);
    assert.equal(f.lr, 3e-6);
    assert.equal(f.out, '/tmp/t');
    assert.equal(f.tis, false);
    assert.deepEqual(checkUserConfig(f.configKeys ?? {}, conf), { lora_r: 8, adam_betas: [0.9, 0.95] });
    await assert.rejects(
      flagsOf(['train', 't.jsonl', '--config', file('t.yaml', 'lora_rr: 8\n')]),
      (e: unknown) => PolarError.isInstance(e) && /did you mean lora-r\?/.test(e.hint ?? ''),
    );
  });
});

describe('a run given back as --config repeats it', () => {
  test("polar loop: loop.json's options, given back, resolve to the same loop.json", async () => {
    const out = tempDir('polar-config-loop-');
    const argv = [
      'loop',
      ...['--train-set', MINI, '--eval-set', MINI, '--agent', 'pi', '--out', join(out, 'run')],
      ...['--group-size', '4', '--tasks-per-step', '2', '--steps', '3', '--eval-every', '0'],
      ...['--pass-env', 'A', '--pass-env', 'B', '--agent-timeout', '120', '--memory-limit', '2GiB'],
      ...['--no-envs', '--lr', '1e-5', '--device', 'cpu', '--grader', 'echo 1', '--grade-empty-patches'],
      ...['--backend-url', 'http://user:secret@127.0.0.1:8000/v1', '--model', 'm', '--api-key', 'sk-1'],
      ...['--chat-template-kwargs', '{"enable_thinking":false}', '--resume'],
    ];
    const first = loopRecord(loopOptions(await flagsOf<LoopFlags>(argv)));
    const written = join(out, 'loop.json');
    writeFileSync(written, JSON.stringify(first, null, 2));
    const config = first.config as Record<string, unknown>;
    assert.ok(Array.isArray(config['pass-env']));
    assert.equal(config['api-key'], undefined, 'no key in the record');
    assert.equal(config.resume, undefined, '--resume is not repeated by the record');
    assert.equal(config['backend-url'], 'http://<redacted>@127.0.0.1:8000/v1');
    // the key comes from the environment again, and the credentials of the URL from the command line
    const again = await flagsOf<LoopFlags>([
      'loop',
      '--config',
      written,
      '--backend-url',
      'http://user:secret@127.0.0.1:8000/v1',
      '--resume',
    ]);
    const second = loopRecord(loopOptions({ ...again, apiKey: 'sk-1' }));
    assert.deepEqual(second, first);
    assert.ok(!JSON.stringify(first).includes('secret'));
    assert.ok(!readFileSync(written, 'utf8').includes('sk-1'));
  });

  test("polar eval: run.json's options, given back, make the same job and the same settings", async () => {
    const out = tempDir('polar-config-eval-');
    const argv = [
      'eval',
      ...[
        '--dataset',
        MINI,
        '--agent',
        'gold',
        '--instances',
        'polar-fixtures__jsutil-5,polar-fixtures__qs-lite-7',
      ],
      ...[
        '--samples',
        '2',
        '--out',
        out,
        '--test-timeout',
        '60',
        '--runtime',
        'local',
        '--env-python',
        '3.11=/usr/bin/python3',
      ],
      '--overwrite',
    ];
    const jobOf = async (f: EvalFlags) => {
      const setup = evaluationSetup(f, () => {});
      const { instances } = await selectedInstances(f);
      return evalJob(f, setup, instances, runSettings(f));
    };
    const f1 = await flagsOf<EvalFlags>(argv);
    const job = await jobOf(f1);
    await recordSettings(out, job.settings ?? {}, false, job.config);
    const record = JSON.parse(readFileSync(join(out, 'run.json'), 'utf8'));
    assert.equal(record.config.overwrite, undefined, '--overwrite is not repeated by the record');
    const f2 = await flagsOf<EvalFlags>(['eval', '--config', join(out, 'run.json'), '--overwrite']);
    assert.deepEqual(f2[GIVEN as 'given'], f1.given);
    const job2 = await jobOf(f2);
    assert.deepEqual(job2, job);
  });
});
