/**
 * Issue 43, item 3: an environment build runs with the least rights that work. A trusted recipe (the
 * operator's own dataset) asks for `evil==0.1`, a requirement like any other, served offline from a
 * find-links folder; its sdist's build backend (test/support/evil-sdist.ts) is the attack: it writes a
 * marker into the package folder, copies a file of the host it should not see, fetches a URL on the
 * host's 127.0.0.1, and leaves a symlink where polar writes its import guard; the wheel's .pth runs at
 * every start of the environment's Python and writes a marker outside. Sandboxed, none of it reaches
 * the host: the marker and the leak stay absent, the beacon is never hit, the symlink's target keeps its
 * text, the guard is a file of its own in site-packages; the environment is built, holds evil, and is
 * polar's own (uid) afterwards. Where bwrap does not work the build still runs, and polar says so.
 */
import assert from 'node:assert/strict';
import { existsSync, lstatSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Environments, MANIFEST } from '../../../src/rollout/env/build.ts';
import { openBuildSandbox } from '../../../src/rollout/env/build-sandbox.ts';
import { GUARD_HOOK, GUARD_MODULE } from '../../../src/rollout/env/guard.ts';
import { probePython } from '../../../src/rollout/env/python.ts';
import type { EnvRecipe, PythonInfo } from '../../../src/rollout/env/types.ts';
import { execTree } from '../../../src/rollout/exec.ts';
import { probeSandbox } from '../../../src/rollout/runtime/probe.ts';
import { log } from '../../../src/util/log.ts';
import { type Attack, hostileLinks } from '../../support/evil-sdist.ts';
import { tempDir } from '../../support/temp.ts';

const dir = tempDir('polar-build-sandbox-');
const links = join(dir, 'links');
let hostile: Awaited<ReturnType<typeof hostileLinks>>;
let attack: Attack;
let bwrapOk = false;

before(async () => {
  hostile = await hostileLinks(dir);
  attack = hostile.attack;
  bwrapOk = (await probeSandbox()).ok;
});
after(() => hostile.close());

const recipe = (over: Partial<EnvRecipe> = {}): EnvRecipe => ({
  repo: 'evil/pkg',
  version: '0.1',
  source: 'row',
  python: null,
  requirements: [],
  pipPackages: ['evil==0.1'],
  preInstall: [],
  systemSteps: [],
  install: null,
  requirementsFrom: null,
  skipped: [],
  ...over,
});

test("a package's build code and .pth run inside the build sandbox: nothing of the host is read, written or reached", async (t) => {
  if (!bwrapOk) return t.skip('bwrap does not work here (polar doctor --runtime sandbox)');
  const envs = new Environments({
    cacheDir: join(dir, 'cache'),
    reposDir: dir,
    env: { PIP_CONFIG_FILE: '/dev/null', PIP_NO_INDEX: '1', PIP_FIND_LINKS: links },
  });
  const built = await envs.ensure(recipe());
  assert.equal(existsSync(attack.marker), false, 'the build wrote into the package folder');
  assert.equal(existsSync(attack.leak), false, 'the build copied a host file out');
  assert.equal(existsSync(attack.pthMarker), false, "the environment's .pth wrote outside it");
  assert.equal(hostile.hits(), 0, "the build reached the host's 127.0.0.1");
  assert.equal(
    readFileSync(attack.target, 'utf8'),
    'original\n',
    "polar's guard write followed the build's symlink",
  );
  // built all the same, with evil in it and polar's own guard, a file in site-packages
  const manifest = JSON.parse(readFileSync(join(built.dir, MANIFEST), 'utf8')) as { installed: string[] };
  assert.ok(manifest.installed.includes('evil-0.1'), manifest.installed.join(' '));
  const guard = join(built.sitePackages, `${GUARD_MODULE}.py`);
  assert.equal(lstatSync(guard).isFile(), true);
  assert.equal(readFileSync(guard, 'utf8'), GUARD_HOOK);
  // the environment is polar's own again (as root, the build ran under a uid of its own)
  assert.equal(statSync(built.dir).uid, process.getuid?.());
  assert.equal(statSync(join(built.sitePackages, 'evil')).uid, process.getuid?.());
  assert.match(readFileSync(join(built.dir, 'polar-build.log'), 'utf8'), /sandboxed: .*network none/);
});

test('where bwrap does not work, a build runs unsandboxed and polar says so, naming why', async () => {
  const python = (await probePython('python3')) as PythonInfo;
  const warnings: string[] = [];
  const restore = log.warn;
  log.warn = (m: string) => {
    warnings.push(m);
  };
  try {
    const target = join(dir, 'unsandboxed');
    const sandbox = await openBuildSandbox(target, python, {}, { bwrap: join(dir, 'no-such-bwrap') });
    assert.equal(sandbox.sandboxed, false);
    const r = await sandbox.run(['sh', '-c', 'echo "$HOME"']);
    assert.equal(r.exitCode, 0);
    await sandbox.close();
  } finally {
    log.warn = restore;
  }
  assert.equal(warnings.length, 1, warnings.join('\n'));
  assert.match(
    warnings[0]!,
    /environment builds run unsandboxed, with polar's rights .*no-such-bwrap is not installed/,
  );
});

/** the network interfaces a command sees, on one line */
const NET = `echo "net: $(awk -F: 'NR > 2 { gsub(/ /, "", $1); print $1 }' /proc/net/dev | sort | tr '\\n' ' ' | sed 's/ $//')"`;

test('a step writes only its folder, reads pip.conf but nothing else of the home, and has the network only for pip with a remote source', async (t) => {
  if (!bwrapOk) return t.skip('bwrap does not work here (polar doctor --runtime sandbox)');
  const python = (await probePython('python3')) as PythonInfo;
  const home = join(dir, 'home');
  mkdirSync(join(home, '.config', 'pip'), { recursive: true });
  writeFileSync(join(home, '.config', 'pip', 'pip.conf'), '[global]\ntimeout = 60\n');
  writeFileSync(join(home, 'secret'), 'polar-secret-line-7f3a\n');
  const script = [
    'touch "$PWD/made" && echo writable-folder',
    `touch '${join(dir, 'outside')}' 2>/dev/null && echo wrote-outside`,
    'cat "$HOME/.config/pip/pip.conf" >/dev/null && echo reads-pip-conf',
    'cat "$HOME/secret" 2>/dev/null && echo reads-home',
    `test -f '${join(links, 'evil-0.1.tar.gz')}' && echo sees-links`,
    `touch '${join(links, 'planted')}' 2>/dev/null && echo writes-links`,
    NET,
  ].join('\n');
  const hostNet = (await execTree('sh', ['-c', NET])).output.trim();
  // (the suite passes the user's pip configuration by path and sets XDG_CONFIG_HOME, scripts/test-home.mjs:
  // this test's pip.conf is the one in its own HOME, so both point there)
  const own = { HOME: home, PIP_CONFIG_FILE: '', XDG_CONFIG_HOME: join(home, '.config') };
  for (const [name, env, network] of [
    ['local sources only', { ...own, PIP_NO_INDEX: '1', PIP_FIND_LINKS: links }, 'net: lo'],
    ['PyPI (no-index unset)', { ...own, PIP_FIND_LINKS: links }, hostNet],
  ] as const) {
    const target = join(dir, `step-${name.replace(/\W+/g, '-')}`);
    const sandbox = await openBuildSandbox(target, python, env);
    const pip = await sandbox.run(['sh', '-c', script], { network: 'pip' });
    const other = await sandbox.run(['sh', '-c', NET]);
    await sandbox.close();
    assert.equal(pip.exitCode, 0, pip.output);
    const lines = pip.output.trim().split('\n');
    assert.deepEqual(lines.slice(0, -1), ['writable-folder', 'reads-pip-conf', 'sees-links'], name);
    assert.equal(lines.at(-1), network, `${name}: a pip step's network`);
    assert.equal(other.output.trim(), 'net: lo', `${name}: any other step has no network`);
    assert.equal(existsSync(join(target, 'made')), true);
    assert.equal(statSync(join(target, 'made')).uid, process.getuid?.());
  }
});
