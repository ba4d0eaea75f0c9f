/**
 * Issue 18's conventions and checks in the option layer: a training checkpoint on the embedded backend,
 * output paths checked before anything starts.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { program, reportError } from '../../../src/cli.ts';
import { UsageError } from '../../../src/errors.ts';
import { backendOptions } from '../../../src/options/backend.ts';
import { checkOutputFile } from '../../../src/options/output.ts';
import { resumeDirectory } from '../../../src/train/config.ts';
import { parseArgv } from '../../support/argv.ts';
import { tempDir } from '../../support/temp.ts';

const tmp = tempDir('polar-conventions-');

describe('backend flags', () => {
  test('a polar train checkpoint on the embedded backend: served by vLLM/SGLang or exported first', () => {
    const ckpt = join(tmp, 'ckpt');
    mkdirSync(join(ckpt, 'step-1'), { recursive: true });
    writeFileSync(join(ckpt, 'latest'), 'step-1\n');
    writeFileSync(join(ckpt, 'step-1', 'config.json'), '{}');
    writeFileSync(join(ckpt, 'step-1', 'model.safetensors'), '');
    for (const model of [`${ckpt}/`, join(ckpt, 'step-1')]) {
      assert.throws(
        () => backendOptions({ model }),
        (e: unknown) =>
          e instanceof UsageError &&
          /a training checkpoint without onnx\/model\.onnx/.test(e.message) &&
          /--backend vllm/.test(String(e.hint)) &&
          /polar export/.test(String(e.hint)),
      );
    }
    // an exported model directory is fine
    const onnx = join(tmp, 'exported');
    mkdirSync(join(onnx, 'onnx'), { recursive: true });
    assert.equal(backendOptions({ model: onnx }).model, onnx);
    // the same checkpoint behind a server is fine
    assert.equal(backendOptions({ backendUrl: 'http://127.0.0.1:8000/v1', model: ckpt }).kind, 'vllm');
  });

  test('a server backend without --backend-url is refused when the flags are read', () => {
    assert.throws(
      () => backendOptions({ backend: 'sglang', model: 'm' }),
      /--backend sglang needs --backend-url/,
    );
  });
});

describe('output paths', () => {
  test('a directory, an unwritable place, and a file in new folders', async () => {
    await assert.rejects(checkOutputFile(tmp, '--output'), /--output .* is a directory, not a file/);
    await assert.rejects(checkOutputFile('/proc/polar-x.jsonl', '--output'), /cannot be written/);
    const deep = join(tmp, 'a', 'b', 'out.jsonl');
    await checkOutputFile(deep, '--output');
    assert.ok(existsSync(join(tmp, 'a', 'b')), 'the folders are made');
    assert.ok(!existsSync(deep), 'the probe leaves no file behind');
  });
});

describe('one set of conventions', () => {
  const root = program();
  const help = (name: string) =>
    root.commands
      .find((c) => c.name() === name)!
      .helpInformation()
      .replace(/\s+/g, ' ');
  const full = (name: string) => {
    let text = '';
    const sub = program().commands.find((c) => c.name() === name)!;
    const add = (s: string): void => {
      text += s;
    };
    sub.configureOutput({ writeOut: add, writeErr: add });
    sub.exitOverride();
    try {
      sub.outputHelp();
    } catch {}
    return text;
  };

  test('every --help: examples, exit codes, required options marked, no "(default: false)"', () => {
    for (const sub of root.commands.map((c) => c.name())) {
      const text = full(sub);
      assert.match(text, /\nExamples:\n {2}polar /, `${sub} has examples`);
      assert.match(text, /Exit codes: 0 ok, 1 failure, 2 usage error/, `${sub} lists the exit codes`);
      assert.doesNotMatch(text, /\(default: false\)/, sub);
    }
    assert.match(help('eval'), /--dataset <path\|hub-id> .* \(required\)/);
    assert.match(
      help('loop'),
      /--agent <name> the harness the rollouts run under polar capture: codex \| claude \| pi \| qwen \| gemini \| opencode \| generic \(required\)/,
    );
    assert.match(help('train'), /--out <dir> .* \(required\)/);
    assert.match(help('export'), /--out <dir> .* \(required\)/);
    assert.match(help('capture'), /default: polar-captures\/<time>-<harness>\.jsonl/);
  });

  test('one output flag: --out DIR for directories (export --onnx and serve --captures stay as aliases)', () => {
    assert.equal(parseArgv(['export', 'ckpt', '--out', 'dir']).flags.out, 'dir');
    assert.equal(parseArgv(['export', 'ckpt', '--onnx', 'dir']).flags.onnx, 'dir');
    assert.equal(parseArgv(['serve', '--out', 'caps']).flags.out, 'caps');
    assert.doesNotMatch(help('export'), /--onnx/);
    assert.doesNotMatch(help('serve'), /--captures/);
    assert.match(help('build'), /--max-trace-tokens <n>/);
    assert.doesNotMatch(help('build'), /--max-tokens </);
  });

  test('--resume: continue the run in --out, in train as in eval and loop', () => {
    const out = join(tmp, 'train-out');
    mkdirSync(out);
    assert.throws(() => resumeDirectory({ resume: true, out }), /--out .* holds no checkpoint/);
    writeFileSync(join(out, 'latest'), 'step-2\n');
    assert.equal(resumeDirectory({ resume: true, out }), out);
    assert.equal(resumeDirectory({ resumeFrom: 'ck', out }), 'ck');
    const warnings: string[] = [];
    assert.equal(
      resumeDirectory({ resume: 'ck', out }, (m) => warnings.push(m)),
      'ck',
    );
    assert.match(warnings[0] ?? '', /--resume ck is now --resume-from ck/);
    assert.throws(() => resumeDirectory({ resume: true, resumeFrom: 'ck', out }), /give one/);
    assert.equal(parseArgv(['train', 't.jsonl', '--out', 'o', '--resume']).flags.resume, true);
  });

  test('a closed stdout (EPIPE) is a quiet success', () => {
    const epipe = Object.assign(new Error('write EPIPE'), { code: 'EPIPE' });
    assert.equal(reportError(epipe, false), 0);
  });
});
