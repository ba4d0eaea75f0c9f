/**
 * Issue 43, items 1 and 2, over real requests on 127.0.0.1: a `/run` row is data, never the host's code.
 * A gym with a token and without --trust-row-commands gets rows whose verifier_metadata.instance sets
 * a build field: an sdist in pip_packages (a `file://` URL and one served over HTTP on 127.0.0.1; its
 * build backend writes a marker file outside the environment), `-r FILE` naming a file with a secret
 * line, an interpreter of its own (`python`), pre_install and install. Each is refused (403, naming the
 * field), nothing runs (the markers stay absent, no rollout folder is made), and no reply carries the
 * secret. A trusted gym still refuses a pip option or a URL where a requirement belongs (400, naming
 * the field and the entry). A plain row runs and gets its reward; a row naming an instance of --dataset
 * gets the operator's build fields, whatever it sent.
 *
 * Environments are built by pip offline (PIP_CONFIG_FILE=/dev/null, PIP_NO_INDEX=1), with the hostile
 * sdist where pip looks (PIP_FIND_LINKS), as a package index would serve it.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { join } from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createBackend } from '../../../src/backends/index.ts';
import type { Backend, BackendOptions } from '../../../src/backends/types.ts';
import { type Gym, type GymOptions, startGym } from '../../../src/gym/server.ts';
import { parseRow } from '../../../src/rollout/dataset.ts';
import { Environments } from '../../../src/rollout/env/build.ts';
import { LocalRuntime } from '../../../src/rollout/runtime/local.ts';
import { ROOT } from '../../support/cli.ts';
import { type StandIn, startCompletionsStandIn } from '../../support/completions-standin.ts';
import { type Attack, fileUrl, makeEvilSdist, serveFile } from '../../support/evil-sdist.ts';
import { fixtureTask } from '../../support/fixture-task.ts';
import { qwenTokenizerDir } from '../../support/qwen-tokenizer.ts';
import { tempDir } from '../../support/temp.ts';
import { loadSample } from '../protocols/harness-samples.ts';

const TASK = 'polar-fixtures__jsutil-5';
const TRAFFIC = fileURLToPath(new URL('./traffic.mjs', import.meta.url));
const REPOS = join(ROOT, 'fixtures/swe/repos');
const SECRET = 'polar-secret-line-7f3a';
const backendOptions: BackendOptions = {
  kind: 'tokens',
  model: 'Qwen/Qwen3-4B',
  tokenizer: qwenTokenizerDir(),
  chatTemplateKwargs: { enable_thinking: true },
};

const dir = tempDir('polar-row-trust-');
const attack: Attack = {
  marker: join(dir, 'marker'),
  secret: join(dir, 'secret'),
  leak: join(dir, 'leak'),
  target: join(dir, 'target'),
  pthMarker: join(dir, 'pth-marker'),
};
const ran = join(dir, 'ran');
const fakePython = join(dir, 'python-of-the-row');
writeFileSync(attack.secret, `${SECRET}\n`);
writeFileSync(attack.target, 'original\n');
writeFileSync(fakePython, `#!/bin/sh\necho "the row's python ran" > '${ran}'\nexit 1\n`, { mode: 0o755 });
const sdist = makeEvilSdist(dir, attack);
let http: { url: string; server: Server };
let standin: StandIn;
let backend: Backend;
/** the fixture task as the operator's dataset holds it (its own test_cmd) */
let task: Record<string, unknown>;
/** the same task without its test_cmd: a row that sets no operator field */
let plain: Record<string, unknown>;

before(async () => {
  http = await serveFile(sdist, 'evil-0.1.tar.gz');
  task = await fixtureTask(TASK);
  const { test_cmd: _cmd, ...rest } = task;
  plain = rest;
  // a model that answers at once; the stand-in harness then applies the gold patch
  standin = await startCompletionsStandIn({ policy: () => '<think>\nok\n</think>\n\nDone.', chunkTokens: 8 });
  backend = await createBackend({ ...backendOptions, url: standin.url });
});
after(async () => {
  await backend?.close();
  await standin?.close();
  http?.server.close();
});

/** (each test starts with no marker, so a test that fails says which attack ran) */
beforeEach(() => {
  for (const f of [attack.marker, attack.leak, attack.pthMarker, ran]) rmSync(f, { force: true });
});

function nothingRan(what: string): void {
  for (const f of [attack.marker, attack.leak, attack.pthMarker, ran])
    assert.equal(existsSync(f), false, `${what}: ${f} exists: the row's code ran`);
}

async function gymWith(extra: Partial<GymOptions> = {}): Promise<{ gym: Gym; out: string }> {
  const root = tempDir('polar-row-trust-gym-');
  const spec = join(root, 'traffic.json');
  writeFileSync(spec, JSON.stringify({ api: 'chat', body: loadSample('pi-chat-1-first-request.json').body }));
  const environments = new Environments({
    cacheDir: join(root, 'envs'),
    reposDir: REPOS,
    // offline; the hostile sdist is in the one place pip looks, as a package index would serve it
    env: { PIP_CONFIG_FILE: '/dev/null', PIP_NO_INDEX: '1', PIP_FIND_LINKS: dir },
  });
  const gym = await startGym({
    harness: 'generic',
    genericCommand: [process.execPath, TRAFFIC],
    harnessEnv: { GYM_TRAFFIC: spec, GYM_PATCH_B64: Buffer.from(String(task.patch)).toString('base64') },
    backend: backendOptions,
    backendInstance: backend,
    runtime: new LocalRuntime({ reposDir: REPOS, environments, tmpRoot: root }),
    placement: 'host',
    out: join(root, 'out'),
    port: 0,
    agentTimeoutMs: 60_000,
    testTimeoutMs: 60_000,
    ...extra,
  });
  return { gym, out: join(root, 'out') };
}

async function post(gym: Gym, inst: Record<string, unknown>): Promise<{ status: number; text: string }> {
  const res = await fetch(`${gym.url}/run`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${gym.token}` },
    body: JSON.stringify({
      responses_create_params: { input: 'fix it' },
      verifier_metadata: { instance: inst },
    }),
  });
  return { status: res.status, text: await res.text() };
}

const rollouts = (out: string) => (existsSync(out) ? readdirSync(out) : []);

/** every build field a row may try, with a value that would run the row's code on this machine */
const attacks: Array<[string, () => Record<string, unknown>]> = [
  ['pip_packages (an sdist by file:// URL)', () => ({ pip_packages: [`evil @ ${fileUrl(sdist)}`] })],
  ['pip_packages (an sdist over HTTP on 127.0.0.1)', () => ({ pip_packages: [`evil @ ${http.url}`] })],
  ['pip_packages (-r FILE)', () => ({ pip_packages: ['-r', attack.secret] })],
  ['pip_packages (a pip option and a path)', () => ({ pip_packages: ['--no-build-isolation', sdist] })],
  ['pip_packages (a requirement the index serves)', () => ({ pip_packages: ['evil==0.1'] })],
  ['python (an interpreter of its own)', () => ({ python: fakePython })],
  ['pre_install', () => ({ pre_install: [`echo pre_install > '${ran}'`] })],
  ['install', () => ({ install: `echo install > '${ran}'` })],
];

describe('a gym with a token and without --trust-row-commands', () => {
  let gym: Gym;
  let out: string;
  before(async () => {
    ({ gym, out } = await gymWith());
  });
  after(() => gym.close());

  for (const [name, make] of attacks) {
    test(`refuses a row setting ${name}: naming the field; nothing runs, nothing leaks`, async () => {
      const fields = make();
      const r = await post(gym, { ...plain, ...fields });
      nothingRan(name);
      assert.doesNotMatch(r.text, new RegExp(SECRET), 'the secret line came back in the reply');
      const field = Object.keys(fields)[0]!;
      // 403: the field is the operator's; 400 first when an entry is no requirement at all (item 2)
      const notRequirement = /\/|^-/.test(String((fields.pip_packages as string[] | undefined)?.[0] ?? ''));
      assert.equal(r.status, notRequirement ? 400 : 403, r.text.slice(0, 600));
      assert.match(
        r.text,
        new RegExp(notRequirement ? `${field}: .*entry` : `${field}.*--trust-row-commands`),
      );
      assert.deepEqual(rollouts(out), [], 'no rollout folder: nothing started');
    });
  }
});

describe('a trusted gym (--trust-row-commands) still takes requirements only as requirements', () => {
  let gym: Gym;
  before(async () => {
    ({ gym } = await gymWith({ trustRowCommands: true }));
  });
  after(() => gym.close());

  for (const [name, entry, list] of [
    ['-r FILE', '-r', ['-r', attack.secret]],
    ['--requirement=FILE', `--requirement=${attack.secret}`, [`--requirement=${attack.secret}`]],
    ['a file:// URL', `evil @ ${fileUrl(sdist)}`, [`evil @ ${fileUrl(sdist)}`]],
    ['a path', sdist, [sdist]],
    ['a pip option', '--no-build-isolation', ['--no-build-isolation', 'evil==0.1']],
  ] as const) {
    test(`pip_packages with ${name} is refused (400, naming the field and the entry); nothing runs`, async () => {
      const r = await post(gym, { ...plain, pip_packages: list });
      nothingRan(name);
      assert.doesNotMatch(r.text, new RegExp(SECRET), 'the secret line came back in the reply');
      assert.equal(r.status, 400, r.text.slice(0, 600));
      const message = (JSON.parse(r.text) as { error: { message: string } }).error.message;
      assert.ok(message.includes('pip_packages'), message);
      assert.ok(message.includes(JSON.stringify(entry)), `${message} names ${entry}`);
    });
  }
});

describe('plain rows and rows of --dataset', () => {
  test('a plain row runs and gets its reward (the dataset gives its test command)', async () => {
    const dataset = [parseRow('dataset.jsonl', 1, task)];
    const { gym } = await gymWith({ dataset });
    try {
      const r = await post(gym, plain);
      assert.equal(r.status, 200, r.text.slice(0, 600));
      const answer = JSON.parse(r.text) as Record<string, unknown>;
      assert.equal(answer.status, 'resolved', String(answer.reason));
      assert.equal(answer.reward, 1);
    } finally {
      await gym.close();
    }
  });

  test("a row naming an instance of --dataset gets the operator's build fields, not its own", async () => {
    const dataset = [parseRow('dataset.jsonl', 1, task)];
    const { gym } = await gymWith({ dataset });
    try {
      const r = await post(gym, {
        ...task,
        test_cmd: `echo test_cmd > '${ran}'; true`,
        pip_packages: ['evil==0.1'],
        install: `echo install > '${ran}'`,
      });
      assert.equal(r.status, 200, r.text.slice(0, 600));
      const answer = JSON.parse(r.text) as Record<string, unknown>;
      assert.equal(answer.status, 'resolved', String(answer.reason));
      nothingRan('a row of --dataset');
    } finally {
      await gym.close();
    }
  });
});
