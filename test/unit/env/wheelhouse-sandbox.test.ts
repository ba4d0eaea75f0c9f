/**
 * The fetch of a tree's build requirements into the environment's wheelhouse is a build step like the
 * environment's own (issue 46 over issue 43's build sandbox): `pip wheel` builds a requirement that comes
 * as an sdist, and its build backend is code. The attack: a tree whose `[build-system] requires` names
 * `evil==0.1` (test/support/evil-sdist.ts), whose backend writes a marker beside its own sdist, copies a
 * host file out, plants a link where polar writes its import guard and calls a beacon on 127.0.0.1.
 * Unsandboxed (as the fetch ran before it was moved into the build sandbox: execTree with polar's
 * rights, shown here through the path polar takes where bwrap does not work) every one of them lands;
 * in the build sandbox none does, and the wheel is in the wheelhouse all the same.
 */
import assert from 'node:assert/strict';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Environments, pipFailure } from '../../../src/rollout/env/build.ts';
import { GUARD_MODULE } from '../../../src/rollout/env/guard.ts';
import type { EnvRecipe } from '../../../src/rollout/env/types.ts';
import {
  ensureWheelhouse,
  wheelhouseOf,
  wheelhouseRequirements,
} from '../../../src/rollout/env/wheelhouse.ts';
import { probeSandbox } from '../../../src/rollout/runtime/probe.ts';
import { log } from '../../../src/util/log.ts';
import { type Attack, hostileLinks } from '../../support/evil-sdist.ts';
import { tempDir } from '../../support/temp.ts';

const dir = tempDir('polar-wheelhouse-sandbox-');
let hostile: Awaited<ReturnType<typeof hostileLinks>>;
let attack: Attack;
let links: string;
let bwrapOk = false;

before(async () => {
  hostile = await hostileLinks(dir);
  ({ attack, links } = hostile);
  bwrapOk = (await probeSandbox()).ok;
});
after(() => hostile.close());

const recipe: EnvRecipe = {
  repo: 'evil/tree',
  version: '0.1',
  source: 'row',
  python: null,
  requirements: [],
  pipPackages: [],
  preInstall: [],
  systemSteps: [],
  install: null,
  requirementsFrom: null,
  skipped: [],
};
const pip = () => ({ PIP_CONFIG_FILE: '/dev/null', PIP_NO_INDEX: '1', PIP_FIND_LINKS: links });
const reqs = { requirements: ['evil==0.1'], from: ['pyproject.toml [build-system] requires'] };

async function fetchInto(cacheDir: string, bwrap?: string) {
  const envs = new Environments({ cacheDir, reposDir: dir, env: pip() });
  const cached = await envs.ensure(recipe);
  await ensureWheelhouse(cached, reqs, {
    commit: 'e'.repeat(40),
    env: pip(),
    failure: pipFailure,
    ...(bwrap ? { bwrap } : {}),
  });
  return cached;
}

const landed = () => ({
  marker: existsSync(attack.marker),
  leak: existsSync(attack.leak),
  beacon: hostile.hits() > 0,
});

test("a build requirement's backend runs in the build sandbox when fetched into the wheelhouse: nothing of the host is read, written or reached", async (t) => {
  if (!bwrapOk) return t.skip('bwrap does not work here (polar doctor --runtime sandbox)');
  const cached = await fetchInto(join(dir, 'cache'));
  assert.deepEqual(landed(), { marker: false, leak: false, beacon: false });
  // the environment was read-only: no link where polar's guard is
  const guard = join(cached.sitePackages, `${GUARD_MODULE}.py`);
  assert.equal(lstatSync(guard).isSymbolicLink(), false);
  assert.equal(readFileSync(attack.target, 'utf8'), 'original\n');
  // fetched all the same, and recorded
  assert.ok(readdirSync(wheelhouseOf(cached.dir)).includes('evil-0.1-py3-none-any.whl'));
  assert.deepEqual(wheelhouseRequirements(cached.dir), ['evil==0.1']);
});

test('where bwrap does not work the same fetch runs with polar’s rights, and the attack lands (what the sandbox stops)', async () => {
  const restore = log.warn;
  log.warn = () => {};
  try {
    await fetchInto(join(dir, 'cache-unsandboxed'), join(dir, 'no-such-bwrap'));
  } finally {
    log.warn = restore;
  }
  assert.deepEqual(landed(), { marker: true, leak: true, beacon: true });
});

test('a wheelhouse that is not the folder polar made (a link the build left) is refused, never bound writable', async (t) => {
  if (!bwrapOk) return t.skip('bwrap does not work here (polar doctor --runtime sandbox)');
  const envs = new Environments({ cacheDir: join(dir, 'cache-link'), reposDir: dir, env: pip() });
  const cached = await envs.ensure(recipe);
  const elsewhere = join(dir, 'elsewhere');
  mkdirSync(elsewhere);
  rmSync(wheelhouseOf(cached.dir), { recursive: true });
  symlinkSync(elsewhere, wheelhouseOf(cached.dir));
  await assert.rejects(
    ensureWheelhouse(cached, reqs, { commit: 'e'.repeat(40), env: pip(), failure: pipFailure }),
    /is not the wheelhouse polar made \(not a folder\)/,
  );
  assert.deepEqual(readdirSync(elsewhere), []);
});
