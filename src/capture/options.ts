/** Normalises `polar capture` flags into CaptureRunOptions, validating each in one place. */
import { BACKEND_KINDS } from '../backends/index.ts';
import type { BackendOptions } from '../backends/types.ts';
import { UsageError } from '../errors.ts';
import { HARNESS_NAMES, type HarnessName } from '../harnesses/types.ts';

export interface BackendFlags {
  backend?: string;
  backendUrl?: string;
  model?: string;
  apiKey?: string;
  tokenizer?: string;
  chatTemplateKwargs?: string;
  temperature?: string;
  topP?: string;
  maxTokens?: string;
  maxTokensCap?: string;
  backendTimeout?: string;
  requireTokenIds?: boolean;
}

export const DEFAULT_EMBEDDED_MODEL = 'onnx-community/Qwen3-0.6B-ONNX';

function number(
  flag: string,
  value: string | undefined,
  check: (n: number) => boolean,
  what: string,
): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || !check(n)) throw new UsageError(`${flag} ${value}: expected ${what}`);
  return n;
}

export function backendOptions(flags: BackendFlags): BackendOptions {
  const kind = flags.backend ?? (flags.backendUrl ? 'vllm' : 'embedded');
  if (!(BACKEND_KINDS as readonly string[]).includes(kind)) {
    throw new UsageError(`--backend ${kind} is not one of ${BACKEND_KINDS.join(', ')}`);
  }
  const model = flags.model ?? (kind === 'embedded' ? DEFAULT_EMBEDDED_MODEL : undefined);
  if (!model) {
    throw new UsageError(
      `--backend ${kind} needs --model (the model name the server serves)`,
      'for example --model Qwen/Qwen3.5-4B',
    );
  }
  let chatTemplateKwargs: Record<string, unknown> | undefined;
  if (flags.chatTemplateKwargs) {
    try {
      chatTemplateKwargs = JSON.parse(flags.chatTemplateKwargs) as Record<string, unknown>;
    } catch {
      throw new UsageError(
        `--chat-template-kwargs ${flags.chatTemplateKwargs}: not valid JSON`,
        `for example '{"enable_thinking": false}'`,
      );
    }
  }
  const options: BackendOptions = { kind: kind as BackendOptions['kind'], model };
  if (flags.backendUrl) options.url = flags.backendUrl;
  const apiKey = flags.apiKey ?? process.env.POLAR_BACKEND_API_KEY;
  if (apiKey) options.apiKey = apiKey;
  if (flags.tokenizer) options.tokenizer = flags.tokenizer;
  if (chatTemplateKwargs) options.chatTemplateKwargs = chatTemplateKwargs;
  const temperature = number('--temperature', flags.temperature, (n) => n >= 0, 'a number >= 0');
  if (temperature !== undefined) options.temperature = temperature;
  const topP = number('--top-p', flags.topP, (n) => n > 0 && n <= 1, 'a number in (0, 1]');
  if (topP !== undefined) options.topP = topP;
  const maxTokens = number(
    '--max-tokens',
    flags.maxTokens,
    (n) => Number.isInteger(n) && n > 0,
    'a positive integer',
  );
  if (maxTokens !== undefined) options.maxTokens = maxTokens;
  const cap = number(
    '--max-tokens-cap',
    flags.maxTokensCap,
    (n) => Number.isInteger(n) && n > 0,
    'a positive integer',
  );
  if (cap !== undefined) options.maxTokensCap = cap;
  const timeout = number('--backend-timeout', flags.backendTimeout, (n) => n > 0, 'seconds > 0');
  if (timeout !== undefined) options.timeoutMs = timeout * 1000;
  if (flags.requireTokenIds === false) options.requireTokenIds = false;
  return options;
}

export function harnessName(value: string | undefined): HarnessName | undefined {
  if (value === undefined) return undefined;
  if (!(HARNESS_NAMES as readonly string[]).includes(value)) {
    throw new UsageError(`--harness ${value} is not one of ${HARNESS_NAMES.join(', ')}`);
  }
  return value as HarnessName;
}

/** `--meta key=value` (repeatable) -> record */
export function parseMeta(pairs: string[] | undefined): Record<string, string> {
  const meta: Record<string, string> = {};
  for (const pair of pairs ?? []) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new UsageError(`--meta ${pair}: expected key=value`);
    meta[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return meta;
}

export function defaultOutput(harness: string, now = new Date()): string {
  const stamp = now.toISOString().replace(/[:.]/g, '-');
  return `polar-captures/${stamp}-${harness}.jsonl`;
}

export function parseNonNegativeInt(flag: string, value: string | undefined): number | undefined {
  return number(flag, value, (n) => Number.isInteger(n) && n >= 0, 'a non-negative integer');
}

export function parseSeconds(flag: string, value: string | undefined): number | undefined {
  const n = number(flag, value, (x) => x > 0, 'seconds > 0');
  return n === undefined ? undefined : n * 1000;
}
