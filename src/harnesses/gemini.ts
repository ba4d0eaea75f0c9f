/**
 * Gemini CLI (`@google/gemini-cli`, `gemini`): the Gemini API (`/v1beta/models/{model}:streamGenerateContent
 * ?alt=sse`) with a Gemini API key, redirected by GOOGLE_GEMINI_BASE_URL. Read from the published
 * bundles of 0.56.0 and 0.61.0 (bundle/chunk-*.js) and upstream google-gemini/gemini-cli:
 * - config dir: GEMINI_CLI_HOME replaces the home dir Gemini CLI keeps `.gemini/` in (packages/core/src/
 *   utils/paths.ts homedir()), so settings.json, chats and the installation id live in the run dir;
 * - auth: settings `security.auth.selectedType: "gemini-api-key"` with GEMINI_API_KEY, sent as
 *   `x-goog-api-key` (packages/core/src/core/contentGenerator.ts). With the base URL set and no selected
 *   type it would pick the "gateway" type, which non-interactive mode refuses ("Invalid auth method
 *   selected", packages/cli/src/config/auth.ts);
 * - base URL: GOOGLE_GEMINI_BASE_URL is honoured by every API-key auth state since 0.40.0 (PR 25357;
 *   before it some states ignored it); 0.40.x and 0.41.x refuse a plain-http URL that is not localhost
 *   ("Custom base URL must use HTTPS unless it is localhost", lifted by PR 26234 in 0.42.0);
 *   GOOGLE_GENAI_API_VERSION pins the path's version (v1beta, the SDK's default);
 * - GEMINI_CLI_NO_RELAUNCH: no child node process (packages/cli/index.ts relaunches itself otherwise);
 * - GEMINI_CLI_TRUST_WORKSPACE: headless runs in an untrusted folder exit 55 and `--yolo` falls back to
 *   asking (packages/core/src/utils/trust.ts; the folder is the task's, the harness runs sandboxed);
 * - outside traffic off: `general.enableAutoUpdate(Notification)`, `privacy.usageStatisticsEnabled`
 *   (Clearcut logging), `telemetry.enabled`, `ide.enabled`; `tools.useRipgrep: false` keeps the tool set
 *   the same whether or not an `rg` is installed; `general.maxAttempts: 2` (the default 10 retries a
 *   failing backend for minutes);
 * - non-interactive: `gemini -p PROMPT` (`--yolo` runs tools without asking; without it the shell, edit
 *   and write tools are not offered).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { classify, GEMINI_RULES } from './kinds.ts';
import type { HarnessProfile } from './types.ts';

export const gemini: HarnessProfile = {
  name: 'gemini',
  binaries: ['gemini', 'gemini-cli'],
  entry: '@google/gemini-cli/bundle/gemini.js',
  envNames: [
    'GEMINI_CLI_HOME',
    'GEMINI_API_KEY',
    'GOOGLE_GEMINI_BASE_URL',
    'GOOGLE_GENAI_API_VERSION',
    'GEMINI_CLI_NO_RELAUNCH',
    'GEMINI_CLI_TRUST_WORKSPACE',
    'GOOGLE_API_KEY',
    'GOOGLE_GENAI_USE_VERTEXAI',
    'GOOGLE_GENAI_USE_GCA',
  ],
  async prepare({ proxyUrl, key, model, runDir, argv }) {
    const home = join(runDir, 'gemini-home');
    const dir = join(home, '.gemini');
    await mkdir(dir, { recursive: true });
    const settings = {
      security: { auth: { selectedType: 'gemini-api-key' } },
      model: { name: model },
      general: { enableAutoUpdate: false, enableAutoUpdateNotification: false, maxAttempts: 2 },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
      ide: { enabled: false },
      tools: { useRipgrep: false },
    };
    const file = join(dir, 'settings.json');
    await writeFile(file, JSON.stringify(settings, null, 2));
    return {
      env: {
        GEMINI_CLI_HOME: home,
        GEMINI_API_KEY: key,
        GOOGLE_GEMINI_BASE_URL: proxyUrl,
        GOOGLE_GENAI_API_VERSION: 'v1beta',
        GEMINI_CLI_NO_RELAUNCH: 'true',
        GEMINI_CLI_TRUST_WORKSPACE: 'true',
        // other auth states would take precedence or send the key elsewhere
        GOOGLE_API_KEY: null,
        GOOGLE_GENAI_USE_VERTEXAI: null,
        GOOGLE_GENAI_USE_GCA: null,
      },
      argv,
      files: [file],
    };
  },
  callMeta(_headers, body) {
    const kind = classify(GEMINI_RULES, body);
    return kind ? { request_kind: kind } : {};
  },
  promptArgs(prompt) {
    return ['--yolo', '-p', prompt];
  },
};
