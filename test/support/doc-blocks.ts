/**
 * The fenced code blocks of README.md and docs/*.md, as the tests read them: test/unit/cli/docs-commands
 * parses every `polar ...` line of every block with the real CLI parser, and a block marked runnable is
 * run as written by the test its marker names. The marker is an HTML comment on the line right before
 * the block's opening fence (markdown shows nothing of it):
 *
 *     <!-- run by test/e2e/readme-main-job.test.ts -->
 *
 * That test reads the block with `runnableBlocks('README.md', import.meta.url)`, so the lines it runs
 * are the lines the docs show; docs-commands.test.ts checks that every marker names a test that does.
 */
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ROOT } from './cli.ts';

export interface DocBlock {
  /** the markdown file, relative to the repository root */
  file: string;
  /** the 1-based line of the block's first line (after the fence) */
  line: number;
  /** the block's lines as written */
  lines: string[];
  /** the test file (relative to the root) its `<!-- run by ... -->` marker names */
  runBy?: string;
}

/** A `run by` marker: `<!-- run by test/e2e/x.test.ts -->`. */
export const RUN_BY = /^<!--\s*run by\s+(\S+)\s*-->\s*$/;

/** The fenced blocks of `file` (relative to the root), each with its marker when it has one. */
export function docBlocks(file: string, text = readFileSync(join(ROOT, file), 'utf8')): DocBlock[] {
  const lines = text.split('\n');
  const out: DocBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const fence = /^\s*(```|~~~)/.exec(lines[i] ?? '');
    if (!fence) continue;
    const start = i;
    const body: string[] = [];
    while (++i < lines.length && !(lines[i] ?? '').trimStart().startsWith(fence[1] ?? '```'))
      body.push(lines[i] ?? '');
    const runBy = RUN_BY.exec(lines[start - 1] ?? '')?.[1];
    out.push({ file, line: start + 2, lines: body, ...(runBy ? { runBy } : {}) });
  }
  return out;
}

/** Markers that stand anywhere but right before a block's fence (a marker that marks nothing). */
export function strayMarkers(file: string, text = readFileSync(join(ROOT, file), 'utf8')): number[] {
  const lines = text.split('\n');
  return lines.flatMap((l, i) =>
    RUN_BY.test(l) && !/^\s*(```|~~~)/.test(lines[i + 1] ?? '') ? [i + 1] : [],
  );
}

/** A block's commands: a line ending in `\` joined with the next, blank lines and comment lines left out. */
export function commandsOf(block: DocBlock): string[] {
  const out: string[] = [];
  let pending = '';
  for (const line of block.lines) {
    if (/\\\s*$/.test(line)) {
      pending += `${line.replace(/\s*\\\s*$/, '')} `;
      continue;
    }
    const whole = `${pending}${pending ? line.trim() : line}`;
    pending = '';
    if (whole.trim() && !whole.trim().startsWith('#')) out.push(whole.trim());
  }
  return out;
}

/**
 * The commands of the blocks of `doc` marked as run by the calling test (`testUrl`: its import.meta.url),
 * in order, one list per block. A test that asks and finds none fails: its marker was dropped.
 */
export function runnableBlocks(doc: string, testUrl: string): string[][] {
  const me = relative(ROOT, fileURLToPath(testUrl));
  const blocks = docBlocks(doc).filter((b) => b.runBy === me);
  if (!blocks.length) throw new Error(`${doc} marks no block "<!-- run by ${me} -->"`);
  return blocks.map(commandsOf);
}
