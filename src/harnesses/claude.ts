/**
 * Claude Code: ANTHROPIC_BASE_URL (no /v1) + a bearer token, every model alias pinned to the served
 * model (subagents otherwise ask for the small-model name), vendor traffic off, a private config dir.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { CLAUDE_RULES, classify } from './kinds.ts';
import type { HarnessProfile } from './types.ts';

export const claude: HarnessProfile = {
  name: 'claude',
  binaries: ['claude', 'claude-code'],
  entry: '@anthropic-ai/claude-code/cli-wrapper.cjs',
  envNames: [
    'ANTHROPIC_BASE_URL',
    'ANTHROPIC_AUTH_TOKEN',
    'ANTHROPIC_API_KEY',
    'ANTHROPIC_MODEL',
    'ANTHROPIC_SMALL_FAST_MODEL',
    'ANTHROPIC_DEFAULT_HAIKU_MODEL',
    'ANTHROPIC_DEFAULT_SONNET_MODEL',
    'ANTHROPIC_DEFAULT_OPUS_MODEL',
    'CLAUDE_CODE_SUBAGENT_MODEL',
    'CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC',
    'CLAUDE_CONFIG_DIR',
    'DISABLE_AUTOUPDATER',
    'DISABLE_TELEMETRY',
    'DISABLE_ERROR_REPORTING',
    'ENABLE_TOOL_SEARCH',
    'IS_SANDBOX',
  ],
  async prepare({ proxyUrl, key, model, runDir, argv }) {
    const config = join(runDir, 'claude-config');
    await mkdir(config, { recursive: true });
    const env: Record<string, string | null> = {
      ANTHROPIC_BASE_URL: proxyUrl,
      ANTHROPIC_AUTH_TOKEN: key,
      ANTHROPIC_API_KEY: null,
      ANTHROPIC_MODEL: model,
      ANTHROPIC_SMALL_FAST_MODEL: model,
      ANTHROPIC_DEFAULT_HAIKU_MODEL: model,
      ANTHROPIC_DEFAULT_SONNET_MODEL: model,
      ANTHROPIC_DEFAULT_OPUS_MODEL: model,
      CLAUDE_CODE_SUBAGENT_MODEL: model,
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      CLAUDE_CONFIG_DIR: config,
      DISABLE_AUTOUPDATER: '1',
      DISABLE_TELEMETRY: '1',
      DISABLE_ERROR_REPORTING: '1',
      // newer versions defer tools behind ToolSearch even for a custom base URL
      ENABLE_TOOL_SEARCH: 'false',
    };
    // as root, --dangerously-skip-permissions is refused unless the run says it is sandboxed
    if (process.getuid?.() === 0 && argv.includes('--dangerously-skip-permissions')) env.IS_SANDBOX = '1';
    return { env, argv, files: [] };
  },
  callMeta(headers, body) {
    const meta: Record<string, unknown> = {};
    if (headers['x-claude-code-session-id']) meta.thread_id = headers['x-claude-code-session-id'];
    const kind = classify(CLAUDE_RULES, body);
    const tools = (body as { tools?: unknown[] } | null)?.tools;
    if (kind) meta.request_kind = kind;
    else if (Array.isArray(tools) && tools.length === 0) meta.request_kind = 'side';
    return meta;
  },
  promptArgs(prompt) {
    return ['-p', '--dangerously-skip-permissions', prompt];
  },
};
