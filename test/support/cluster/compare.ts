/**
 * A run folder reduced to what must not depend on where its samples ran: result lines without timings,
 * node names and absolute paths; the report without its time and overheads; the names of every capture,
 * patch and log, and the bytes of patches and predictions. And what the cluster tests share to read result
 * lines and check them after a node was lost.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';

export interface RunView {
  results: Record<string, unknown>[];
  report: Record<string, unknown>;
  files: Record<string, string[]>;
  patches: Record<string, string>;
  predictions: string;
  gradings: Record<string, unknown>[];
}

/** A file's lines that hold more than white space. */
export function nonEmptyLines(file: string): string[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim());
}

export function readResultLines(dir: string): Record<string, unknown>[] {
  return nonEmptyLines(join(dir, 'results.jsonl')).map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** After a node was lost mid-run: each of `count` samples has one line, and none is scored as an error. */
export function assertEachSampleOnce(lines: Record<string, unknown>[], count: number): void {
  const keys = lines.map((l) => `${l.instance_id}/${l.sample}`);
  assert.equal(new Set(keys).size, keys.length, 'no sample twice');
  assert.equal(keys.length, count, 'no sample lost');
  assert.ok(
    lines.every((l) => l.status !== 'error'),
    'an infrastructure loss is never a score',
  );
}

export function runView(dir: string): RunView {
  const results = readResultLines(dir)
    .map(
      ({ durations_ms: _d, finished_at: _f, cluster: _c, ...rest }): Record<string, unknown> => ({
        ...rest,
        capture: typeof rest.capture === 'string' ? basename(rest.capture) : rest.capture,
        patch_file: typeof rest.patch_file === 'string' ? basename(rest.patch_file) : rest.patch_file,
      }),
    )
    .sort((a, b) => `${a.instance_id}/${a.sample}`.localeCompare(`${b.instance_id}/${b.sample}`));
  const {
    created_at: _c,
    overhead_ms: _o,
    ...report
  } = JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')) as Record<string, unknown>;
  const list = (sub: string) => (existsSync(join(dir, sub)) ? readdirSync(join(dir, sub)).sort() : []);
  const patches = Object.fromEntries(
    list('patches').map((n) => [n, readFileSync(join(dir, 'patches', n), 'utf8')]),
  );
  const gradings: Record<string, unknown>[] = [];
  for (const name of list('captures').filter((n) => n.endsWith('.jsonl'))) {
    for (const line of readFileSync(join(dir, 'captures', name), 'utf8').split('\n')) {
      if (!line.includes('"grading"')) continue;
      const { graded_at: _g, session: _s, ...grading } = JSON.parse(line) as Record<string, unknown>;
      gradings.push({ file: name, ...grading });
    }
  }
  return {
    results,
    report,
    files: { captures: list('captures'), patches: list('patches'), logs: list('logs') },
    patches,
    predictions: readFileSync(join(dir, 'predictions.jsonl'), 'utf8'),
    gradings,
  };
}
