/**
 * Waiting for an inference server that is still starting (vLLM and SGLang take minutes to load a model):
 * polls the route the server really serves, with the run's auth header, and tells the seconds left.
 */
import { EXIT, PolarError } from '../errors.ts';
import { DEFAULTS } from '../options/defaults.ts';
import { throwIfStopped } from '../util/interrupt.ts';
import { log } from '../util/log.ts';
import { authHeaders, getJson, postJson } from './http.ts';
import { assertProbe, formatProbeReport, probeBackend } from './probe.ts';
import { rootUrl } from './server-info.ts';
import type { BackendOptions } from './types.ts';

/** 127.0.0.0/8, ::1, localhost: a server on this machine. */
export function isLoopbackUrl(url: string): boolean {
  try {
    const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
    return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
  } catch {
    return false;
  }
}

/**
 * Nothing listens on a loopback URL: the server was not started, or died, or the port is wrong. vLLM binds
 * its port before it loads the model but listens only once it serves (vllm/entrypoints/openai/api_server.py,
 * `setup_server` binds, uvicorn listens after the engine is up; read at commit 0001948bc769), so a starting
 * vLLM refuses connections too: `polar doctor --wait` is the explicit wait for one.
 */
export function nothingListens(kind: string, url: string, model: string | undefined): PolarError {
  const root = rootUrl(url);
  const port = new URL(root).port || (root.startsWith('https') ? '443' : '80');
  return new PolarError(
    `nothing listens at ${root} (connection refused): the ${kind} server is not running`,
    {
      exitCode: EXIT.environment,
      hint:
        `start it first (for vLLM: vllm serve ${model ?? 'MODEL'} --port ${port} ...), or fix --backend-url; ` +
        `a server that is still loading its model refuses connections too: wait for it with polar doctor --backend ${kind} --backend-url ${url} --wait`,
    },
  );
}

/**
 * Waits until the server answers (vLLM and SGLang take minutes to load a model), polling the route it
 * really serves (/v1/models; NeMo RL: /tokenize) with auth, telling the seconds left every `tickMs`;
 * throws a PolarError naming the URL when `timeoutMs` passes. `refusedFails`: a refused connection to a
 * loopback URL fails at once (nothingListens) instead of being waited out. `signal` stops the wait.
 */
export async function waitForBackend(
  options: Pick<BackendOptions, 'model' | 'apiKey'> & { kind: string; url?: string | null | undefined },
  init: {
    timeoutMs: number;
    tickMs?: number;
    onWait?: (secondsLeft: number, url: string, why: string) => void;
    refusedFails?: boolean;
    signal?: AbortSignal;
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
    // one poll waits 5 s at most, and never past the deadline (a server that takes connections and never
    // answers kept a 2 s wait going 10 s: two whole 5 s polls)
    const pollMs = Math.max(100, Math.min(5000, deadline - Date.now()));
    const outcome = nemo
      ? await postJson(
          url,
          { model: options.model, prompt: 'ok' },
          { signal: AbortSignal.timeout(pollMs), timeoutMs: pollMs, headers },
        )
      : await getJson(url, { timeoutMs: pollMs, headers });
    const left = deadline - Date.now();
    if (outcome.ok) return;
    // any HTTP answer but a gateway's 502/503 means the server is up (what it says, the probe judges)
    const f = outcome.fault;
    const down =
      f.kind === 'backend_unreachable' || f.kind === 'backend_timeout' || / answered 50[23]/.test(f.message);
    if (!down) return;
    why = f.message;
    if (init.refusedFails && /ECONNREFUSED/.test(why) && isLoopbackUrl(url))
      throw nothingListens(options.kind, options.url, options.model);
    throwIfStopped(init.signal, `stopped waiting for the ${options.kind} server at ${url}`);
    if (left <= 0) {
      throw new PolarError(
        `the ${options.kind} server at ${url} did not answer within ${Math.round(init.timeoutMs / 1000)} s: ${why}`,
        {
          exitCode: EXIT.environment,
          hint: 'start the server first, or raise --backend-timeout',
        },
      );
    }
    if (Date.now() - lastTick >= (init.tickMs ?? 5000)) {
      lastTick = Date.now();
      init.onWait?.(Math.ceil(left / 1000), url, why);
    }
    await sleep(Math.min(1000, Math.max(50, left)), init.signal);
  }
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((done) => {
    const timer = setTimeout(finish, ms);
    function finish() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', finish);
      done();
    }
    signal?.addEventListener('abort', finish, { once: true });
  });
}

/**
 * What every command that starts a harness runs once before it (capture, serve, eval, loop, gym): waits
 * for the server up to --backend-timeout with a countdown on stderr, probes its set-up, and stops with one
 * BackendSetupError naming the server flag to add when the set-up is wrong (--skip-backend-check skips it). The report goes to the
 * debug log when all is well, and its warnings to stderr.
 */
export async function ensureBackendReady(options: BackendOptions, signal?: AbortSignal): Promise<void> {
  // the embedded engine runs in process: nothing to probe; --skip-backend-check: the user's call
  if (options.kind === 'embedded' || !options.url || options.skipCheck) return;
  await waitForBackend(options, {
    timeoutMs: options.timeoutMs ?? DEFAULTS.backendTimeoutMs.value,
    refusedFails: true,
    ...(signal ? { signal } : {}),
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
