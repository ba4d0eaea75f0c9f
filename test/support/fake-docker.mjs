#!/usr/bin/env node
// A stand-in for `docker exec [-i] [-w DIR] [-e NAME]... CONTAINER CMD...` as polar's container runtime
// calls it (src/rollout/runtime/docker.ts buildHostCommand). Like the docker CLI, `-e NAME` without a value
// copies NAME from the CLI's own environment into the container
// (https://docs.docker.com/reference/cli/docker/container/exec/ "--env"), and the container process
// sees only those plus the image's own (here: PATH).
//
// With FAKE_DOCKER_STATE=<folder>, the containers' processes live as the engine keeps them, not under the
// client: `exec` hands its command to a shim the client starts and leaves (a double fork, so the shim is
// nobody's child here, as containerd's shim is not the CLI's), in a session of its own; the client waits
// for it and exits with its status. Ending the client, its process group or its process tree leaves the
// command running (docker/cli#5309, Docker 26.1.3: `kill -- -$$` of a script running `docker exec -i test
// sleep 300` leaves `sleep 300` in the container; a duplicate of moby/moby#9098, whose `exec` kill API,
// moby/moby#35703, is still open). `rm -f CONTAINER` kills every process of the container with SIGKILL
// (docker-rm(1), docker.io 24.0.7: "Force the removal of a running container (uses SIGKILL)") and forgets
// it. The command's output goes to files the client copies out (no descriptor of the client's is held in
// the container, as none is with the engine's streams); its stdin is empty. <folder>/<container>/<id>.pids
// holds each exec's shim and command pids, <id>.client its client's pid.
import { spawn, spawnSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { constants } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const self = fileURLToPath(import.meta.url);
const state = process.env.FAKE_DOCKER_STATE;
const args = process.argv.slice(2);
const verb = args.shift();

if (verb === '__launch') {
  // the first fork: start the shim in a session of its own, and leave it (it is reparented away from the client)
  spawn(process.execPath, [self, '__shim', ...args], { detached: true, stdio: 'ignore' }).unref();
  process.exit(0);
}
if (verb === '__shim') {
  const [dir, id, file, ...rest] = args;
  const out = openSync(join(dir, `${id}.out`), 'a');
  const err = openSync(join(dir, `${id}.err`), 'a');
  const child = spawn(file, rest, { stdio: ['ignore', out, err] });
  writeFileSync(join(dir, `${id}.pids`), `${process.pid} ${child.pid}`);
  child.on('exit', (code, signal) => {
    const status = code ?? 128 + (constants.signals[signal] ?? 9);
    writeFileSync(join(dir, `${id}.exit`), String(status));
    process.exit(0);
  });
} else if (verb === 'rm' && state) {
  const name = args.filter((a) => a !== '-f' && a !== '--force').at(-1);
  const dir = join(state, name);
  if (existsSync(dir))
    for (const f of readdirSync(dir).filter((x) => x.endsWith('.pids')))
      for (const pid of readFileSync(join(dir, f), 'utf8').split(' ').map(Number)) {
        try {
          process.kill(-pid, 'SIGKILL'); // the shim leads its session's group, the command is in it
        } catch {}
        try {
          process.kill(pid, 'SIGKILL');
        } catch {}
      }
  rmSync(dir, { recursive: true, force: true });
  console.log(name);
  process.exit(0);
} else if (verb !== 'exec') process.exit(125);
else {
  const env = { PATH: process.env.PATH };
  let i = 0;
  for (; i < args.length; i++) {
    const a = args[i];
    if (a === '-i') continue;
    if (a === '-w') i++;
    else if (a === '-e') {
      const spec = args[++i];
      const eq = spec.indexOf('=');
      if (eq >= 0) env[spec.slice(0, eq)] = spec.slice(eq + 1);
      else if (process.env[spec] !== undefined) env[spec] = process.env[spec];
    } else break;
  }
  const [name, file, ...rest] = args.slice(i); // the container name, then the command
  if (!state) {
    const r = spawnSync(file, rest, { env, stdio: 'inherit' });
    process.exit(r.status ?? 1);
  }
  const dir = join(state, name);
  mkdirSync(dir, { recursive: true });
  const id = `${process.pid}-${Date.now()}`;
  writeFileSync(join(dir, `${id}.client`), String(process.pid));
  writeFileSync(join(dir, `${id}.out`), '');
  writeFileSync(join(dir, `${id}.err`), '');
  const launcher = spawn(process.execPath, [self, '__launch', dir, id, file, ...rest], {
    env,
    stdio: 'ignore',
  });
  // the client copies the output out and waits for the status, as `docker exec` does from the daemon
  const copied = { out: 0, err: 0 };
  const copy = (which, fd) => {
    let f;
    try {
      f = openSync(join(dir, `${id}.${which}`), 'r');
    } catch {
      return; // the container was removed
    }
    const buf = Buffer.alloc(65536);
    for (;;) {
      const n = readSync(f, buf, 0, buf.length, copied[which]);
      if (n <= 0) break;
      writeSync(fd, buf, 0, n);
      copied[which] += n;
    }
    closeSync(f);
  };
  launcher.on('exit', function poll() {
    copy('out', 1);
    copy('err', 2);
    const exit = join(dir, `${id}.exit`);
    if (existsSync(exit)) {
      copy('out', 1);
      copy('err', 2);
      process.exit(Number(readFileSync(exit, 'utf8')));
    } else if (!existsSync(dir))
      process.exit(137); // the container was removed
    else setTimeout(poll, 50);
  });
}
