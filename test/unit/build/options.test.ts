/**
 * polar build's flags: parsed once by commander with src/options/parsers.ts (errors in polar's one
 * format), defaults from DEFAULTS, the rules between flags in buildRun, the deprecated names.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type BuildFlags, buildRun } from '../../../src/build/command.ts';
import { program } from '../../../src/cli.ts';
import { UsageError } from '../../../src/errors.ts';
import { DEFAULTS } from '../../../src/options/defaults.ts';
import { parseArgv, usageError } from '../../support/argv.ts';

const flags = (argv: string[]): BuildFlags => parseArgv(['build', ...argv]).flags as unknown as BuildFlags;

describe('polar build options', () => {
  it('defaults come from DEFAULTS, already typed', () => {
    const o = buildRun(['a.jsonl'], flags(['a.jsonl']));
    assert.equal(o.format, 'polar');
    assert.equal(o.groupBy, 'task_id');
    assert.deepEqual(o.eotIds, [151645, 151643]);
    assert.equal(o.eotIds, DEFAULTS.eotIds.value);
    assert.equal(o.maxTokens, null);
    assert.equal(o.maxTokensMode, 'truncate');
    assert.equal(o.overlong, DEFAULTS.overlong.value);
    assert.equal(o.overlongBuffer, DEFAULTS.overlongBuffer.value);
    assert.equal(o.outputFile, undefined);
    assert.equal(o.reportOnly, false);
    assert.deepEqual(o.excludeKinds, []);
  });

  it('parses lists and numbers once, at the flag', () => {
    const f = flags([
      '-',
      '--eot-id',
      '7, 9',
      '--exclude-kind',
      'compaction,side',
      '--max-trace-tokens',
      '32768',
      '--over-max-trace-tokens',
      'drop',
      '--overlong',
      'penalty',
      '--overlong-buffer',
      '512',
      '--group-by',
      'meta:prompt',
      '--format',
      'verl',
    ]);
    assert.deepEqual(f.eotId, [7, 9]);
    assert.deepEqual(f.excludeKind, ['compaction', 'side']);
    assert.equal(f.maxTraceTokens, 32768);
    const o = buildRun(['-'], f);
    assert.deepEqual(o.eotIds, [7, 9]);
    assert.deepEqual(o.excludeKinds, ['compaction', 'side']);
    assert.equal(o.maxTokens, 32768);
    assert.equal(o.maxTokensMode, 'drop');
    assert.equal(o.overlong, 'penalty');
    assert.equal(o.overlongBuffer, 512);
    assert.equal(o.groupBy, 'meta:prompt');
    assert.equal(o.format, 'verl');
  });

  const bad: [string, string[], RegExp][] = [
    ['unknown format', ['--format', 'csv'], /^--format csv is not one of polar, verl$/],
    [
      'bad max tokens',
      ['--max-trace-tokens', '1.5'],
      /^--max-trace-tokens 1.5: expected a positive integer$/,
    ],
    ['bad old max tokens', ['--max-tokens', '0'], /^--max-tokens 0: expected a positive integer$/],
    ['bad overlong', ['--overlong', 'skip'], /^--overlong skip is not one of mask, penalty, keep$/],
    [
      'bad over-max-trace-tokens',
      ['--over-max-trace-tokens', 'mask'],
      /^--over-max-trace-tokens mask is not one of truncate, drop$/,
    ],
    ['bad overlong buffer', ['--overlong-buffer', '0'], /^--overlong-buffer 0: expected a positive integer$/],
    [
      'unknown kind',
      ['--exclude-kind', 'root,tool'],
      /^--exclude-kind root,tool: tool is not one of root, compaction, subagent, divergence, side$/,
    ],
    ['bad eot', ['--eot-id', 'im_end'], /^--eot-id im_end: im_end: expected a non-negative integer$/],
    ['empty eot', ['--eot-id', ','], /^--eot-id ,: expected a comma-separated list$/],
    ['bad group', ['--group-by', 'model'], /^--group-by model is not task_id, none or meta:KEY$/],
    ['old --advantage, unknown kind', ['--advantage', 'ppo'], /^--advantage ppo is not one of grpo/],
  ];
  for (const [name, argv, message] of bad) {
    it(`refuses ${name} in polar's one format`, () => {
      assert.match(usageError(['build', 'a', ...argv]) ?? '(parsed)', message);
    });
  }

  const rules: [string, string[], BuildFlags, RegExp][] = [
    ['no inputs', [], flags(['a']), /at least one input/],
    ['stdin twice', ['-', '-'], flags(['-']), /once/],
    ['stats with -o', ['a'], flags(['a', '--stats', '-o', 'x']), /--stats writes no trajectories/],
    ['json without -o', ['a'], flags(['a', '--json']), /--json prints the report on stdout/],
    [
      'both names, two values',
      ['a'],
      flags(['a', '--max-trace-tokens', '5', '--max-tokens', '6']),
      /--max-tokens is the old name of --max-trace-tokens/,
    ],
    [
      'the old --overlong truncate against --over-max-trace-tokens drop',
      ['a'],
      flags(['a', '--overlong', 'truncate', '--over-max-trace-tokens', 'drop']),
      /--overlong truncate is the old name of --over-max-trace-tokens truncate: give one of them/,
    ],
  ];
  for (const [name, inputs, f, message] of rules) {
    it(`rejects ${name}`, () => {
      assert.throws(
        () => buildRun(inputs, f),
        (e: unknown) => e instanceof UsageError && message.test(e.message),
      );
    });
  }

  it('deprecated names still work, with a warning: --max-tokens, --advantage (polar train computes advantages)', () => {
    const warnings: string[] = [];
    const o = buildRun(['a'], flags(['a', '--max-tokens', '64', '--advantage', 'rloo']), (m) =>
      warnings.push(m),
    );
    assert.equal(o.maxTokens, 64);
    assert.equal('advantage' in o, false);
    assert.equal(warnings.length, 2);
    assert.match(warnings.join('\n'), /--max-tokens is now --max-trace-tokens/);
    assert.match(
      warnings.join('\n'),
      /--advantage is ignored: polar train computes .*polar train --advantage rloo/,
    );
  });

  it("build's old --overlong truncate|drop is --over-max-trace-tokens now, with a warning", () => {
    const warnings: string[] = [];
    const o = buildRun(['a'], flags(['a', '--overlong', 'drop']), (m) => warnings.push(m));
    assert.equal(o.maxTokensMode, 'drop');
    assert.equal(o.overlong, DEFAULTS.overlong.value);
    assert.match(warnings.join('\n'), /--overlong drop is now --over-max-trace-tokens drop/);
  });

  it('--help shows the defaults as a user types them, unquoted', () => {
    const help = program()
      .commands.find((c) => c.name() === 'build')!
      .helpInformation()
      .replace(/\s+/g, ' ');
    assert.match(help, /\(default: polar\)/);
    assert.match(help, /\(default: task_id\)/);
    assert.match(help, /\(default: truncate\)/);
    assert.match(help, /--overlong <mode> .*\(default: mask\)/);
    assert.match(help, /\(default: 151645,151643\)/);
    assert.doesNotMatch(help, /default: "/);
    assert.doesNotMatch(help, /--advantage/);
  });
});
