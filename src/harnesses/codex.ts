/**
 * OpenAI Codex CLI: a custom provider in a private CODEX_HOME/config.toml (Codex ignores OPENAI_BASE_URL).
 * The provider must not be named "OpenAI" (that switches Codex to remote compaction). Flags the user
 * gives (`-m`, `-c key=value`) take precedence over config.toml, so user flags win.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CODEX_RULES, classify } from './kinds.ts';
import type { HarnessProfile } from './types.ts';

const toml = (s: string) => JSON.stringify(s);

export const codex: HarnessProfile = {
  name: 'codex',
  binaries: ['codex'],
  entry: '@openai/codex/bin/codex.js',
  envNames: ['CODEX_HOME', 'POLAR_API_KEY', 'OPENAI_API_KEY', 'CODEX_API_KEY'],
  async prepare({ proxyUrl, key, model, runDir, argv }) {
    const home = join(runDir, 'codex-home');
    await mkdir(home, { recursive: true });
    const config = [
      `model = ${toml(model)}`,
      'model_provider = "polar"',
      'approval_policy = "never"',
      '',
      '[model_providers.polar]',
      'name = "polar"',
      `base_url = ${toml(`${proxyUrl}/v1`)}`,
      'env_key = "POLAR_API_KEY"',
      'wire_api = "responses"',
      'request_max_retries = 1',
      'stream_max_retries = 1',
      '',
      '[analytics]',
      'enabled = false',
      '',
      '[features]',
      'plugins = false',
      '',
    ].join('\n');
    const file = join(home, 'config.toml');
    await writeFile(file, config);
    return {
      env: { CODEX_HOME: home, POLAR_API_KEY: key, OPENAI_API_KEY: null, CODEX_API_KEY: null },
      argv,
      files: [file],
    };
  },
  callMeta(headers, body) {
    const meta: Record<string, unknown> = {};
    if (headers['session-id']) meta.thread_id = headers['session-id'];
    const turn = headers['x-codex-turn-metadata'];
    if (turn) {
      try {
        const parsed = JSON.parse(turn) as Record<string, unknown>;
        for (const k of ['request_kind', 'turn_id', 'thread_id', 'window_number', 'agent_name']) {
          if (parsed[k] !== undefined) meta[k] = parsed[k];
        }
      } catch {}
    }
    if (meta.request_kind === undefined) {
      const kind = classify(CODEX_RULES, body);
      if (kind) meta.request_kind = kind;
    }
    return meta;
  },
  promptArgs(prompt) {
    return ['exec', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', prompt];
  },
};
