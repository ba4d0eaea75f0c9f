/**
 * The proxy's CPU cost per call as a count of instructions, which does not move with the load of the
 * machine: bench/proxy.ts's times moved by 2x between runs on this project's shared 2-core machine, more
 * than the changes they were to judge. Each path (direct, bare http-proxy, polar) runs in one process
 * (bench/proxy-inproc.ts) under valgrind's callgrind with instrumentation off; after the warm-up the
 * instrumentation is turned on (`callgrind_control -i on`) for N sequential calls only. The proxy's own
 * share is the path's count less the direct path's (the client and the backend are the same in all three).
 * User-space instructions only: the kernel's share (the sockets' copies) is not counted, so the ratio is
 * larger than bench/proxy.ts's CPU-time ratio, in which the bare proxy's syscalls weigh more.
 *
 *   npm run bench -- proxy-instructions      (needs valgrind: apt-get install valgrind; about 5 minutes)
 *   POLAR_BENCH_INSTR_N (default 300 calls), POLAR_BENCH_WARM (default 1000 calls)
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);

async function have(command: string): Promise<boolean> {
  try {
    await run(command, ['--version']);
    return true;
  } catch {
    return false;
  }
}

/** Instructions over the N measured calls of one path. */
async function measure(kind: string, n: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'polar-bench-callgrind-'));
  const script = fileURLToPath(new URL('./proxy-inproc.ts', import.meta.url));
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--instr-atstart=no',
      // (V8 writes and rewrites the code it runs)
      '--smc-check=all-non-file',
      `--callgrind-out-file=${join(dir, 'cg.%p')}`,
      process.execPath,
      '--import',
      'tsx',
      script,
      kind,
      String(n),
    ],
    { env: { ...process.env, POLAR_BENCH_GATE: '1' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  // (valgrind runs the program in its own process: the pid the program prints is valgrind's)
  const limit = setTimeout(() => child.kill('SIGKILL'), 20 * 60_000);
  try {
    for await (const line of createInterface({ input: child.stdout })) {
      const pid = String(child.pid);
      if (line.startsWith('READY')) {
        await run('callgrind_control', ['-i', 'on', pid]);
        child.kill('SIGUSR2');
      } else if (line === 'MEASURED') {
        await run('callgrind_control', ['-i', 'off', pid]);
        await run('callgrind_control', ['-d', pid]);
        child.kill('SIGUSR2');
      }
    }
    const code = await exited;
    if (code !== 0) throw new Error(`${kind} path under valgrind exited with ${code}: ${stderr.trim()}`);
    let total = 0;
    for (const file of readdirSync(dir)) {
      for (const m of readFileSync(join(dir, file), 'utf8').matchAll(/^totals: (\d+)/gm))
        total += Number(m[1]);
    }
    if (total === 0) throw new Error(`${kind}: callgrind counted nothing (${readdirSync(dir).join(', ')})`);
    return total;
  } finally {
    clearTimeout(limit);
    // (a failed callgrind_control leaves the program waiting for its signal: it goes too)
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function benchProxyInstructions(): Promise<void> {
  console.log('\n## proxy instructions per call (callgrind, sequential streaming calls, 100 KB request)');
  if (!(await have('valgrind')) || !(await have('callgrind_control'))) {
    console.log('skipped: valgrind is not installed (apt-get install valgrind)');
    return;
  }
  const n = Number(process.env.POLAR_BENCH_INSTR_N ?? 300);
  const per: Record<string, number> = {};
  for (const kind of ['direct', 'bare', 'polar']) per[kind] = (await measure(kind, n)) / n;
  console.log(`| path | instructions/call (${n} calls) | the proxy's own |`);
  console.log('|---|---|---|');
  for (const kind of ['direct', 'bare', 'polar']) {
    const own = kind === 'direct' ? '-' : `${((per[kind]! - per.direct!) / 1e6).toFixed(2)} M`;
    console.log(`| ${kind} | ${(per[kind]! / 1e6).toFixed(2)} M | ${own} |`);
  }
  // (no ratio to bare: a pass-through's work is mostly the kernel's, and its own small user-space share
  // moved 0.16-0.48 M between runs with what V8 had compiled; polar's own share is the figure to compare)
  console.log(
    "compare polar's own share between two trees, over several runs: it moved by 0.1-0.8 M between runs of one tree",
  );
}

if (import.meta.url === `file://${process.argv[1]}`) await benchProxyInstructions();
