#!/usr/bin/env node
// The grading reaper (plain JavaScript, like src/harnesses/watchdog.mjs: it starts in a few milliseconds,
// without tsx). execTree (src/rollout/exec.ts) runs every grading command (a test run, an install, git) as
// the leader of a process group of its own and kills the live groups from polar's `exit` handler, which a
// SIGKILL, an OOM kill or a crash never runs; the --test-timeout timer dies with polar too, so a hanging
// test ran on forever. polar starts this once, in a process group of its own with a pipe on its stdin, and
// writes `+PGID` when a group starts, `-PGID` when it is over, `done` before it exits. If the pipe closes
// without `done`, polar died: the groups still listed get SIGTERM, then SIGKILL 3 s later.
//
// usage: node reaper.mjs   (lines on stdin)
const groups = new Set();
let done = false;
let pending = '';

process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  pending += chunk;
  const lines = pending.split('\n');
  pending = lines.pop() ?? '';
  for (const line of lines) {
    const pgid = Number(line.slice(1));
    if (line === 'done') done = true;
    else if (line[0] === '+' && Number.isInteger(pgid) && pgid > 1) groups.add(pgid);
    else if (line[0] === '-') groups.delete(pgid);
  }
});
process.stdin.on('close', () => void onClose());
process.stdin.on('error', () => {});
// polar's terminal going away or a group signal meant for polar must not stop the reaper
for (const signal of ['SIGINT', 'SIGHUP', 'SIGTERM']) process.on(signal, () => {});

function signalAll(name) {
  for (const pgid of groups) {
    try {
      process.kill(-pgid, name);
    } catch {
      groups.delete(pgid);
    }
  }
}

async function onClose() {
  if (done || groups.size === 0) process.exit(0);
  signalAll('SIGTERM');
  for (let i = 0; i < 30 && groups.size > 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
    signalAll(0);
  }
  signalAll('SIGKILL');
  process.exit(0);
}
