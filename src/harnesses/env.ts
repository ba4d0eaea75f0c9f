/**
 * What a harness process may see of polar's environment: an allow-list, never the whole of process.env.
 * A harness runs model-written shell commands, and anything in its environment can be echoed into a tool
 * result and so into the capture: the backend's key, the user's vendor keys, cloud and forge tokens stay
 * with polar. The harness gets what it needs to run (the names below), what its profile sets (per-run
 * key, base URL, private config dir) and what the user names with `--pass-env`.
 */
import { InvalidArgumentError } from 'commander';
import { UsageError } from '../errors.ts';
import { accumulating } from '../options/accumulate.ts';
import type { HarnessProfile } from './types.ts';

/** Names a harness process needs to run: search path, home, user, locale, terminal, temp dirs, proxies, CA. */
export const BASE_ENV_NAMES: readonly string[] = [
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'PWD',
  'LANG',
  'LANGUAGE',
  'TZ',
  'TERM',
  'COLORTERM',
  'NO_COLOR',
  'FORCE_COLOR',
  'COLUMNS',
  'LINES',
  'TMPDIR',
  'TMP',
  'TEMP',
  'XDG_CONFIG_HOME',
  'XDG_CACHE_HOME',
  'XDG_DATA_HOME',
  'XDG_STATE_HOME',
  'XDG_RUNTIME_DIR',
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'NO_PROXY',
  'ALL_PROXY',
  'http_proxy',
  'https_proxy',
  'no_proxy',
  'all_proxy',
  'SSL_CERT_FILE',
  'SSL_CERT_DIR',
  'NODE_EXTRA_CA_CERTS',
  // a harness polar runs inside a container is `docker exec` / `podman exec` on the host: it needs its engine
  'DOCKER_HOST',
  'DOCKER_CONTEXT',
  'DOCKER_CONFIG',
  'DOCKER_CERT_PATH',
  'DOCKER_TLS_VERIFY',
  'CONTAINER_HOST',
  'CONTAINERS_CONF',
];

/** Locale variables (LC_ALL, LC_CTYPE, ...) pass by prefix. */
const BASE_ENV_PREFIXES = ['LC_'] as const;

/**
 * Names that `--pass-env` refuses: the backend's key and the model vendors' keys (polar hands the harness a
 * per-run key of its own; a real vendor key in the harness would be echoed into captures or bypass polar).
 */
export const NEVER_PASSED: readonly string[] = [
  'POLAR_BACKEND_API_KEY',
  'POLAR_ADMIN_TOKEN',
  'OPENAI_API_KEY',
  'OPENAI_ORG_ID',
  'OPENAI_PROJECT_ID',
  'CODEX_API_KEY',
  'ANTHROPIC_API_KEY',
  'ANTHROPIC_AUTH_TOKEN',
  'GEMINI_API_KEY',
  'GOOGLE_API_KEY',
  'DASHSCOPE_API_KEY',
  'OPENROUTER_API_KEY',
  'MISTRAL_API_KEY',
  'DEEPSEEK_API_KEY',
  'GROQ_API_KEY',
  'XAI_API_KEY',
];

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Validates `--pass-env NAME` values (repeatable; commas also separate): the names, de-duplicated. */
export function parsePassEnv(values: string[] | string | undefined): string[] {
  const list = (Array.isArray(values) ? values : values === undefined ? [] : [values])
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter((v) => v !== '');
  for (const name of list) {
    if (!ENV_NAME.test(name)) {
      throw new UsageError(
        `--pass-env ${name}: not an environment variable name`,
        'for example --pass-env GOPATH',
      );
    }
    if (NEVER_PASSED.includes(name)) {
      throw new UsageError(
        `--pass-env ${name}: a model or backend key never reaches the harness`,
        'polar gives the harness a per-run key for its proxy; the backend key stays with polar (--api-key)',
      );
    }
  }
  return [...new Set(list)];
}

function allowed(name: string, pass: readonly string[]): boolean {
  return (
    BASE_ENV_NAMES.includes(name) || BASE_ENV_PREFIXES.some((p) => name.startsWith(p)) || pass.includes(name)
  );
}

/**
 * The environment of a harness process: the allowed names from `source` (process.env), then `extra`
 * (what polar's caller sets for this run, e.g. POLAR_PROMPT), then the profile's own settings (a null
 * removes the variable). Nothing else of `source` gets through.
 */
export function harnessEnv(
  source: Record<string, string | undefined>,
  options: {
    passEnv?: readonly string[];
    extra?: Record<string, string>;
    profile?: Record<string, string | null>;
  } = {},
): Record<string, string> {
  const pass = options.passEnv ?? [];
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(source)) {
    if (value !== undefined && allowed(name, pass)) env[name] = value;
  }
  Object.assign(env, options.extra ?? {});
  for (const [name, value] of Object.entries(options.profile ?? {})) {
    if (value === null) delete env[name];
    else env[name] = value;
  }
  return env;
}

/**
 * The names a harness inside a container must be passed (`docker exec -e NAME` copies the host value from
 * the environment polar gave the `docker` process, so the command line carries names, never values): what
 * the profiles set, the prompt, HOME, and the user's `--pass-env` names.
 */
export function containerEnvNames(
  profiles: readonly HarnessProfile[],
  passEnv: readonly string[] = [],
): string[] {
  return [...new Set([...profiles.flatMap((p) => p.envNames), 'POLAR_PROMPT', 'HOME', ...passEnv])];
}

/** `--pass-env NAME` (repeatable; commas separate too), parsed: a validated list of the names given so far. */
export const passEnvArg = accumulating(function passEnvArg(
  value: string,
  previous: string[] | undefined,
): string[] {
  try {
    return parsePassEnv([...(previous ?? []), value]);
  } catch (error) {
    // commander prints `--pass-env VALUE: <problem>` itself
    if (error instanceof UsageError)
      throw new InvalidArgumentError(error.message.replace(/^--pass-env \S+: /, ''));
    throw error;
  }
});
