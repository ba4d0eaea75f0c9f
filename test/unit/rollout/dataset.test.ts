import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { InputError } from '../../../src/errors.ts';
import {
  isHubId,
  loadDataset,
  loadHubDataset,
  parseShard,
  selectInstances,
} from '../../../src/rollout/dataset.ts';
import { tempDir } from '../../support/temp.ts';
import { MINI, miniRows } from './run/helpers.ts';

const dir = tempDir('polar-ds-');

function writeParquet(path: string, rows: Array<Record<string, unknown>>): Buffer {
  const names = Object.keys(rows[0]!);
  const buffer = Buffer.from(
    parquetWriteBuffer({
      columnData: names.map((name) => ({
        name,
        data: rows.map((r) => String(r[name] ?? '')),
        type: 'STRING' as const,
      })),
    }),
  );
  writeFileSync(path, buffer);
  return buffer;
}

test('jsonl: 8 instances, FAIL_TO_PASS / PASS_TO_PASS decoded from JSON strings', async () => {
  const rows = await loadDataset(MINI);
  assert.equal(rows.length, 8);
  const first = rows[0]!;
  assert.ok(Array.isArray(first.FAIL_TO_PASS));
  assert.deepEqual(first.FAIL_TO_PASS, JSON.parse(String(miniRows()[0]!.FAIL_TO_PASS)));
  assert.equal(first.test_cmd, 'python3 -m pytest -rA -p no:cacheprovider');
});

test('json array and parquet load to the same instances as jsonl', async () => {
  const raw = miniRows();
  const jsonPath = join(dir, 'mini.json');
  writeFileSync(jsonPath, JSON.stringify(raw));
  const parquetPath = join(dir, 'mini.parquet');
  writeParquet(parquetPath, raw);
  const a = await loadDataset(MINI);
  assert.deepEqual(await loadDataset(jsonPath), a);
  assert.deepEqual(await loadDataset(parquetPath), a);
});

test('schema errors name the file, row, instance and field', async () => {
  const raw = miniRows();
  const bad = [{ ...raw[0] }, { ...raw[1], FAIL_TO_PASS: '[not json' }];
  const path = join(dir, 'bad.jsonl');
  writeFileSync(path, bad.map((r) => JSON.stringify(r)).join('\n'));
  await assert.rejects(loadDataset(path), (e: unknown) => {
    assert.ok(e instanceof InputError);
    assert.equal(e.field, 'FAIL_TO_PASS');
    assert.equal(e.line, 2);
    assert.match(e.message, /polar-fixtures__textkit-2/);
    return true;
  });
  const missing = { ...raw[0] } as Record<string, unknown>;
  delete missing.base_commit;
  writeFileSync(path, JSON.stringify(missing));
  await assert.rejects(loadDataset(path), /base_commit: instance polar-fixtures__textkit-1/);
});

test('--instances, --shard i/n (round robin, disjoint, covering) and --limit', async () => {
  const all = await loadDataset(MINI);
  const ids = all.map((i) => i.instance_id);
  const shards = [1, 2, 3].map((i) =>
    selectInstances(all, { shard: parseShard(`${i}/3`) }).map((x) => x.instance_id),
  );
  assert.deepEqual(shards.flat().sort(), [...ids].sort());
  assert.equal(new Set(shards.flat()).size, ids.length);
  assert.deepEqual(
    selectInstances(all, { instances: [ids[3]!, ids[1]!] }).map((x) => x.instance_id),
    [ids[1], ids[3]],
  );
  assert.equal(selectInstances(all, { limit: 2 }).length, 2);
  assert.throws(() => selectInstances(all, { instances: ['nope__x-1'] }), /nope__x-1/);
  assert.throws(() => parseShard('4/3'), /--shard/);
});

test('hub id goes through the datasets-server listing and a parquet download (local server, cached)', async () => {
  const raw = miniRows();
  const body = writeParquet(join(dir, 'hub.parquet'), raw);
  const seen: string[] = [];
  const server = createServer((req, res) => {
    seen.push(req.url ?? '');
    const port = (server.address() as AddressInfo).port;
    if (req.url?.startsWith('/parquet?dataset=')) {
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          parquet_files: [
            {
              dataset: 'polar/mini',
              config: 'default',
              split: 'test',
              url: `http://127.0.0.1:${port}/files/test-0.parquet`,
              filename: '0000.parquet',
            },
            {
              dataset: 'polar/mini',
              config: 'default',
              split: 'train',
              url: `http://127.0.0.1:${port}/missing`,
              filename: 'x.parquet',
            },
          ],
        }),
      );
    } else if (req.url === '/files/test-0.parquet') {
      res.end(body);
    } else {
      res.statusCode = 404;
      res.end();
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const cacheDir = join(dir, 'cache');
    assert.ok(isHubId('polar/mini'));
    const rows = await loadHubDataset('polar/mini', { endpoint, cacheDir });
    assert.deepEqual(rows, await loadDataset(MINI));
    assert.deepEqual(seen, ['/parquet?dataset=polar%2Fmini', '/files/test-0.parquet']);
    await loadHubDataset('polar/mini', { endpoint, cacheDir });
    assert.equal(seen.filter((u) => u.startsWith('/files')).length, 1, 'second load reads the cache');
    await assert.rejects(
      loadHubDataset('polar/mini', { endpoint, cacheDir, split: 'dev' }),
      /no split "dev"/,
    );
  } finally {
    server.close();
  }
});

test('a hub download follows the redirect to another origin without the token; a 404 names the URL', async () => {
  const body = writeParquet(join(dir, 'hub-cdn.parquet'), miniRows());
  const seen: Array<{ url: string; auth: string | undefined }> = [];
  const cdn = createServer((req, res) => {
    seen.push({ url: `cdn${req.url}`, auth: req.headers.authorization });
    res.end(body);
  });
  await new Promise<void>((r) => cdn.listen(0, '127.0.0.1', r));
  const hub = createServer((req, res) => {
    seen.push({ url: req.url ?? '', auth: req.headers.authorization });
    const port = (hub.address() as AddressInfo).port;
    if (req.url?.startsWith('/parquet?dataset=')) {
      res.setHeader('content-type', 'application/json');
      const file = (split: string, path: string) => ({ split, url: `http://127.0.0.1:${port}${path}` });
      res.end(JSON.stringify({ parquet_files: [file('test', '/resolve/0.parquet'), file('dev', '/gone')] }));
    } else if (req.url === '/resolve/0.parquet') {
      // as the hub sends a file on to its CDN (another origin)
      res.writeHead(302, { location: `http://127.0.0.1:${(cdn.address() as AddressInfo).port}/blob/0` });
      res.end();
    } else {
      res.statusCode = 404;
      res.end();
    }
  });
  await new Promise<void>((r) => hub.listen(0, '127.0.0.1', r));
  try {
    const endpoint = `http://127.0.0.1:${(hub.address() as AddressInfo).port}`;
    const options = { endpoint, cacheDir: join(dir, 'cache-cdn'), token: 'hf_secret' };
    assert.deepEqual(await loadHubDataset('polar/mini', options), await loadDataset(MINI));
    assert.deepEqual(seen, [
      { url: '/parquet?dataset=polar%2Fmini', auth: 'Bearer hf_secret' },
      { url: '/resolve/0.parquet', auth: 'Bearer hf_secret' },
      { url: 'cdn/blob/0', auth: undefined },
    ]);
    await assert.rejects(
      loadHubDataset('polar/mini', { ...options, split: 'dev' }),
      (e: unknown) =>
        e instanceof InputError &&
        /download of http:\/\/127\.0\.0\.1:\d+\/gone failed: HTTP 404/.test(e.message),
    );
  } finally {
    hub.close();
    cdn.close();
  }
});

test('mini.jsonl carries the fixture schema fields', () => {
  const text = readFileSync(MINI, 'utf8');
  for (const row of miniRows()) {
    for (const k of [
      'repo',
      'instance_id',
      'base_commit',
      'patch',
      'test_patch',
      'problem_statement',
      'version',
      'FAIL_TO_PASS',
      'PASS_TO_PASS',
    ]) {
      assert.ok(k in row, `${row.instance_id} lacks ${k}`);
    }
  }
  assert.ok(text.length > 0);
});
