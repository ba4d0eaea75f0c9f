/**
 * `polar gym --dry-run` checks what it says it checked (issue 31 item 11): the runtime is checked with or
 * without --dataset, so a docker runtime without a working engine fails as polar eval does (exit 4).
 */
import assert from 'node:assert/strict';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { polarInProcess } from '../../support/cli.ts';
import { tempDir } from '../../support/temp.ts';

const tmp = tempDir('polar-gym-dry-');
// a docker CLI whose engine is down, as `docker info` says when no daemon runs
writeFileSync(
  join(tmp, 'docker'),
  '#!/bin/sh\necho "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?" >&2\nexit 1\n',
);
chmodSync(join(tmp, 'docker'), 0o755);

// the CLI's entry in this process (polarInProcess), with the engine-less docker first on PATH
const dryRun = (runtime: string[]) =>
  polarInProcess(
    [
      'gym',
      '--dry-run',
      '--harness',
      'pi',
      ...runtime,
      '--backend',
      'vllm',
      '--backend-url',
      'http://127.0.0.1:9/v1',
      '--model',
      'm',
      '--out',
      join(tmp, 'out'),
    ],
    { env: { PATH: `${tmp}:${process.env.PATH}` } },
  );

test('a docker runtime without an engine: exit 4 naming the engine, no dry_run line', async () => {
  const r = await dryRun(['--runtime', 'docker']);
  assert.equal(r.code, 4, r.stderr);
  assert.match(r.stderr, /polar: error: docker is not usable: Cannot connect to the Docker daemon/);
  assert.equal(r.stdout, '');
});

test('what passes says what was checked, and that the backend was not probed', async () => {
  const r = await dryRun(['--runtime', 'local', '--allow-unsandboxed']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(JSON.parse(r.stdout).dry_run, true);
  assert.match(
    r.stderr,
    /dry run: flags, harness and the local runtime checked \(no --dataset given\); the backend is not probed; not listening/,
  );
});
