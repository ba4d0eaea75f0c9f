#!/usr/bin/env node
// The harness watchdog (plain JavaScript: it starts in a few milliseconds, without tsx). `polar capture`
// starts it in a process group of its own with a pipe on its stdin and writes `done` there before it
// exits. If the pipe closes without `done`, polar died (SIGKILL, OOM, a crash): the watchdog ends the
// harness and what it started, then removes the private run dir. Polar's own exit path does both itself.
//
// A harness that runs elsewhere through a client on this host (`docker exec`: the process in the container
// outlives its client, moby/moby#9098) comes with a command that ends it there (`docker rm -f <container>`),
// run once the client is ended.
//
// usage: node watchdog.mjs <harness pid> <group: 1 when the harness leads its own process group> <run dir | ->
//        [command that ends the harness where it runs, and its arguments]
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';

const [pidArg, groupArg, runDir, ...orphaned] = process.argv.slice(2);
const pid = Number(pidArg);
const group = groupArg === '1';
let input = '';

process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  input += chunk;
});
process.stdin.on('close', () => void onClose());
process.stdin.on('error', () => {});
// polar's terminal going away or a group signal meant for polar must not stop the watchdog
for (const signal of ['SIGINT', 'SIGHUP', 'SIGTERM']) process.on(signal, () => {});

/** The harness and its descendants (walked by parent pid; a detached grandchild keeps its parent link). */
function tree(root) {
  const ps = spawnSync('ps', ['-A', '-o', 'pid=,ppid='], { encoding: 'utf8' });
  const children = new Map();
  for (const line of (ps.stdout ?? '').split('\n')) {
    const [p, pp] = line.trim().split(/\s+/).map(Number);
    if (!p || pp === undefined) continue;
    if (!children.has(pp)) children.set(pp, []);
    children.get(pp).push(p);
  }
  const out = [root];
  for (let i = 0; i < out.length; i++) out.push(...(children.get(out[i]) ?? []));
  return out;
}

function signal(pids, name) {
  if (group) {
    try {
      process.kill(-pid, name);
    } catch {}
  }
  for (const p of pids) {
    try {
      process.kill(p, name);
    } catch {}
  }
}

const alive = (p) => {
  try {
    process.kill(p, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
};

async function onClose() {
  if (input.includes('done')) process.exit(0);
  if (Number.isInteger(pid) && pid > 0) {
    const pids = tree(pid);
    signal(pids, 'SIGTERM');
    for (let i = 0; i < 30 && pids.some(alive); i++) await new Promise((r) => setTimeout(r, 100));
    signal(pids, 'SIGKILL');
  }
  // bounded: an engine that hangs must not keep the watchdog forever
  if (orphaned.length > 0) spawnSync(orphaned[0], orphaned.slice(1), { stdio: 'ignore', timeout: 60_000 });
  if (runDir && runDir !== '-') rmSync(runDir, { recursive: true, force: true });
  process.exit(0);
}
