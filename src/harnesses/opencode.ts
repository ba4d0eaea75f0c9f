/**
 * OpenCode (`opencode-ai`, `opencode`): a `polar` provider in its own config file, spoken to as OpenAI
 * Chat Completions through the AI SDK's openai-compatible provider (bundled in the binary: nothing is
 * installed at run time). The npm package is a launcher whose postinstall links the native binary of the
 * platform package (`opencode-linux-x64`, a Bun executable); Node plays no part in running it.
 * Read from the JavaScript bundled in the 1.18.33 binary (upstream anomalyco/opencode, packages/opencode:
 * src/flag/flag.ts, src/config/config.ts, src/cli/cmd/run.ts):
 * - config: the global dirs come from XDG (config with opencode.json, data with the session database,
 *   cache, state), so XDG_CONFIG_HOME / XDG_DATA_HOME / XDG_CACHE_HOME / XDG_STATE_HOME all point into
 *   the run dir; `OPENCODE_DISABLE_PROJECT_CONFIG` keeps
 *   a repository's own opencode.json from replacing the provider;
 * - every config dir gets `@opencode-ai/plugin` npm-installed in the background at start
 *   (Config.loadInstanceState -> Npm.install, which skips a dir whose package.json and
 *   package-lock.json already list it and which has a node_modules): the private config dir is made so,
 *   and no plugin is configured;
 * - outside traffic off: OPENCODE_DISABLE_MODELS_FETCH (models.dev), OPENCODE_DISABLE_AUTOUPDATE and
 *   `autoupdate: false`, `share: "disabled"`, OPENCODE_DISABLE_LSP_DOWNLOAD, OPENCODE_DISABLE_DEFAULT_PLUGINS;
 *   OPENCODE_DISABLE_CLAUDE_CODE and OPENCODE_DISABLE_EXTERNAL_SKILLS keep it from reading the user's
 *   ~/.claude and ~/.agents;
 * - non-interactive: `opencode run MESSAGE...`; `--auto` approves what is not explicitly denied.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { classify, OPENCODE_RULES } from './kinds.ts';
import type { HarnessProfile } from './types.ts';

const FLAGS = [
  'OPENCODE_DISABLE_MODELS_FETCH',
  'OPENCODE_DISABLE_AUTOUPDATE',
  'OPENCODE_DISABLE_LSP_DOWNLOAD',
  'OPENCODE_DISABLE_DEFAULT_PLUGINS',
  'OPENCODE_DISABLE_CLAUDE_CODE',
  'OPENCODE_DISABLE_EXTERNAL_SKILLS',
  'OPENCODE_DISABLE_PROJECT_CONFIG',
] as const;
const XDG = ['XDG_CONFIG_HOME', 'XDG_DATA_HOME', 'XDG_CACHE_HOME', 'XDG_STATE_HOME'] as const;

/** what OpenCode's Npm.install checks before it reaches the registry for a config dir's plugin package */
async function markPluginInstalled(dir: string): Promise<string[]> {
  const deps = { '@opencode-ai/plugin': '*' };
  const pkg = join(dir, 'package.json');
  const lock = join(dir, 'package-lock.json');
  await mkdir(join(dir, 'node_modules'), { recursive: true });
  await writeFile(pkg, JSON.stringify({ private: true, dependencies: deps }, null, 2));
  await writeFile(lock, JSON.stringify({ lockfileVersion: 3, packages: { '': { dependencies: deps } } }));
  return [pkg, lock];
}

export const opencode: HarnessProfile = {
  name: 'opencode',
  binaries: ['opencode', 'opencode-ai'],
  entry: 'opencode-ai/bin/opencode.exe',
  entryRuns: 'exec',
  envNames: ['POLAR_API_KEY', ...XDG, ...FLAGS],
  async prepare({ proxyUrl, key, model, runDir, argv }) {
    const base = join(runDir, 'opencode');
    const dirs = Object.fromEntries(XDG.map((name) => [name, join(base, name.slice(4, -5).toLowerCase())]));
    const configDir = join(dirs.XDG_CONFIG_HOME!, 'opencode');
    await mkdir(configDir, { recursive: true });
    const config = {
      $schema: 'https://opencode.ai/config.json',
      provider: {
        polar: {
          npm: '@ai-sdk/openai-compatible',
          name: 'polar',
          options: { baseURL: `${proxyUrl}/v1`, apiKey: '{env:POLAR_API_KEY}' },
          models: { [model]: { name: model, limit: { context: 131072, output: 8192 } } },
        },
      },
      enabled_providers: ['polar'],
      model: `polar/${model}`,
      small_model: `polar/${model}`,
      share: 'disabled',
      autoupdate: false,
    };
    const file = join(configDir, 'opencode.json');
    await writeFile(file, JSON.stringify(config, null, 2));
    const marked = await markPluginInstalled(configDir);
    return {
      env: {
        ...dirs,
        POLAR_API_KEY: key,
        ...Object.fromEntries(FLAGS.map((name) => [name, '1'])),
      },
      argv,
      files: [file, ...marked],
    };
  },
  callMeta(headers, body) {
    const meta: Record<string, unknown> = {};
    if (headers['x-session-id']) meta.thread_id = headers['x-session-id'];
    const kind = classify(OPENCODE_RULES, body);
    if (kind) meta.request_kind = kind;
    return meta;
  },
  /**
   * `opencode run` joins its message words with spaces but first wraps every word holding a space in
   * quotes (run.ts): the prompt goes in as its space-separated words after `--`, so it arrives unchanged.
   */
  promptArgs(prompt) {
    return ['run', '--auto', '--', ...prompt.split(' ')];
  },
};
