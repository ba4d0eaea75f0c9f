import { basename } from 'node:path';
import { UsageError } from '../errors.ts';
import { claude } from './claude.ts';
import { codex } from './codex.ts';
import { gemini } from './gemini.ts';
import { generic } from './generic.ts';
import { opencode } from './opencode.ts';
import { pi } from './pi.ts';
import { qwen } from './qwen.ts';
import { HARNESS_NAMES, type HarnessName, type HarnessProfile } from './types.ts';

export const HARNESSES: Record<HarnessName, HarnessProfile> = {
  codex,
  claude,
  pi,
  qwen,
  gemini,
  opencode,
  generic,
};

/** The profile named by --harness, else the one whose binary is the command's basename, else generic. */
export function resolveHarness(name: string | undefined, argv: string[]): HarnessProfile {
  if (name) {
    if (!(HARNESS_NAMES as readonly string[]).includes(name)) {
      throw new UsageError(`--harness ${name} is not one of ${HARNESS_NAMES.join(', ')}`);
    }
    return HARNESSES[name as HarnessName];
  }
  // `npx codex ...` and `node .../pi ...`: look past launchers at the first word that names a harness
  const words = argv.slice(0, 3).map((w) => basename(w).replace(/\.(c?js|mjs|exe)$/, ''));
  for (const word of words) {
    for (const profile of Object.values(HARNESSES)) if (profile.binaries.includes(word)) return profile;
    if (!['npx', 'node', 'env', 'pnpm', 'bunx', 'exec'].includes(word)) break;
  }
  return generic;
}

export type { HarnessName, HarnessProfile } from './types.ts';
