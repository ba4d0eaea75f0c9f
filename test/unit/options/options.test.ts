/**
 * The option layer: each parser's accepted and refused values, argv -> typed flags for every command,
 * commander's own errors in polar's format (`polar: error: --flag value: problem`, exit 2), and the
 * defaults shown in --help as values.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { CommanderError } from 'commander';
import { main, program, reportError } from '../../../src/cli.ts';
import { UsageError } from '../../../src/errors.ts';
import { type LoopFlags, loopOptions } from '../../../src/loop/command.ts';
import { DEFAULTS } from '../../../src/options/defaults.ts';
import {
  bytes,
  floatIn,
  grader,
  groupBy,
  int,
  intIn,
  jsonObject,
  keyValue,
  list,
  listOf,
  nonNegativeInt,
  oneOf,
  port,
  positiveInt,
  positiveIntOrAll,
  repeatable,
  seconds,
  shard,
  url,
  urlList,
} from '../../../src/options/parsers.ts';
import { flagsToOptions, TRAIN_DEFAULTS, TRAIN_FLAG_KEYS } from '../../../src/train/options.ts';
import { parseArgv, usageError } from '../../support/argv.ts';

describe('parsers', () => {
  const ok: Array<[string, (v: string) => unknown, string, unknown]> = [
    ['int', int, '-3', -3],
    ['positiveInt', positiveInt, '7', 7],
    ['nonNegativeInt', nonNegativeInt, '0', 0],
    ['intIn', intIn(14, 20), '17', 17],
    ['port', port, '0', 0],
    ['floatIn', floatIn(0, 1), '0.25', 0.25],
    ['floatIn open', floatIn(0, 1, { open: 'min' }), '1', 1],
    ['seconds', seconds, '1.5', 1500],
    ['bytes plain', bytes, '67108864', 67108864],
    ['bytes MiB', bytes, '64MiB', 64 * 1024 * 1024],
    ['bytes MB', bytes, '2MB', 2_000_000],
    ['bytes k', bytes, '512k', 512 * 1024],
    ['oneOf', oneOf(['a', 'b']), 'b', 'b'],
    ['jsonObject', jsonObject, '{"a":1}', { a: 1 }],
    ['url', url, 'https://h:1/v1', 'https://h:1/v1'],
    ['list', list, 'a, b,,c', ['a', 'b', 'c']],
    ['shard', shard, '2/4', { index: 2, count: 4 }],
    ['listOf', listOf(nonNegativeInt), '151645, 151643', [151645, 151643]],
    ['groupBy', groupBy, 'meta:prompt_id', 'meta:prompt_id'],
    ['positiveIntOrAll', positiveIntOrAll, 'all', 'all'],
    ['positiveIntOrAll', positiveIntOrAll, '3', 3],
    ['grader', grader, './verify.sh', { kind: 'verifier', command: './verify.sh' }],
  ];
  for (const [name, parse, value, expected] of ok) {
    test(`${name} ${value}`, () => assert.deepEqual(parse(value), expected));
  }
  const bad: Array<[string, (v: string) => unknown, string, RegExp]> = [
    ['int', int, '1.5', /expected an integer/],
    ['int', int, '', /expected an integer/],
    ['positiveInt', positiveInt, '0', /expected a positive integer/],
    ['positiveInt', positiveInt, '2x', /expected a positive integer/],
    ['nonNegativeInt', nonNegativeInt, '-1', /expected a non-negative integer/],
    ['intIn', intIn(14, 20), '21', /expected an integer from 14 to 20/],
    ['floatIn', floatIn(0, 1), '1.1', /expected a number in \[0, 1\]/],
    ['floatIn open', floatIn(0, 1, { open: 'min' }), '0', /expected a number in \(0, 1\]/],
    ['seconds', seconds, '0', /expected seconds > 0/],
    ['seconds', seconds, 'soon', /expected seconds > 0/],
    ['bytes', bytes, '1.5', /expected a byte count/],
    ['bytes', bytes, '12 parsecs', /expected a byte count/],
    ['oneOf', oneOf(['a', 'b']), 'c', /^is not one of a, b$/],
    ['jsonObject', jsonObject, '[1]', /expected a JSON object/],
    ['jsonObject', jsonObject, '{', /not valid JSON/],
    ['url', url, 'ftp://h', /expected an http\(s\) URL/],
    ['shard', shard, '5/4', /expected i\/n with 1 <= i <= n/],
    ['listOf', listOf(oneOf(['a', 'b'])), 'a,c', /^c is not one of a, b$/],
    ['listOf', listOf(nonNegativeInt), ' , ', /^expected a comma-separated list$/],
    ['groupBy', groupBy, 'meta:', /^is not task_id, none or meta:KEY$/],
    ['positiveIntOrAll', positiveIntOrAll, '0', /expected a positive integer or "all"/],
  ];
  for (const [name, parse, value, message] of bad) {
    test(`${name} refuses ${JSON.stringify(value)}`, () =>
      assert.throws(
        () => parse(value),
        (e: unknown) =>
          e instanceof CommanderError && e.code === 'commander.invalidArgument' && message.test(e.message),
      ));
  }
  test('urlList and repeatable accumulate repeated uses; urlList takes comma-separated lists', () => {
    const urls = urlList;
    assert.deepEqual(repeatable('b', repeatable('a')), ['a', 'b']);
    assert.deepEqual(urls('http://b/v1', urls('http://a/v1,http://c/v1')), [
      'http://a/v1',
      'http://c/v1',
      'http://b/v1',
    ]);
    assert.throws(() => urls('http://a/v1,ftp://x'), /ftp:\/\/x: expected an http\(s\) URL/);
  });
  test('keyValue accumulates', () => {
    assert.deepEqual(keyValue('b=2', keyValue('a=1')), { a: '1', b: '2' });
    assert.throws(() => keyValue('=x'), /expected key=value/);
  });
});

describe('argv -> typed flags', () => {
  const BACKEND = ['--backend-url', 'http://h/v1', '--model', 'm'];
  const cases: Array<[string[], Record<string, unknown>]> = [
    [
      ['eval', '--dataset', 'd.jsonl', '--agent', 'gold'],
      {
        dataset: 'd.jsonl',
        agent: 'gold',
        split: 'test',
        samples: 1,
        concurrency: 4,
        out: 'runs/eval',
        grader: { kind: 'polar' },
        runtime: 'sandbox',
        repos: undefined,
        memoryLimit: 8 * 1024 ** 3,
        pidsLimit: 1024,
        diskLimit: 4 * 1024 ** 3,
        agentTimeout: 1_800_000,
        testTimeout: 1_800_000,
        backendTimeout: 600_000,
        requireTokenIds: true,
      },
    ],
    [
      [
        'eval',
        '--dataset',
        'd.jsonl',
        '--agent',
        'gold',
        '--network-allow',
        '127.0.0.1:3141',
        '--network-allow',
        'mirror.local:80',
        '--memory-limit',
        '2GiB',
        '--pids-limit',
        '64',
        '--disk-limit',
        '512MiB',
        '--env-dir',
        'envs/a',
        '--env-dir',
        'envs/b,envs/c',
        '--cgroup-parent',
        '/sys/fs/cgroup/polar',
      ],
      {
        networkAllow: [
          { host: '127.0.0.1', port: 3141 },
          { host: 'mirror.local', port: 80 },
        ],
        memoryLimit: 2 * 1024 ** 3,
        pidsLimit: 64,
        diskLimit: 512 * 1024 ** 2,
        envDir: ['envs/a', 'envs/b', 'envs/c'],
        cgroupParent: '/sys/fs/cgroup/polar',
      },
    ],
    [
      [
        'eval',
        '--dataset',
        'd.jsonl',
        '--harness',
        'pi',
        '--samples',
        '3',
        '--instances',
        'a,b',
        '--limit',
        '2',
        '--shard',
        '1/2',
        '--fail-under',
        '0.5',
        '--agent-timeout',
        '60',
        ...BACKEND,
      ],
      {
        harness: 'pi',
        samples: 3,
        instances: ['a', 'b'],
        limit: 2,
        shard: { index: 1, count: 2 },
        failUnder: 0.5,
        agentTimeout: 60_000,
        // several servers may be given: a list (each sample uses the least loaded)
        backendUrl: ['http://h/v1'],
        model: 'm',
      },
    ],
    [
      [
        'loop',
        '--train-set',
        't.jsonl',
        '--harness',
        'pi',
        '--out',
        'run',
        '--eval-every',
        '0',
        '--lr',
        '0.05',
      ],
      {
        trainSet: 't.jsonl',
        harness: 'pi',
        out: 'run',
        groupSize: 16,
        tasksPerStep: 9,
        steps: 50,
        evalEvery: 0,
        concurrency: 4,
        device: undefined,
        lr: 0.05,
        agentTimeout: 1_800_000,
      },
    ],
    [
      ['gym', '--port', '0', '--max-rollouts', '2'],
      {
        harness: 'pi',
        port: 0,
        maxRollouts: 2,
        maxInflight: 64,
        out: 'runs/gym',
        host: '127.0.0.1',
        testTimeout: 1_800_000,
      },
    ],
    [
      ['serve', '--max-inflight', '4'],
      { port: 8100, maxInflight: 4, out: 'polar-captures', host: '127.0.0.1' },
    ],
    [
      ['inspect', 't.jsonl', '--max-trajectories', 'all'],
      { output: 'report.html', maxTokensPerTrace: 2000, maxTrajectories: 'all' },
    ],
    [['inspect', 't.jsonl', '--max-trajectories', '3'], { maxTrajectories: 3 }],
    [
      [
        'train',
        't.jsonl',
        '--out',
        'o',
        '--lr',
        '1e-5',
        '--gpus',
        '2',
        '--no-tis',
        '--loss-agg',
        'dr-grpo',
        '--seed',
        '0',
      ],
      { out: 'o', lr: 1e-5, gpus: 2, tis: false, lossAgg: 'dr-grpo', seed: 0 },
    ],
    [
      ['export', 'ckpt', '--onnx', 'dir', '--opset', '18', '--quantize', 'int8'],
      { onnx: 'dir', opset: 18, quantize: 'int8' },
    ],
  ];
  for (const [argv, expected] of cases) {
    test(argv.join(' '), () => {
      const { flags } = parseArgv(argv);
      for (const [key, value] of Object.entries(expected)) assert.deepEqual(flags[key], value, key);
    });
  }
  test('train leaves unset flags undefined (train.json and the defaults apply later)', () => {
    const { flags } = parseArgv(['train', 't.jsonl', '--out', 'o']);
    assert.equal(flags.lr, undefined);
    assert.equal(flags.device, undefined);
  });
  test('train: every option of the table has one flag, named after its key, parsed by its kind', () => {
    const train = program().commands.find((c) => c.name() === 'train')!;
    const names = new Set(train.options.map((o) => o.attributeName()));
    for (const key of TRAIN_FLAG_KEYS) {
      const camel = key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
      assert.ok(names.has(camel), `--${key.replaceAll('_', '-')}`);
    }
    // every flag with a value shows the default the worker falls back to (schema.json)
    const help = train.helpInformation().replace(/\s+/g, ' ');
    assert.match(help, /--advantage <kind> .*\(default: grpo\)/);
    assert.match(help, /--batch-rollouts <n> rollouts per step \(default: 144\)/);
    assert.equal(TRAIN_DEFAULTS.advantage, 'grpo');
    const { flags } = parseArgv(['train', 't', '--out', 'o', '--batch-rollouts', '8', '--advantage', 'rloo']);
    assert.deepEqual(
      Object.entries(flagsToOptions(flags)).filter(([, v]) => v !== undefined),
      [
        ['batch_rollouts', 8],
        ['advantage', 'rloo'],
      ],
    );
  });
  test("loop passes train's --device, --lora and --lr only when given (a --train-config then applies)", () => {
    const base = [
      'loop',
      '--train-set',
      't.jsonl',
      '--out',
      'run',
      '--harness',
      'pi',
      '--train-config',
      'c.json',
    ];
    const unset = loopOptions(parseArgv(base).flags as unknown as LoopFlags).trainFlags;
    assert.deepEqual(
      Object.entries(unset).filter(([, v]) => v !== undefined),
      [],
    );
    const given = loopOptions(
      parseArgv([...base, '--device', 'cpu', '--lora', '--lr', '0.5']).flags as unknown as LoopFlags,
    ).trainFlags;
    assert.deepEqual([given.device, given.lora, given.lr], ['cpu', true, 0.5]);
    assert.match(usageError([...base, '--device', 'tpu']) ?? '', /^--device tpu is not one of cuda, cpu$/);
  });
  test('loop --overdue: wait by default and left out of the options; drop needs --max-staleness >= 1', () => {
    const base = ['loop', '--train-set', 't.jsonl', '--out', 'run', '--harness', 'pi'];
    const options = (extra: string[]) =>
      loopOptions(parseArgv([...base, ...extra]).flags as unknown as LoopFlags);
    assert.equal(DEFAULTS.overdue.value, 'wait');
    assert.equal(parseArgv(base).flags.overdue, 'wait');
    // the default is not recorded: a run's config.json reads as before the flag
    assert.ok(!('overdue' in options(['--max-staleness', '1'])));
    assert.ok(!('overdue' in options(['--max-staleness', '1', '--overdue', 'wait'])));
    assert.equal(options(['--max-staleness', '1', '--overdue', 'drop']).overdue, 'drop');
    assert.throws(
      () => options(['--overdue', 'drop']),
      (e: unknown) => e instanceof UsageError && /--overdue drop without --max-staleness/.test(e.message),
    );
    assert.match(
      usageError([...base, '--overdue', 'skip']) ?? '',
      /^--overdue skip is not one of wait, drop/,
    );
  });
  test('loop --oversample: 0 by default and left out of the options; needs --overdue drop', () => {
    const base = ['loop', '--train-set', 't.jsonl', '--out', 'run', '--harness', 'pi'];
    const options = (extra: string[]) =>
      loopOptions(parseArgv([...base, ...extra]).flags as unknown as LoopFlags);
    assert.equal(DEFAULTS.oversample.value, 0);
    assert.ok(!('oversample' in options(['--max-staleness', '1', '--overdue', 'drop'])));
    assert.equal(options(['--max-staleness', '1', '--overdue', 'drop', '--oversample', '2']).oversample, 2);
    for (const extra of [['--max-staleness', '1'], []])
      assert.throws(
        () => options([...extra, '--oversample', '2']),
        (e: unknown) => e instanceof UsageError && /^--oversample 2 without --overdue drop/.test(e.message),
      );
    assert.match(usageError([...base, '--oversample', '-1']) ?? '', /^--oversample -1/);
  });
});

describe('usage errors name the flag', () => {
  const cases: Array<[string[], RegExp]> = [
    [['eval', '--dataset', 'd', '--samples', '0'], /^--samples 0: expected a positive integer$/],
    [
      ['eval', '--dataset', 'd', '--harness', 'cdex'],
      /^--harness cdex is not one of codex, claude, pi, qwen, gemini, opencode, generic$/,
    ],
    [
      ['eval', '--dataset', 'd', '--agent', 'golden'],
      /^--agent golden is not one of gold, empty, predictions, codex/,
    ],
    [['eval', '--dataset', 'd', '--fail-under', '2'], /^--fail-under 2: expected a fraction between 0 and 1/],
    [
      ['eval', '--dataset', 'd', '--grader', 'x'],
      /^--grader x is not polar, swebench, judge or a verifier command/,
    ],
    [
      ['eval', '--dataset', 'd', '--runtime', 'lxc'],
      /^--runtime lxc is not one of sandbox, local, docker, podman, apptainer$/,
    ],
    [['eval', '--dataset', 'd', '--test-timeout', '-5'], /^--test-timeout -5: expected seconds > 0$/],
    [['eval', '--dataset', 'd', '--network-allow', '3141'], /^--network-allow 3141: expected HOST:PORT/],
    [['eval', '--dataset', 'd', '--memory-limit', 'lots'], /^--memory-limit lots: expected a byte count/],
    [['eval', '--dataset', 'd', '--shard', '0/2'], /^--shard 0\/2: expected i\/n/],
    [['eval'], /^required option '--dataset <path\|hub-id>' not specified$/],
    [
      ['loop', '--train-set', 't', '--out', 'o', '--agent', 'pi', '--steps', 'x'],
      /^--steps x: expected a positive integer$/,
    ],
    [['gym', '--max-inflight', '0'], /^--max-inflight 0: expected a positive integer$/],
    [['serve', '--port', 'http'], /^--port http: expected an integer from 0 to 65535$/],
    [
      ['inspect', 't', '--max-tokens-per-trace', '0'],
      /^--max-tokens-per-trace 0: expected a positive integer$/,
    ],
    [
      ['inspect', 't', '--max-trajectories', 'some'],
      /^--max-trajectories some: expected a positive integer or "all"$/,
    ],
    [['train', 't', '--out', 'o', '--gpus', '1.5'], /^--gpus 1.5: expected a positive integer$/],
    [['train', 't', '--out', 'o', '--device', 'tpu'], /^--device tpu is not one of cuda, cpu$/],
    [['export', 'c', '--onnx', 'd', '--opset', '9'], /^--opset 9: expected an integer from 14 to 20$/],
    [['capture', '--bogus', '--', 'true'], /^unknown option '--bogus'$/],
  ];
  for (const [argv, message] of cases) {
    test(argv.join(' '), () => assert.match(usageError(argv) ?? '(parsed)', message));
  }
});

/** runs main with stderr captured (stdout belongs to the test runner's reporter) */
async function run(argv: string[]): Promise<{ code: number; stderr: string }> {
  const err: string[] = [];
  const saved = process.stderr.write;
  process.stderr.write = ((chunk: string) => err.push(String(chunk)) > 0) as typeof process.stderr.write;
  try {
    const code = await main(['node', 'polar', ...argv]);
    return { code, stderr: err.join('') };
  } finally {
    process.stderr.write = saved;
  }
}

describe('main', () => {
  test("commander's errors in polar's format, exit 2", async () => {
    const r = await run(['eval', '--dataset', 'd', '--samples', 'many']);
    assert.equal(r.code, 2);
    assert.match(
      r.stderr,
      /^polar: error: --samples many: expected a positive integer\n {2}run with --help for usage\n$/,
    );
    const unknown = await run(['evaluate']);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /^polar: error: unknown command 'evaluate'/);
  });
  test('a PolarError from a command: its message, its exit code, no stack', async () => {
    const r = await run(['eval', '--dataset', 'd.jsonl']);
    assert.equal(r.code, 2);
    assert.match(
      r.stderr,
      /polar: error: give --agent: a harness \(codex\|claude\|pi\|qwen\|gemini\|opencode\|generic\) or gold\|empty\|predictions/,
    );
    assert.doesNotMatch(r.stderr, /at .*\.ts:\d+/);
  });
  test('help and version exit 0; `polar` alone prints the help and is a usage error', () => {
    assert.equal(reportError(new CommanderError(0, 'commander.helpDisplayed', '(outputHelp)'), false), 0);
    assert.equal(reportError(new CommanderError(0, 'commander.version', '0.1.0'), false), 0);
    assert.equal(reportError(new CommanderError(1, 'commander.help', '(outputHelp)'), false), 2);
  });
  test('--help shows defaults as values, and the exit codes', () => {
    const root = program();
    // commander wraps at the terminal width: compare with the whitespace folded
    const help = (name: string) =>
      root.commands
        .find((c) => c.name() === name)!
        .helpInformation()
        .replace(/\s+/g, ' ');
    assert.match(
      help('eval'),
      /--agent-timeout <s> seconds before the harness is killed \(default: 1800 \(30 min\)\)/,
    );
    assert.match(help('capture'), /--max-body <bytes> largest request body accepted \(default: 64MiB\)/);
    assert.match(help('train'), /--lr <lr> learning rate \(default: 0\.000001\)/);
    assert.match(help('gym'), /--port <port> port to bind \(0: ephemeral\) \(default: 8200\)/);
    assert.doesNotMatch(help('capture'), /67108864/);
    assert.match(root.helpInformation() + '', /Usage: polar/);
    assert.equal(DEFAULTS.agentTimeoutMs.value, 30 * 60_000);
  });
});

describe('docs/cli.md tells the truth about the option layer', () => {
  const doc = readFileSync(new URL('../../../docs/cli.md', import.meta.url), 'utf8').replace(/\s+/g, ' ');
  test('the parser list names every parser of src/options/parsers.ts, and nothing else', async () => {
    const listed = /- The parsers: (.*?)\. Each throws/.exec(doc)?.[1] ?? '';
    const names = [...listed.matchAll(/`([A-Za-z]+)(?:\([^`]*\))?`/g)].map((m) => m[1]!);
    const parsers = await import('../../../src/options/parsers.ts');
    const exported = Object.entries(parsers)
      .filter(([, v]) => typeof v === 'function')
      .map(([k]) => k);
    assert.deepEqual([...new Set(names)].sort(), exported.sort());
  });
  test('the backend error example names every backend kind, as polar prints it', async () => {
    const { BACKEND_KINDS } = await import('../../../src/backends/index.ts');
    const example = `--backend nope is not one of ${BACKEND_KINDS.join(', ')}`;
    assert.ok(doc.includes(example), example);
    assert.equal(usageError(['eval', '--dataset', 'd', '--backend', 'nope']), example);
  });
});
