/** Any other agent: the conventional OpenAI and Anthropic environment variables point at the proxy. */
import type { HarnessProfile } from './types.ts';

export const generic: HarnessProfile = {
  name: 'generic',
  binaries: [],
  envNames: [
    'OPENAI_BASE_URL',
    'OPENAI_API_KEY',
    'ANTHROPIC_BASE_URL',
    'ANTHROPIC_API_KEY',
    'POLAR_MODEL',
    'POLAR_PROXY_URL',
  ],
  async prepare({ proxyUrl, key, model, argv }) {
    return {
      env: {
        OPENAI_BASE_URL: `${proxyUrl}/v1`,
        OPENAI_API_KEY: key,
        ANTHROPIC_BASE_URL: proxyUrl,
        ANTHROPIC_API_KEY: key,
        POLAR_MODEL: model,
        POLAR_PROXY_URL: proxyUrl,
      },
      argv,
      files: [],
    };
  },
  callMeta() {
    return {};
  },
  /** the generic harness has no command of its own: polar eval takes one from --agent-cmd */
  promptArgs(prompt) {
    return [prompt];
  },
};
