/** A task of the mini SWE benchmark (fixtures/swe/mini.jsonl), with its fixture repositories made first. */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ensureFixtureRepos } from '../../scripts/swe-fixtures.ts';
import { ROOT } from './cli.ts';

export async function fixtureTask(id: string): Promise<Record<string, unknown>> {
  ensureFixtureRepos();
  const rows = (await readFile(join(ROOT, 'fixtures/swe/mini.jsonl'), 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const row = rows.find((r) => r.instance_id === id);
  if (!row) throw new Error(`${id} is not a task of fixtures/swe/mini.jsonl`);
  return row;
}
