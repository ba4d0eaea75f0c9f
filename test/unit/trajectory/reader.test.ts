import assert from 'node:assert/strict';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { InputError } from '../../../src/errors.ts';
import { readTrajectories } from '../../../src/trajectory/reader.ts';
import { tempDir } from '../../support/temp.ts';
import { buildFrom, call, EOT, grading, ids, session, sessionEnd } from './builder.ts';

async function withFile(text: string, fn: (file: string) => Promise<void>): Promise<void> {
  const dir = tempDir('polar-traj-read-');
  try {
    const file = join(dir, 't.jsonl');
    await writeFile(file, text);
    await fn(file);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function readAll(file: string, skipInvalid = false): Promise<string[]> {
  const out: string[] = [];
  for await (const t of readTrajectories(file, { skipInvalid })) out.push(t.record.id);
  return out;
}

/** what polar build writes for one graded session */
async function builtRecords(): Promise<Record<string, unknown>[]> {
  const { out } = await buildFrom([
    session('s'),
    call('s', { prompt: ids(1, 4), completion: [9, EOT] }),
    sessionEnd('s'),
    grading('s', 1),
  ]);
  return out as Record<string, unknown>[];
}

describe('readTrajectories', () => {
  it('reads what polar build writes, and names file:line and field of a bad record', async () => {
    const out = await builtRecords();
    const good = JSON.stringify(out[0]);
    const broken = structuredClone(out[0]) as { traces: { loss_mask: number[] }[] };
    broken.traces[0]!.loss_mask.pop();
    await withFile(`${good}\n${JSON.stringify(broken)}\n`, async (file) => {
      await assert.rejects(readAll(file), (e: InputError) => {
        assert.ok(e instanceof InputError);
        assert.equal(e.line, 2);
        assert.equal(e.field, 'traces[0].loss_mask');
        return true;
      });
      assert.deepEqual(await readAll(file, true), ['s']);
    });
    await withFile(`${JSON.stringify({ ...out[0], v: 3 })}\n`, async (file) => {
      await assert.rejects(readAll(file), /version 3 is not supported \(this polar reads versions 1 and 2\)/);
    });
  });

  it('reads trajectory v1 records of older builds (with their advantage); v1 without it is refused', async () => {
    const out = await builtRecords();
    const v1 = { ...out[0], v: 1, advantage: 0.5 };
    await withFile(`${JSON.stringify(v1)}\n${JSON.stringify({ ...out[0], v: 1 })}\n`, async (file) => {
      assert.deepEqual(await readAll(file, true), ['s']);
      await assert.rejects(readAll(file), (e: InputError) => e.line === 2 && e.field === 'advantage');
    });
  });
});
