#!/usr/bin/env node
// A stand-in for `docker exec [-i] [-w DIR] [-e NAME]... CONTAINER CMD...` as polar's container runtime
// calls it (src/rollout/runtime/docker.ts buildHostCommand). Like the docker CLI, `-e NAME` without a value
// copies NAME from the CLI's own environment into the container
// (https://docs.docker.com/reference/cli/docker/container/exec/ "--env"), and the container process
// sees only those plus the image's own (here: PATH).
import { spawnSync } from 'node:child_process';

const args = process.argv.slice(2);
if (args.shift() !== 'exec') process.exit(125);
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
const [, file, ...rest] = args.slice(i); // the container name, then the command
const r = spawnSync(file, rest, { env, stdio: 'inherit' });
process.exit(r.status ?? 1);
