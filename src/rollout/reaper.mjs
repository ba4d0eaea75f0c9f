#!/usr/bin/env node
// The grading reaper (plain JavaScript, like src/harnesses/watchdog.mjs: it starts in a few milliseconds,
// without tsx). execTree (src/rollout/exec.ts) runs every grading command (a test run, an install, git) as
// the leader of a process group of its own and kills the live groups from polar's `exit` handler, which a
// SIGKILL, an OOM kill or a crash never runs; the --test-timeout timer dies with polar too, so a hanging
// test ran on forever. polar starts this once, in a process group of its own with a pipe on its stdin, and
// writes `+PGID` when a group starts, `-PGID` when it is over, `done` before it exits. If the pipe closes
// without `done`, polar died: the groups still listed get SIGTERM, then SIGKILL 3 s later.
// It also removes polar's temporary folders (issue 43: a sandbox's repository and test patch, a scratch
// folder; the history repositories live in polar's cache since issue 46): `d+PATH` when polar makes one,
// `d-PATH` when polar removed it. When the pipe closes, with or without `done`, the folders still listed
// are removed, after the groups are gone (src/util/owned-temp.ts is the backstop when the reaper died too).
//
// usage: node reaper.mjs   (lines on stdin)
import { chmodSync, lstatSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const groups = new Set();
const dirs = new Set();
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
    else if (line.startsWith('d+')) dirs.add(line.slice(2));
    else if (line.startsWith('d-')) dirs.delete(line.slice(2));
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

function writable(dir) {
  try {
    if (!lstatSync(dir).isDirectory()) return;
    chmodSync(dir, 0o700);
    for (const entry of readdirSync(dir)) writable(join(dir, entry));
  } catch {
    // gone, or not ours to change
  }
}

function removeDirs() {
  for (const dir of dirs) {
    try {
      rmSync(dir, { recursive: true, force: true, maxRetries: 2 });
    } catch {
      writable(dir);
      try {
        rmSync(dir, { recursive: true, force: true, maxRetries: 2 });
      } catch {
        // left for the next polar (src/util/owned-temp.ts)
      }
    }
  }
}

async function onClose() {
  if (!done && groups.size > 0) {
    signalAll('SIGTERM');
    for (let i = 0; i < 30 && groups.size > 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      signalAll(0);
    }
    signalAll('SIGKILL');
    // a killed group may still be writing into its folder for a moment
    if (dirs.size > 0) await new Promise((r) => setTimeout(r, 200));
  }
  removeDirs();
  process.exit(0);
}
