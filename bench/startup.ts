/**
 * How long polar takes to start (issue 31 item 10: `--help` under 0.3 s): the median wall and CPU time
 * of `polar --help` and of each subcommand's `--help`, against two baselines measured in the same run:
 * `node -e 0` (Node itself) and `node --import tsx -e 0` (Node with the TypeScript loader bin/polar
 * registers). A warm-up run of each fills tsx's transform cache first, as any second start finds it.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..');
const RUNS = Number(process.env.POLAR_BENCH_RUNS ?? 7);
const COMMANDS = [
  'capture',
  'build',
  'train',
  'eval',
  'loop',
  'export',
  'inspect',
  'serve',
  'gym',
  'doctor',
  'grade',
  'setup',
];

/** CPU ms of this process's finished children (/proc/self/stat cutime + cstime, 100 ticks a second). */
function childrenCpuMs(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[13]) + Number(fields[14])) * 10;
}

const median = (v: number[]): number => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;

function measure(args: string[]): { wall: number; cpu: number } {
  const walls: number[] = [];
  const cpus: number[] = [];
  for (let i = 0; i <= RUNS; i++) {
    const cpu0 = childrenCpuMs();
    const t0 = performance.now();
    const r = spawnSync(process.execPath, args, { cwd: ROOT, encoding: 'utf8' });
    const wall = performance.now() - t0;
    if (r.status !== 0) throw new Error(`node ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
    if (i === 0) continue; // the warm-up
    walls.push(wall);
    cpus.push(childrenCpuMs() - cpu0);
  }
  return { wall: median(walls), cpu: median(cpus) };
}

export async function benchStartup(): Promise<void> {
  const rows: Array<[string, string[]]> = [
    ['node -e 0 (baseline)', ['-e', '0']],
    ['node --import tsx -e 0 (baseline)', ['--import', 'tsx', '-e', '0']],
    ['polar --help', ['bin/polar', '--help']],
    ...COMMANDS.map((c): [string, string[]] => [`polar ${c} --help`, ['bin/polar', c, '--help']]),
  ];
  console.log(`startup: median of ${RUNS} runs after a warm-up; target: polar --help under 300 ms`);
  let tsx = 0;
  for (const [label, args] of rows) {
    const m = measure(args);
    if (label.startsWith('node --import tsx')) tsx = m.wall;
    const ratio = tsx && !label.includes('baseline') ? `  ${(m.wall / tsx).toFixed(2)}x tsx alone` : '';
    console.log(
      `  ${label.padEnd(36)} wall ${m.wall.toFixed(0).padStart(5)} ms  cpu ${m.cpu.toFixed(0).padStart(5)} ms${ratio}`,
    );
  }
}
