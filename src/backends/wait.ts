/**
 * Waiting for an inference server that is still starting (vLLM and SGLang take minutes to load a model):
 * polls the route the server really serves, with the run's auth header, and tells the seconds left.
 */
import { PolarError } from '../errors.ts';
import { DEFAULTS } from '../options/defaults.ts';
import { log } from '../util/log.ts';
import { authHeaders, getJson, postJson } from './http.ts';
import { assertProbe, formatProbeReport, probeBackend } from './probe.ts';
import { rootUrl } from './server-info.ts';
import type { BackendOptions } from './types.ts';

/**
 * Waits until the server answers (vLLM and SGLang take minutes to load a model), polling the route it
 * really serves (/v1/models; NeMo RL: /tokenize) with auth, telling the seconds left every `tickMs`;
 * throws a PolarError naming the URL when `timeoutMs` passes.
 */
export async function waitForBackend(
  options: Pick<BackendOptions, 'model' | 'apiKey'> & { kind: string; url?: string | null | undefined },
  init: {
    timeoutMs: number;
    tickMs?: number;
    onWait?: (secondsLeft: number, url: string, why: string) => void;
  },
): Promise<void> {
  if (options.kind === 'embedded' || !options.url) return;
  const root = rootUrl(options.url);
  const headers = authHeaders(options.apiKey);
  const nemo = options.kind === 'nemo-rl';
  const url = nemo ? `${root}/tokenize` : `${root}/v1/models`;
  const deadline = Date.now() + init.timeoutMs;
  let lastTick = 0;
  let why = '';
  for (;;) {
    const left = deadline - Date.now();
    const outcome = nemo
      ? await postJson(
          url,
          { model: options.model, prompt: 'ok' },
          { signal: AbortSignal.timeout(5000), timeoutMs: 5000, headers },
        )
      : await getJson(url, { timeoutMs: 5000, headers });
    if (outcome.ok) return;
    // any HTTP answer but a gateway's 502/503 means the server is up (what it says, the probe judges)
    const f = outcome.fault;
    const down =
      f.kind === 'backend_unreachable' || f.kind === 'backend_timeout' || / answered 50[23]/.test(f.message);
    if (!down) return;
    why = f.message;
    if (left <= 0) {
      throw new PolarError(
        `the ${options.kind} server at ${url} did not answer within ${Math.round(init.timeoutMs / 1000)} s: ${why}`,
        {
          exitCode: 4,
          hint: 'start the server first, or raise --backend-timeout',
        },
      );
    }
    if (Date.now() - lastTick >= (init.tickMs ?? 5000)) {
      lastTick = Date.now();
      init.onWait?.(Math.ceil(left / 1000), url, why);
    }
    await new Promise((r) => setTimeout(r, Math.min(1000, Math.max(50, left))));
  }
}

/**
 * What every command that starts a harness runs once before it (capture, serve, eval, loop, gym): waits
 * for the server up to --backend-timeout with a countdown on stderr, probes its set-up, and stops with one
 * BackendSetupError naming the server flag to add when the set-up is wrong (--skip-backend-check skips it). The report goes to the
 * debug log when all is well, and its warnings to stderr.
 */
export async function ensureBackendReady(options: BackendOptions): Promise<void> {
  // the embedded engine runs in process: nothing to probe; --skip-backend-check: the user's call
  if (options.kind === 'embedded' || !options.url || options.skipCheck) return;
  await waitForBackend(options, {
    timeoutMs: options.timeoutMs ?? DEFAULTS.backendTimeoutMs.value,
    onWait: (left, url, why) =>
      log.info(`waiting for the ${options.kind} server at ${url} (${left} s left): ${why}`),
  });
  const report = await probeBackend(options);
  log.debug(formatProbeReport(report));
  for (const c of report.checks) {
    if (c.status === 'warn')
      log.warn(`${options.kind} server: ${c.name}: ${c.detail}${c.fix ? ` (${c.fix})` : ''}`);
  }
  assertProbe(report);
}
