/**
 * The record and the check of a cached history repository (history.ts): what it held when polar made it
 * (its packs by name and object count, its refs, HEAD and config), written as `polar-history.json` in
 * the repository, and a check, run before every reuse, that it holds nothing else. The history is the
 * anti-leak boundary: a commit after base_commit that got into it (a `git fetch` by an unsandboxed agent
 * through a checkout's alternates, a copied pack, a ref, an alternates file pointing at a full
 * repository) would be readable by every later sample that checks out from it.
 *
 * Cheap on purpose (a few stats, the last bytes of each pack and index, one `git for-each-ref`): no
 * object can be added without a loose object, a new pack, a changed index or a new ref, and each of
 * those is refused. A pack is named by its own checksum (its last bytes), and its index ends with the
 * same checksum and states its object count, so a pack or index rewritten in place no longer matches
 * its recorded name or count.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { open, readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { execTree, gitEnv } from '../exec.ts';

export const HISTORY_RECORD = 'polar-history.json';

export interface HistoryRecord {
  v: 1;
  source: string;
  base: string;
  /** the packs (name = the hex checksum in pack-<name>.pack) and the objects each holds */
  packs: Array<{ name: string; objects: number }>;
  /** sha256 of `git for-each-ref` (object and name of every ref) */
  refs: string;
  head: string;
  /** sha256 of the repository's config */
  config: string;
  built_at: string;
}

/** files git may keep beside a pack of the same name */
const PACK_SIDES = ['.pack', '.idx', '.rev', '.bitmap', '.keep', '.mtimes', '.promisor'];
/** what objects/info may hold (none of it adds objects: `packs` lists them, commit-graph caches commits) */
const INFO_ALLOWED = new Set(['packs', 'commit-graph']);
/** files whose presence changes what the repository reads (or claims to be) */
const FORBIDDEN = ['objects/info/alternates', 'objects/info/http-alternates', 'info/grafts', 'shallow'];

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

async function tail(path: string, bytes: number, skipFromEnd = 0): Promise<Buffer> {
  const size = (await stat(path)).size;
  const handle = await open(path, 'r');
  try {
    const buffer = Buffer.alloc(bytes);
    await handle.read(buffer, 0, bytes, Math.max(0, size - skipFromEnd - bytes));
    return buffer;
  } finally {
    await handle.close();
  }
}

/** The object count a pack index (v2) states: the last entry of its fan-out table. */
async function indexCount(idx: string): Promise<number> {
  const handle = await open(idx, 'r');
  try {
    const head = Buffer.alloc(8 + 256 * 4);
    await handle.read(head, 0, head.length, 0);
    if (head.readUInt32BE(0) !== 0xff744f63 || head.readUInt32BE(4) !== 2) return -1;
    return head.readUInt32BE(8 + 255 * 4);
  } finally {
    await handle.close();
  }
}

/** Refs, HEAD and config as the record states them. */
async function refState(
  dir: string,
  gitconfig: string,
): Promise<{ refs: string; head: string; config: string }> {
  const r = await execTree('git', ['--git-dir', dir, 'for-each-ref', '--format=%(objectname) %(refname)'], {
    env: gitEnv(gitconfig),
    timeoutMs: 60_000,
  });
  if (r.exitCode !== 0) throw new Error(`git for-each-ref: ${r.output.trim()}`);
  return {
    refs: sha256(r.stdout),
    head: (await readFile(join(dir, 'HEAD'), 'utf8')).trim(),
    config: sha256(await readFile(join(dir, 'config'), 'utf8')),
  };
}

/** The record of a history repository polar has just made (its packs, refs, HEAD and config). */
export async function recordHistory(
  dir: string,
  what: { source: string; base: string; gitconfig: string },
): Promise<HistoryRecord> {
  const packs: HistoryRecord['packs'] = [];
  for (const file of (await readdir(join(dir, 'objects/pack'))).sort()) {
    const m = /^pack-([0-9a-f]+)\.pack$/.exec(file);
    if (m)
      packs.push({ name: m[1]!, objects: await indexCount(join(dir, 'objects/pack', `pack-${m[1]}.idx`)) });
  }
  return {
    v: 1,
    source: what.source,
    base: what.base,
    packs,
    ...(await refState(dir, what.gitconfig)),
    built_at: new Date().toISOString(),
  };
}

/**
 * Why the history repository at `dir` may not be used for `base` (what it holds beyond its record), or
 * null when it holds exactly what polar put there; 'missing' when there is none (or no record).
 */
export async function checkHistory(dir: string, base: string, gitconfig: string): Promise<string | null> {
  let record: HistoryRecord;
  try {
    record = JSON.parse(await readFile(join(dir, HISTORY_RECORD), 'utf8')) as HistoryRecord;
  } catch {
    return 'missing';
  }
  if (record.v !== 1 || record.base !== base) return `its record is for ${record.base}, not ${base}`;
  for (const file of FORBIDDEN) if (existsSync(join(dir, file))) return `it has ${file}`;
  const objects = (await readdir(join(dir, 'objects'))).filter((n) => n !== 'pack' && n !== 'info');
  if (objects.length > 0) return `it holds loose objects (objects/${objects[0]})`;
  const info = existsSync(join(dir, 'objects/info')) ? await readdir(join(dir, 'objects/info')) : [];
  const strange = info.find((n) => !INFO_ALLOWED.has(n));
  if (strange) return `it has objects/info/${strange}`;
  const names = new Set(record.packs.map((p) => p.name));
  for (const file of await readdir(join(dir, 'objects/pack'))) {
    const m = /^pack-([0-9a-f]+)(\.[a-z]+)$/.exec(file);
    if (!m || !names.has(m[1]!) || !PACK_SIDES.includes(m[2]!))
      return `it holds a pack polar did not make (${file})`;
  }
  for (const { name, objects } of record.packs) {
    const pack = join(dir, 'objects/pack', `pack-${name}.pack`);
    const idx = join(dir, 'objects/pack', `pack-${name}.idx`);
    if (!existsSync(pack) || !existsSync(idx)) return `pack-${name} is missing`;
    const width = name.length / 2;
    if ((await tail(pack, width)).toString('hex') !== name) return `pack-${name}.pack was rewritten`;
    if ((await tail(idx, width, width)).toString('hex') !== name || (await indexCount(idx)) !== objects)
      return `pack-${name}.idx was rewritten`;
  }
  const now = await refState(dir, gitconfig);
  if (now.refs !== record.refs) return 'its refs changed';
  if (now.head !== record.head) return 'its HEAD changed';
  if (now.config !== record.config) return 'its config changed';
  return null;
}
