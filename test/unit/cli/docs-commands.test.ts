/**
 * Every `polar ...` command line in README.md and docs/*.md names flags the command really has (issue 31
 * item 15): the lines are read from the fenced code blocks (a line ending in `\` joins the next; `|`,
 * `&&` and `;` start a new command), looked up in the commander program that src/cli.ts builds (no
 * command runs), and checked: an unknown flag, a deprecated one (a hidden option whose description starts
 * "deprecated") or a value the flag's own parser refuses fails with the file and line. Values with a
 * placeholder (`$X`, `<x>`, `...`, `{x}`, a name in capitals) are not parsed; the words after `--` are the harness's.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Command, Option } from 'commander';
import { program } from '../../../src/cli.ts';
import { ROOT } from '../../support/cli.ts';

interface Line {
  file: string;
  line: number;
  text: string;
}

/** The command lines in a markdown file's fenced code blocks that start `polar` (or `npx polar`). */
function commandLines(file: string): Line[] {
  const out: Line[] = [];
  const lines = readFileSync(join(ROOT, file), 'utf8').split('\n');
  let inBlock = false;
  for (let i = 0; i < lines.length; i++) {
    if (/^\s*(```|~~~)/.test(lines[i] ?? '')) {
      inBlock = !inBlock;
      continue;
    }
    if (!inBlock) continue;
    const start = i;
    let text = lines[i] ?? '';
    while (/\\\s*$/.test(text) && i + 1 < lines.length) text = `${text.replace(/\\\s*$/, ' ')}${lines[++i]}`;
    text = text.replace(/(^|\s)#\s.*$/, ''); // a shell comment
    for (const part of text.split(/\s*(?:\|\||&&|\||;)\s*/)) {
      const words = part.trim().replace(/^(?:\S+=\S+\s+)*/, ''); // VAR=value before the command
      if (/^(?:npx\s+)?polar\s/.test(words)) out.push({ file, line: start + 1, text: words });
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
