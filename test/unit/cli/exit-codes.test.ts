/**
 * One table of exit codes (EXIT_TABLE, src/errors.ts) for every command (issue 31 item 13): the table is
 * what docs/cli.md and `--help` say, and every command in commands/*.ts answers a missing input, an
 * unknown flag and a bad value with the table's code in polar's error format ("did you mean" as the hint
 * line). Signals: `serve` (130 on Ctrl-C, 0 on SIGTERM), `gym`, `capture` and `train` reading stdin are
 * signalled here in a subprocess; `eval` and `loop` stopping on SIGTERM is test/e2e/stop-signals.test.ts.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import type { ResultPromise } from 'execa';
import { EXIT_CODES_HELP, main } from '../../../src/cli.ts';
import { EXIT, EXIT_TABLE } from '../../../src/errors.ts';
import { serverExitCode } from '../../../src/http/server.ts';
import { signalExitCode } from '../../../src/util/interrupt.ts';
import { closedPort, ROOT, startPolar } from '../../support/cli.ts';
import { tempDir } from '../../support/temp.ts';

const tmp = tempDir('polar-exit-codes-');
const MISSING = join(tmp, 'no-such-file.jsonl');
const URL_DOWN = `http://127.0.0.1:${await closedPort()}/v1`;
const BACKEND = ['--backend', 'openai', '--backend-url', URL_DOWN, '--model', 'm', '--skip-backend-check'];

/** Runs `polar ARGV` in this process (src/cli.ts main): the exit code and what it said on stderr. */
async function polar(argv: string[]): Promise<{ code: number; stderr: string }> {
  const lines: string[] = [];
  const write = process.stderr.write;
  process.stderr.write = ((chunk: string | Uint8Array) => {
    lines.push(String(chunk));
    return true;
  }) as typeof process.stderr.write;
  try {
    const code = await main(['node', 'polar', ...argv]);
    return { code, stderr: lines.join('') };
  } finally {
    process.stderr.write = write;
  }
}

interface Case {
  /** the command with what it requires (an unknown flag is then the only error) */
  base: string[];
  /** an input that is not there (a file or directory the command reads), or null when it reads none */
  missing: { argv: string[]; code: number } | null;
  /** a flag value that is not one of its words, close to one: the hint says which */
  badValue: { argv: string[]; suggestion: string };
}

/**
 * Every command of commands/*.ts. A missing input file is bad input (3) everywhere; a harness or Python
 * that is not installed is a missing tool (4).
 */
const CASES: Record<string, Case> = {
  capture: {
    base: ['capture'],
    missing: {
      argv: ['capture', ...BACKEND, '-o', join(tmp, 'c.jsonl'), '--', 'polar-no-such-harness'],
      code: EXIT.environment,
    },
    badValue: { argv: ['capture', '--harness', 'cdex', '--', 'codex'], suggestion: 'codex' },
  },
  build: {
    base: ['build', 'x.jsonl'],
    missing: { argv: ['build', MISSING], code: EXIT.badInput },
    badValue: { argv: ['build', 'x.jsonl', '--format', 'verll'], suggestion: 'verl' },
  },
  train: {
    base: ['train', 'x.jsonl', '--out', 'o'],
    missing: { argv: ['train', MISSING, '--model', 'm', '--out', join(tmp, 'train')], code: EXIT.badInput },
    badValue: { argv: ['train', 'x.jsonl', '--out', 'o', '--device', 'cpuu'], suggestion: 'cpu' },
  },
  eval: {
    base: ['eval', '--dataset', 'd'],
    missing: { argv: ['eval', '--dataset', MISSING, '--agent', 'gold', '--out', join(tmp, 'eval')], code: 3 },
    badValue: { argv: ['eval', '--dataset', 'd', '--agent', 'gld'], suggestion: 'gold' },
  },
  env: {
    base: ['env', 'build', '--dataset', 'd'],
    missing: { argv: ['env', 'build', '--dataset', MISSING], code: EXIT.badInput },
    badValue: { argv: ['env', 'build', '--dataset', 'd', '--limit', '0'], suggestion: '' },
  },
  grade: {
    base: ['grade', 'x.log'],
    missing: { argv: ['grade', MISSING, '--repo', 'a/b'], code: EXIT.badInput },
    badValue: { argv: ['grade', 'x.log', '--semantics', 'polr'], suggestion: 'polar' },
  },
  serve: {
    base: ['serve'],
    missing: null,
    badValue: { argv: ['serve', '--backend', 'sglng'], suggestion: 'sglang' },
  },
  inspect: {
    base: ['inspect', 'x.jsonl'],
    missing: { argv: ['inspect', MISSING, '-o', join(tmp, 'i.html')], code: EXIT.badInput },
    badValue: { argv: ['inspect', 'x.jsonl', '--max-trajectories', 'al'], suggestion: '' },
  },
  gym: {
    base: ['gym'],
    missing: {
      argv: ['gym', '--dataset', MISSING, '--dry-run', '--runtime', 'local', '--allow-unsandboxed'],
      code: EXIT.badInput,
    },
    badValue: { argv: ['gym', '--runtime', 'sandbx'], suggestion: 'sandbox' },
  },
  export: {
    base: ['export', 'ckpt'],
    missing: { argv: ['export', MISSING, '--out', join(tmp, 'onnx')], code: EXIT.badInput },
    badValue: { argv: ['export', 'ckpt', '--out', 'o', '--quantize', 'int4'], suggestion: 'int8' },
  },
  loop: {
    base: ['loop', '--train-set', 't', '--out', 'o', '--agent', 'pi'],
    missing: {
      argv: ['loop', '--train-set', MISSING, '--agent', 'pi', '--out', join(tmp, 'loop'), ...BACKEND],
      code: EXIT.badInput,
    },
    badValue: { argv: ['loop', '--train-set', 't', '--out', 'o', '--agent', 'pii'], suggestion: 'pi' },
  },
  doctor: {
    base: ['doctor'],
    missing: null,
    badValue: { argv: ['doctor', '--backend', 'vlm'], suggestion: 'vllm' },
  },
  job: {
    base: ['job', 'j.json'],
    missing: { argv: ['job', MISSING], code: EXIT.badInput },
    badValue: { argv: ['job', 'j.json', '--cluster-tag', '[1]'], suggestion: '' },
  },
  setup: {
    base: ['setup'],
    missing: { argv: ['setup', '--python', join(tmp, 'no-python3')], code: EXIT.environment },
    badValue: { argv: ['setup', '--pythn', 'python3'], suggestion: '--python' },
  },
};

after(() => rmSync(tmp, { recursive: true, force: true }));

describe('one table of exit codes', () => {
  test('names and codes are unique; the signal codes are 128 + the signal', () => {
    assert.equal(new Set(EXIT_TABLE.map((r) => r.code)).size, EXIT_TABLE.length);
    assert.equal(new Set(EXIT_TABLE.map((r) => r.name)).size, EXIT_TABLE.length);
    assert.equal(signalExitCode('SIGINT'), EXIT.interrupted);
    assert.equal(signalExitCode('SIGTERM'), EXIT.terminated);
    assert.equal(signalExitCode('SIGHUP'), EXIT.hangup);
    // a server asked to stop by its service manager stops cleanly; Ctrl-C is an interruption
    assert.equal(serverExitCode('SIGTERM'), EXIT.ok);
    assert.equal(serverExitCode('SIGINT'), EXIT.interrupted);
  });

  test("docs/cli.md's table is the same table, and --help says every code", () => {
    const doc = readFileSync(join(ROOT, 'docs/cli.md'), 'utf8');
    const section = doc.slice(
      doc.indexOf('## Exit codes'),
      doc.indexOf('\n## ', doc.indexOf('## Exit codes')),
    );
    const rows = [...section.matchAll(/^\| (\d+) \| (.*) \|$/gm)].map((m) => [Number(m[1]), m[2]]);
    assert.deepEqual(
      rows,
      EXIT_TABLE.map((r) => [r.code, r.meaning]),
      'docs/cli.md "Exit codes" lists EXIT_TABLE (src/errors.ts) row by row',
    );
    for (const row of EXIT_TABLE)
      assert.match(
        EXIT_CODES_HELP.replace(/\s+/g, ' '),
        new RegExp(`\\b${row.code} ${row.short.replace(/[()]/g, '\\$&')}`),
      );
  });

  test('the code says every exit code by its name in the table: no literal code in src/ or commands/', () => {
    // a command's exit code comes from EXIT (src/errors.ts): `return 0;` in a command body, `exitCode: 4` in an
    // error, process.exit or process.exitCode outside the one place that stops at a second signal, are not
    const found: string[] = [];
    const walk = (dir: string): string[] =>
      readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? walk(`${dir}/${e.name}`) : e.name.endsWith('.ts') ? [`${dir}/${e.name}`] : [],
      );
    for (const file of [...walk('src'), ...walk('commands')]) {
      if (file === 'src/errors.ts') continue;
      const lines = readFileSync(join(ROOT, file), 'utf8').split('\n');
      lines.forEach((line, i) => {
        const code = line.replace(/\/\/.*$/, '');
        const body = /(^|\/)command\.ts$|^commands\/|^src\/eval\/regrade\.ts$/.test(file);
        if (
          /exitCode\s*[:=]\s*\d/.test(code) ||
          /process\.exitCode\s*=/.test(code) ||
          (/process\.exit\(/.test(code) && file !== 'src/util/interrupt.ts') ||
          (body && /^\s*return \d+;/.test(code))
        )
          found.push(`${file}:${i + 1}: ${line.trim()}`);
      });
    }
    assert.deepEqual(found, []);
  });

  test('the cases cover every command of commands/*.ts', () => {
    const files = readdirSync(join(ROOT, 'commands'))
      .filter((f) => f.endsWith('.ts') && f !== 'flags.ts')
      .map((f) => f.replace(/\.ts$/, ''));
    assert.deepEqual(Object.keys(CASES).sort(), files.sort());
  });
});

describe('every command: missing input, unknown flag, bad value', () => {
  for (const [name, c] of Object.entries(CASES)) {
    if (c.missing) {
      const { argv, code } = c.missing;
      test(`${name}: a missing input exits ${code}`, async () => {
        const r = await polar(argv);
        assert.equal(r.code, code, r.stderr);
        assert.match(r.stderr, /^polar: error: .*(no such|not found|no \S+ found)/m, r.stderr);
      });
    }
    test(`${name}: an unknown flag is a usage error (2) in polar's format`, async () => {
      const r = await polar([...c.base, '--no-such-flag']);
      assert.equal(r.code, EXIT.usage, r.stderr);
      assert.match(
        r.stderr,
        /^polar: error: unknown option '--no-such-flag'\n {2}run with --help for usage\n$/,
      );
    });
    test(`${name}: a bad value is a usage error (2), "did you mean" as the hint`, async () => {
      const r = await polar(c.badValue.argv);
      assert.equal(r.code, EXIT.usage, r.stderr);
      const [first, hint, ...rest] = r.stderr.split('\n');
      assert.match(first ?? '', /^polar: error: /);
      assert.deepEqual(rest, [''], `two lines: ${r.stderr}`);
      if (c.badValue.suggestion)
        assert.equal(hint, `  did you mean ${c.badValue.suggestion}? (run with --help for usage)`);
      else assert.equal(hint, '  run with --help for usage');
      assert.doesNotMatch(r.stderr, /Did you mean/);
    });
  }

  test('an unknown command: "did you mean" in the hint line, not a line of its own', async () => {
    const r = await polar(['captur']);
    assert.equal(r.code, EXIT.usage);
    assert.equal(
      r.stderr,
      "polar: error: unknown command 'captur'\n  did you mean capture? (run with --help for usage)\n",
    );
  });
});

/** A polar that does not stop on the signal is killed after this long, and the test fails. */
const LIMIT = { timeoutMs: 180_000 };

/** Waits until `ready` holds (or polar ended), sends `signal`, returns polar's exit code. */
async function signalled(
  child: ResultPromise,
  ready: () => boolean,
  signal: NodeJS.Signals,
): Promise<number> {
  let ended = false;
  void child.finally(() => {
    ended = true;
  });
  while (!ended && !ready()) await new Promise((r) => setTimeout(r, 100));
  if (ended) assert.fail(`polar ended before it was signalled: ${(await child).stderr}`);
  child.kill(signal);
  const r = await child;
  assert.equal(r.signal, undefined, `polar handled ${signal} (was not killed by it): ${r.stderr}`);
  assert.ok(String(r.stderr).includes(signal), `polar said it received ${signal}: ${String(r.stderr)}`);
  return r.exitCode ?? -1;
}

/** stdout as it comes, for a server's one JSON line */
function stdoutOf(child: ResultPromise): () => string {
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += String(d);
  });
  return () => out;
}

describe('stopped by a signal', () => {
  const serveArgs = () => ['serve', ...BACKEND, '--port', '0', '--out', mkdtempSync(join(tmp, 'serve-'))];

  for (const [signal, code] of [
    ['SIGINT', EXIT.interrupted],
    ['SIGTERM', EXIT.ok],
  ] as const) {
    test(`serve: ${signal} exits ${code}`, async () => {
      const child = startPolar(serveArgs(), LIMIT);
      const out = stdoutOf(child);
      assert.equal(await signalled(child, () => out().includes('"url"'), signal), code);
    });
  }

  test('gym: SIGINT exits 130', async () => {
    const child = startPolar(
      [
        'gym',
        ...BACKEND,
        '--harness',
        'generic',
        '--agent-cmd',
        'true',
        '--runtime',
        'local',
        '--allow-unsandboxed',
        '--port',
        '0',
        '--out',
        mkdtempSync(join(tmp, 'gym-')),
      ],
      LIMIT,
    );
    const out = stdoutOf(child);
    assert.equal(await signalled(child, () => out().includes('"url"'), 'SIGINT'), EXIT.interrupted);
  });

  test('capture: Ctrl-C ends the harness and polar exits 130, as a shell reports it', async () => {
    const dir = mkdtempSync(join(tmp, 'capture-'));
    const ready = join(dir, 'ready');
    const child = startPolar(
      [
        'capture',
        ...BACKEND,
        '--harness',
        'generic',
        '-o',
        join(dir, 'c.jsonl'),
        '--',
        'sh',
        '-c',
        `touch ${ready}; sleep 60`,
      ],
      LIMIT,
    );
    assert.equal(await signalled(child, () => existsSync(ready), 'SIGINT'), EXIT.interrupted);
  });

  test('train: Ctrl-C while the trajectories still come on stdin exits 130 at once', async () => {
    const out = join(tmp, 'train-stdin');
    // stdin stays open: the writer upstream (`polar build ... |`) has not finished
    const child = startPolar(['train', '-', '--model', 'm', '--out', out], { ...LIMIT, stdin: 'pipe' });
    const code = await signalled(child, () => existsSync(join(out, 'trajectories.jsonl')), 'SIGINT');
    assert.equal(code, EXIT.interrupted);
  });
});
