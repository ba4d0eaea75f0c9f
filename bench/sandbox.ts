/**
 * The sandbox runtime's cost per sample against the local (unsandboxed) runtime, side by side:
 * - start to the harness's first model call: a fresh agent environment, the harness started in it
 *   under capture, until its first request reaches the backend (a minimal harness, a node one-liner,
 *   and real Pi), then the environment disposed;
 * - grading set-up: a fresh grading environment made and disposed;
 * - 4 samples at once: the agent half of four samples started together, wall time per sample.
 * Warm: the history repository of the instance is made once before the timings (its first-time cost is
 * printed apart). Each figure is the median of POLAR_BENCH_SANDBOX_REPS runs (default 5). On a machine
 * other work loads, figures are provisional: ratios taken in the same run hold better than times.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ensureFixtureRepos } from '../scripts/swe-fixtures.ts';
import { HarnessAgent, harnessArgv } from '../src/rollout/agents.ts';
import { loadDataset, type SweInstance } from '../src/rollout/dataset.ts';
import { NODE_MODULES } from '../src/rollout/runtime/create.ts';
import { HistoryStore } from '../src/rollout/runtime/history.ts';
import { LocalRuntime } from '../src/rollout/runtime/local.ts';
import { SandboxRuntime } from '../src/rollout/runtime/sandbox.ts';
import type { Runtime } from '../src/rollout/runtime/types.ts';
import { startFastBackend } from './fast-backend.ts';

const ROOT = resolve(import.meta.dirname, '..');
const REPS = Number(process.env.POLAR_BENCH_SANDBOX_REPS ?? 5);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ms = (x: number) => `${x.toFixed(0)} ms`;

/** a backend in front of the fast one that notes when each tagged sample's first request arrives */
async function taggedBackend() {
  const fast = await startFastBackend({ chunks: 4, promptTokens: 50 });
  const firstSeen = new Map<string, number>();
  const server = createServer();
  server.on('request', (req, res) => {
    const now = performance.now();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const tag = /polar-bench-[a-z0-9-]+/.exec(Buffer.concat(chunks).toString())?.[0] ?? 'untagged';
      if (!firstSeen.has(tag)) firstSeen.set(tag, now);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      fetch(`${fast.url}/chat/completions`, { method: 'POST', body: '{}' })
        .then((r) => r.text())
        .then((t) => res.end(t));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/v1`,
    firstSeen,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await fast.close();
    },
  };
}

type Harness = 'minimal' | 'pi';

/** start to first model call of one sample (the environment is disposed after the harness ends) */
async function firstCall(
  runtime: Runtime,
  instance: SweInstance,
  harness: Harness,
  backend: Awaited<ReturnType<typeof taggedBackend>>,
  tag: string,
): Promise<number> {
  const call = `fetch(process.env.OPENAI_BASE_URL + '/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY }, body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: '${tag}' }] }) }).then((r) => r.text())`;
  const agent = new HarnessAgent({
    harness: harness === 'pi' ? 'pi' : 'generic',
    backend: { kind: 'vllm', url: backend.url, model: 'm', requireTokenIds: false },
    model: 'm',
    placement: 'host',
    ...(harness === 'minimal' ? { genericCommand: [process.execPath, '-e', call] } : {}),
    promptTemplate: `${tag}: reply with one word.`,
  });
  const out = mkdtempSync(join(tmpdir(), 'polar-bench-sandbox-'));
  const t0 = performance.now();
  const env = await runtime.prepare(instance, 'agent');
  try {
    const r = await agent.run({
      instance,
      sample: 0,
      env,
      timeoutMs: 120_000,
      capturePath: join(out, 'c.jsonl'),
      meta: {},
    });
    if (r.calls === 0) throw new Error(`${harness} made no call: ${r.error}`);
  } finally {
    await env.dispose();
    await agent.close();
  }
  const seen = backend.firstSeen.get(tag);
  if (seen === undefined) throw new Error(`no request tagged ${tag}`);
  return seen - t0;
}

async function gradeSetup(runtime: Runtime, instance: SweInstance): Promise<number> {
  const t0 = performance.now();
  const env = await runtime.prepare(instance, 'grade');
  const t = performance.now() - t0;
  await env.dispose();
  return t;
}

export async function benchSandbox(): Promise<void> {
  ensureFixtureRepos();
  const reposDir = join(ROOT, 'fixtures/swe/repos');
  const [instance] = (await loadDataset(join(ROOT, 'fixtures/swe/mini.jsonl'))).filter(
    (i) => i.instance_id === 'polar-fixtures__jsutil-5',
  );
  const historyDir = mkdtempSync(join(tmpdir(), 'polar-bench-history-'));
  process.once('exit', () => rmSync(historyDir, { recursive: true, force: true }));
  const history = new HistoryStore({ cacheDir: historyDir });
  const runtimes: Record<string, Runtime> = {
    local: new LocalRuntime({ reposDir, history }),
    sandbox: new SandboxRuntime({ reposDir, history, harnessModules: NODE_MODULES }),
  };
  await runtimes.sandbox!.check([instance!]);
  const cold = performance.now();
  (await history.acquire(join(reposDir, instance!.repo), instance!.base_commit)).release();
  console.log(
    `history repository of the instance, first time: ${ms(performance.now() - cold)} (then reused)`,
  );
  console.log(`pi launcher: ${harnessArgv('pi', 'x', 'host').slice(0, 2).join(' ')}`);
  const backend = await taggedBackend();
  let n = 0;
  const tag = () => `polar-bench-${process.pid}-${n++}`;
  try {
    const rows: Array<[string, number, number]> = [];
    for (const harness of ['minimal', 'pi'] as const) {
      const times: Record<string, number[]> = { local: [], sandbox: [] };
      for (let i = 0; i < REPS; i++) {
        // alternate, so a change of load hits both alike
        for (const kind of ['local', 'sandbox'])
          times[kind]!.push(await firstCall(runtimes[kind]!, instance!, harness, backend, tag()));
      }
      rows.push([
        `start to first model call (${harness} harness)`,
        median(times.local!),
        median(times.sandbox!),
      ]);
    }
    const grade: Record<string, number[]> = { local: [], sandbox: [] };
    for (let i = 0; i < REPS; i++)
      for (const kind of ['local', 'sandbox'])
        grade[kind]!.push(await gradeSetup(runtimes[kind]!, instance!));
    rows.push(['grading set-up', median(grade.local!), median(grade.sandbox!)]);
    const together: Record<string, number> = {};
    for (const kind of ['local', 'sandbox']) {
      const t0 = performance.now();
      await Promise.all(
        [0, 1, 2, 3].map(() => firstCall(runtimes[kind]!, instance!, 'minimal', backend, tag())),
      );
      together[kind] = (performance.now() - t0) / 4;
    }
    rows.push(['4 samples at once, wall per sample (minimal harness)', together.local!, together.sandbox!]);
    console.log(
      `\n${'per sample'.padEnd(56)}${'local'.padStart(10)}${'sandbox'.padStart(10)}  sandbox/local`,
    );
    for (const [name, local, sandbox] of rows)
      console.log(
        `${name.padEnd(56)}${ms(local).padStart(10)}${ms(sandbox).padStart(10)}  ${(sandbox / local).toFixed(2)}x`,
      );
    console.log(
      `\nmedian of ${REPS} (4 at once: one batch); figures taken on this machine as it is loaded now are provisional`,
    );
  } finally {
    await backend.close();
  }
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) await benchSandbox();
