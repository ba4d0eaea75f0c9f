/**
 * Every `polar ...` command line in README.md and docs/*.md names flags the command really has (issue 31
 * item 15): the lines are read from the fenced code blocks (a line ending in `\` joins the next; `|`,
 * `&&` and `;` start a new command), looked up in the commander program that src/cli.ts builds (no
 * command runs), and checked: an unknown flag, a deprecated one (a hidden option whose description starts
 * "deprecated") or a value the flag's own parser refuses fails with the file and line. Values with a
 * placeholder (`$X`, `<x>`, `...`, `{x}`, a name in capitals) are not parsed; the words after `--` are the harness's.
 * A block marked `<!-- run by TEST -->` (test/support/doc-blocks.ts) is run as written by TEST: the marker
 * names a test file of the suite that reads that document's marked blocks (runnableBlocks), so a documented
 * command that stops working fails CI (issue 47 item 6).
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Command, Option } from 'commander';
import { execa } from 'execa';
import { program } from '../../../src/cli.ts';
import { POLAR_VERSION } from '../../../src/version.ts';
import { ROOT } from '../../support/cli.ts';
import { commandsOf, docBlocks, strayMarkers } from '../../support/doc-blocks.ts';
import { tempDir } from '../../support/temp.ts';

interface Line {
  file: string;
  line: number;
  text: string;
}

/** The command lines in a markdown file's fenced code blocks that start `polar` (or `npx polar`). */
function commandLines(file: string): Line[] {
  const out: Line[] = [];
  for (const block of docBlocks(file)) {
    for (let i = 0; i < block.lines.length; i++) {
      const start = i;
      let text = block.lines[i] ?? '';
      while (/\\\s*$/.test(text) && i + 1 < block.lines.length)
        text = `${text.replace(/\\\s*$/, ' ')}${block.lines[++i]}`;
      text = text.replace(/(^|\s)#\s.*$/, ''); // a shell comment
      for (const part of text.split(/\s*(?:\|\||&&|\||;)\s*/)) {
        const words = part.trim().replace(/^(?:\S+=\S+\s+)*/, ''); // VAR=value before the command
        if (/^(?:npx\s+)?polar\s/.test(words)) out.push({ file, line: block.line + start, text: words });
      }
    }
  }
  return out;
}

/** Shell-like words: quotes group (and are removed), nothing is expanded. */
function words(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g)) out.push(m[1] ?? m[2] ?? m[3] ?? '');
  return out;
}

const placeholder = (v: string) => /[$<>{}]|\.\.\./.test(v);
/** a value written as a name in capitals (`T`, `MODEL`, `http://NODE:PORT/v1`): not parsed */
const namedValue = (v: string) => /(^|[^A-Za-z0-9])[A-Z][A-Z_]*($|[^A-Za-z0-9])/.test(v);

function findOption(cmds: Command[], flag: string): Option | undefined {
  for (const c of cmds) {
    const o = c.options.find((opt) => opt.long === flag || opt.short === flag);
    if (o) return o;
  }
  return undefined;
}

/** The problems of one command line (empty when it is right). */
function check(root: Command, l: Line): string[] {
  const argv = words(l.text);
  if (argv[0] === 'npx') argv.shift();
  argv.shift(); // polar
  const problems: string[] = [];
  const chain: Command[] = [root];
  // the subcommand (and its own subcommands: polar env build)
  while (argv.length && !argv[0]?.startsWith('-')) {
    const sub = chain[chain.length - 1]?.commands.find(
      (c) => c.name() === argv[0] || c.aliases().includes(argv[0] ?? ''),
    );
    if (!sub) break;
    chain.push(sub);
    argv.shift();
  }
  const scope = [...chain].reverse();
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i] ?? '';
    if (word === '--') break; // the harness's own words
    if (!word.startsWith('-') || word === '-' || placeholder(word) || /^-\d/.test(word)) continue;
    const [flag, inline] = word.includes('=')
      ? [word.slice(0, word.indexOf('=')), word.slice(word.indexOf('=') + 1)]
      : [word, undefined];
    if (flag === '--help' || flag === '-h') continue;
    const option = findOption(scope, flag ?? '');
    if (!option) {
      problems.push(
        `${l.file}:${l.line}: ${flag} is not a flag of \`polar ${chain
          .slice(1)
          .map((c) => c.name())
          .join(' ')}\`: ${l.text}`,
      );
      continue;
    }
    if (option.hidden && /^deprecated/.test(option.description))
      problems.push(`${l.file}:${l.line}: ${flag} is deprecated (${option.description}): ${l.text}`);
    if (!(option.required || option.optional)) continue;
    const value =
      inline ?? (option.required || !(argv[i + 1] ?? '-').startsWith('-') ? argv[++i] : undefined);
    if (value === undefined || placeholder(value) || namedValue(value) || !option.parseArg) continue;
    try {
      option.parseArg(value, option.defaultValue as never);
    } catch (error) {
      problems.push(`${l.file}:${l.line}: ${flag} ${value}: ${(error as Error).message}: ${l.text}`);
    }
  }
  return problems;
}

/** test/tiers.mjs (untyped JavaScript): the tiers' files and folders */
const { TIERS } = (await import(join(ROOT, 'test/tiers.mjs'))) as {
  TIERS: Record<string, { files: string[] }>;
};

const files = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`),
];

test('every polar command line in README.md and docs/ names flags its command has, none deprecated, values its parsers take', () => {
  const root = program();
  const lines = files.flatMap(commandLines);
  // the docs show many commands: an extractor that finds none would pass everything
  assert.ok(lines.length >= 50, `only ${lines.length} command lines found in ${files.length} files`);
  const problems = lines.flatMap((l) => check(root, l));
  assert.deepEqual(problems, []);
});

test('the check catches an unknown flag, a deprecated flag and a refused value, with file and line', () => {
  const root = program();
  const line = (text: string): Line => ({ file: 'x.md', line: 7, text });
  assert.match(
    check(root, line('polar build caps/ --no-such-flag'))[0] ?? '',
    /^x\.md:7: --no-such-flag is not a flag of `polar build`/,
  );
  assert.match(check(root, line('polar export ckpt --onnx out/'))[0] ?? '', /--onnx is deprecated/);
  assert.match(check(root, line('polar eval --agent gld --dataset d.jsonl'))[0] ?? '', /--agent gld/);
  assert.deepEqual(check(root, line('polar eval --agent $AGENT --out runs/x -- codex --foo')), []);
  assert.deepEqual(commandLines('README.md').length > 0, true);
});

/** The marked blocks of every document: [document, block] */
const marked = () => files.flatMap((f) => docBlocks(f).flatMap((b) => (b.runBy ? [[f, b] as const] : [])));

test("every block marked runnable names a test of the suite that runs that document's marked blocks", () => {
  const blocks = marked();
  // README's main job is run as written (test/e2e/readme-main-job.test.ts): a checker that finds no marker passes nothing
  assert.ok(blocks.length >= 2, `${blocks.length} marked blocks`);
  const tiers = Object.values(TIERS).flatMap((t) => t.files);
  for (const [doc, block] of blocks) {
    const where = `${doc}:${block.line - 1}: run by ${block.runBy}`;
    const test = join(ROOT, block.runBy ?? '');
    assert.ok(existsSync(test), `${where}: no such test file`);
    assert.match(block.runBy ?? '', /^test\/.*\.test\.ts$/, `${where}: not a test file`);
    // a test file no tier names is in the unit tier, which runs every file under test/unit/
    assert.ok(
      block.runBy?.startsWith('test/unit/') || tiers.some((t) => block.runBy?.startsWith(t)),
      `${where}: in no tier of test/tiers.mjs`,
    );
    const source = readFileSync(test, 'utf8');
    assert.match(
      source,
      new RegExp(`runnableBlocks\\(\\s*'${doc.replace(/[.]/g, '\\.')}'\\s*,\\s*import\\.meta\\.url`),
      `${where}: the test does not read ${doc}'s marked blocks (runnableBlocks('${doc}', import.meta.url))`,
    );
    assert.ok(commandsOf(block).length > 0, `${where}: the block has no command`);
  }
});

test('a run-by marker stands right before a block (one elsewhere marks nothing)', () => {
  for (const f of files) assert.deepEqual(strayMarkers(f), [], `${f}: markers not before a fence`);
  const doc =
    'text\n<!-- run by test/e2e/x.test.ts -->\n```\nnpx polar --help\n```\n<!-- run by test/e2e/y.test.ts -->\n\nprose\n';
  assert.deepEqual(strayMarkers('x.md', doc), [6]);
  const [block] = docBlocks('x.md', doc);
  assert.equal(block?.runBy, 'test/e2e/x.test.ts');
  assert.equal(block?.line, 4);
  assert.deepEqual(commandsOf({ file: 'x.md', line: 1, lines: ['a \\', '  b', '# c', '', 'd'] }), [
    'a b',
    'd',
  ]);
});

test("the README says how `polar` runs in a clone (npx polar, npm link), and npx runs the clone's bin/polar offline", async () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const firstSection = readme.slice(0, readme.indexOf('\n## '));
  assert.match(firstSection, /`npx polar \.\.\.`/);
  assert.match(firstSection, /`npm link`/);
  const home = tempDir('polar-npx-home-');
  const r = await execa('npx', ['--offline', 'polar', '--version'], {
    cwd: ROOT,
    env: { HOME: home, npm_config_cache: join(home, 'npm'), npm_config_update_notifier: 'false' },
    reject: false,
  });
  assert.equal(r.exitCode, 0, r.stderr);
  assert.equal(r.stdout.trim(), POLAR_VERSION);
});

/** `--flag` in an inline code span of prose (outside the fenced blocks), with the file's line. */
function proseFlags(
  file: string,
  text = readFileSync(join(ROOT, file), 'utf8'),
): Array<[number, string, string]> {
  const out: Array<[number, string, string]> = [];
  let inBlock = false;
  text.split('\n').forEach((line, i) => {
    if (/^\s*(```|~~~)/.test(line)) inBlock = !inBlock;
    else if (!inBlock)
      for (const span of line.matchAll(/`([^`]+)`/g))
        for (const flag of (span[1] ?? '').matchAll(/(?:^|\s)(--[a-z][\w-]*)/g))
          out.push([i + 1, flag[1] ?? '', line]);
  });
  return out;
}

test("a command's own page names none of its deprecated flags but as an old name (docs/serve.md said --captures)", () => {
  const root = program();
  const problems: string[] = [];
  for (const cmd of root.commands) {
    const page = `docs/${cmd.name()}.md`;
    if (!files.includes(page)) continue;
    const old = cmd.options.filter((o) => o.hidden && /^deprecated/.test(o.description)).map((o) => o.long);
    for (const [line, flag, text] of proseFlags(page))
      if (old.includes(flag) && !/old name|deprecated|still works/.test(text))
        problems.push(`${page}:${line}: ${flag} is deprecated in polar ${cmd.name()}: ${text.trim()}`);
  }
  assert.deepEqual(problems, []);
  assert.deepEqual(proseFlags('x.md', 'a `--out DIR` and `polar serve --captures x`\n```\n--no\n```\n'), [
    [1, '--out', 'a `--out DIR` and `polar serve --captures x`'],
    [1, '--captures', 'a `--out DIR` and `polar serve --captures x`'],
  ]);
});
