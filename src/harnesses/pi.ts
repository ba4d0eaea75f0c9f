/**
 * Pi: a private PI_CODING_AGENT_DIR with a `polar` provider in models.json and settings.json making it
 * the default, so a plain `pi -p PROMPT` talks to the proxy. `--pi-api` picks the wire API Pi uses.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { UsageError } from '../errors.ts';
import { classify, PI_RULES } from './kinds.ts';
import type { HarnessProfile } from './types.ts';

export const PI_APIS = ['openai-completions', 'openai-responses', 'anthropic-messages'] as const;

export const pi: HarnessProfile = {
  name: 'pi',
  binaries: ['pi', 'pi-coding-agent'],
  entry: '@mariozechner/pi-coding-agent/dist/cli.js',
  envNames: ['PI_CODING_AGENT_DIR', 'POLAR_API_KEY', 'PI_OFFLINE', 'PI_SKIP_VERSION_CHECK'],
  async prepare({ proxyUrl, key, model, runDir, argv, options }) {
    const api = options.api ?? 'openai-completions';
    if (!(PI_APIS as readonly string[]).includes(api)) {
      throw new UsageError(`--pi-api ${api} is not one of ${PI_APIS.join(', ')}`);
    }
    const dir = join(runDir, 'pi-agent');
    await mkdir(dir, { recursive: true });
    const provider: Record<string, unknown> = {
      baseUrl: api === 'anthropic-messages' ? proxyUrl : `${proxyUrl}/v1`,
      api,
      apiKey: 'POLAR_API_KEY',
      models: [{ id: model, name: model, contextWindow: 131072, maxTokens: 8192, reasoning: false }],
    };
    if (api === 'openai-completions')
      provider.compat = { supportsDeveloperRole: false, supportsReasoningEffort: false };
    const modelsFile = join(dir, 'models.json');
    const settingsFile = join(dir, 'settings.json');
    await writeFile(modelsFile, JSON.stringify({ providers: { polar: provider } }, null, 2));
    await writeFile(settingsFile, JSON.stringify({ defaultProvider: 'polar', defaultModel: model }, null, 2));
    return {
      env: { PI_CODING_AGENT_DIR: dir, POLAR_API_KEY: key, PI_OFFLINE: '1', PI_SKIP_VERSION_CHECK: '1' },
      argv,
      files: [modelsFile, settingsFile],
    };
  },
  callMeta(_headers, body) {
    const kind = classify(PI_RULES, body);
    return kind ? { request_kind: kind } : {};
  },
  promptArgs(prompt) {
    return ['-p', '--no-session', prompt];
  },
};
