/**
 * polar as a user installs it (issue 31 item 8): `npm pack` of this clone, then `npm install <tarball>`
 * into an empty project, offline from npm's cache (the clone's own install filled it; --prefer-offline).
 * The project's environment has a private HOME, polar's cache in the temp folder, and on PATH only the
 * harnesses the test puts there (the user's own installs), not the clone's node_modules/.bin.
 */
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import { privateEnv } from './capture-run.ts';
import { ROOT } from './cli.ts';
import { tempDir } from './temp.ts';

export interface PackedPolar {
  work: string;
  project: string;
  home: string;
  /** a folder on the project's PATH, for harnesses */
  harnesses: string;
  /** polar's cache ($POLAR_CACHE_DIR) */
  polarHome: string;
  env(extra?: Record<string, string>): Record<string, string>;
  npx(args: string[], timeoutMs?: number, extra?: Record<string, string>): ReturnType<typeof execa>;
}

/** installMs: the limit on `npm install` of the tarball (offline from npm's cache it takes well under a minute) */
export async function installPacked(installMs = 150_000): Promise<PackedPolar> {
  const work = tempDir('polar-package-');
  const project = join(work, 'project');
  const home = join(work, 'home');
  const harnesses = join(work, 'harnesses');
  const polarHome = join(work, 'polar-home');
  for (const dir of [project, home, harnesses]) mkdirSync(dir, { recursive: true });
  const env = (extra: Record<string, string> = {}): Record<string, string> => ({
    ...privateEnv(home),
    PATH: [harnesses, ...(process.env.PATH ?? '').split(':').filter((p) => !p.includes('node_modules'))].join(
      ':',
    ),
    // npm's package cache, which the clone's install filled (the test runner passes it: scripts/test-home.mjs)
    ...(process.env.npm_config_cache ? { npm_config_cache: process.env.npm_config_cache } : {}),
    ONNXRUNTIME_NODE_INSTALL: 'skip',
    POLAR_OFFLINE: '1',
    POLAR_CACHE_DIR: polarHome,
    ...extra,
  });
  const pack = await execa('npm', ['pack', '--ignore-scripts', '--pack-destination', work], { cwd: ROOT });
  const tarball = readdirSync(work).find((f) => f.endsWith('.tgz'));
  if (!tarball) throw new Error(`npm pack wrote no tarball: ${pack.stdout}`);
  writeFileSync(join(project, 'package.json'), '{"name": "my-agent-project", "private": true}\n');
  await execa('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', join(work, tarball)], {
    cwd: project,
    env: env(),
    extendEnv: false,
    timeout: installMs,
  });
  const npx = (args: string[], timeoutMs = 300_000, extra: Record<string, string> = {}) =>
    execa('npx', ['--no-install', 'polar', ...args], {
      cwd: project,
      env: env(extra),
      extendEnv: false,
      reject: false,
      stdin: 'ignore',
      timeout: timeoutMs,
    });
  return { work, project, home, harnesses, polarHome, env, npx };
}
