/**
 * A run folder reduced to what must not depend on where its samples ran: result lines without timings,
 * node names and absolute paths; the report without its time and overheads; the names of every capture,
 * patch and log, and the bytes of patches and predictions.
 */
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

export function readResultLines(dir: string): Record<string, unknown>[] {
  return readFileSync(join(dir, 'results.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Record<string, unknown>);
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
