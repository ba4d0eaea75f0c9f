#!/usr/bin/env node
// The house of src/ as drawn from its imports (`node scripts/house.mjs`), read from dependency-cruiser's
// graph of src/ (every import: static, type-only, re-export and dynamic) with the layers declared in
// .dependency-cruiser.cjs. The definitions:
//   - a folder is a top-level entry of src/: a directory (src/rollout/ with all below it) or a file at
//     the root (src/errors.ts, src/cli.ts);
//   - a layer is a folder's place in LAYERS, bottom to top. An import from one folder to another one
//     declared above it points up (UPWARD lists the ones allowed, each with why); one to a folder below,
//     or within a folder, points down;
//   - floors: the folders on the longest chain of imports that point down (the folder graph with the
//     imports that point up left out, which is then acyclic);
//   - circles: the strongly connected components of files (two files or more that reach each other
//     through imports), and which of them span two folders or more; and the circles of the folder graph,
//     with and without the imports UPWARD documents;
//   - with --auto the layers are not read from the configuration but found: the order of the folders
//     that leaves the fewest imports pointing up (exact, over the folders that lie on a folder circle),
//     the house as the imports draw it, for a tree that declares no layers (the tree before issue 44).
// --json prints the figures as JSON; --root DIR draws another checkout (default: this one).
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';

const HERE = resolve(new URL('..', import.meta.url).pathname);

/** The house configuration: the root's own .dependency-cruiser.cjs, else this checkout's. */
export function houseConfig(root) {
  const own = join(root, '.dependency-cruiser.cjs');
  const file = existsSync(own) ? own : join(HERE, '.dependency-cruiser.cjs');
  const require = createRequire(import.meta.url);
  delete require.cache[file];
  return require(file);
}

/**
 * dependency-cruiser's modules of root/src (through its API: its command line refuses Node 20, the API
 * runs on it), validated against the configuration's rules when `validate` is set.
 */
export async function cruiseSrc(root, { validate = false } = {}) {
  const { cruise } = await import('dependency-cruiser');
  const config = houseConfig(root);
  const options = {
    ...config.options,
    baseDir: root,
    ...(validate ? { validate: true, ruleSet: { forbidden: config.forbidden } } : { validate: false }),
  };
  const tsconfig = join(root, 'tsconfig.json');
  let transpile = {};
  if (existsSync(tsconfig)) {
    const { default: extractTSConfig } = await import('dependency-cruiser/config-utl/extract-ts-config');
    options.tsConfig = { fileName: tsconfig };
    transpile = { tsConfig: extractTSConfig(tsconfig) };
  } else delete options.tsConfig;
  const result = await cruise(['src'], options, {}, transpile);
  if (result.exitCode !== 0 && typeof result.output === 'string') throw new Error(result.output);
  return { output: result.output, config };
}

/** `src/rollout/run/run.ts` -> `rollout`; `src/errors.ts` -> `errors.ts`. */
export const folderOf = (path) => path.split('/')[1];

/** The file graph of src/: file -> the src/ files it imports. */
export function fileGraph(modules) {
  const edges = new Map();
  for (const m of modules) {
    if (!m.source.startsWith('src/')) continue;
    const to = edges.get(m.source) ?? new Set();
    for (const d of m.dependencies) if (d.resolved.startsWith('src/')) to.add(d.resolved);
    edges.set(m.source, to);
    for (const t of to) if (!edges.has(t)) edges.set(t, new Set());
  }
  return edges;
}

/** Tarjan's strongly connected components of a graph (Map node -> Set of nodes). */
export function components(edges) {
  const index = new Map();
  const low = new Map();
  const stack = [];
  const on = new Set();
  const out = [];
  let next = 0;
  const visit = (v) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    on.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
    }
    if (low.get(v) === index.get(v)) {
      const c = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        c.push(w);
      } while (w !== v);
      out.push(c.sort());
    }
  };
  for (const v of [...edges.keys()].sort()) if (!index.has(v)) visit(v);
  return out;
}

/** The folder graph: folder -> folder -> the file imports between them. */
export function folderGraph(files) {
  const graph = new Map();
  for (const [from, tos] of files) {
    const a = folderOf(from);
    if (!graph.has(a)) graph.set(a, new Map());
    for (const to of tos) {
      const b = folderOf(to);
      if (!graph.has(b)) graph.set(b, new Map());
      if (a === b) continue;
      const imports = graph.get(a).get(b) ?? [];
      imports.push(`${from} -> ${to}`);
      graph.get(a).set(b, imports);
    }
  }
  return graph;
}

/**
 * The order of the folders (bottom to top) with the fewest file imports pointing up: folders on no folder
 * circle take their place from the circles' order; within the folder circles, an exact search over
 * subsets (the circle of the tree before issue 44 had 20 folders: 2^20 states).
 */
export function autoLayers(folders) {
  const simple = new Map([...folders].map(([a, tos]) => [a, new Set(tos.keys())]));
  const cyclic = components(simple).filter((c) => c.length > 1);
  const order = [];
  for (const circle of cyclic) {
    const n = circle.length;
    if (n > 24) throw new Error(`--auto: a folder circle of ${n} folders is too large to order exactly`);
    const weight = circle.map((a) => circle.map((b) => folders.get(a).get(b)?.length ?? 0));
    const best = new Int32Array(1 << n).fill(2 ** 30);
    const last = new Int8Array(1 << n).fill(-1);
    best[0] = 0;
    for (let set = 0; set < 1 << n; set++) {
      if (best[set] === 2 ** 30) continue;
      for (let v = 0; v < n; v++) {
        if (set & (1 << v)) continue;
        // v goes on top of `set`: every import from a folder in `set` to v points up
        let up = 0;
        for (let u = 0; u < n; u++) if (set & (1 << u)) up += weight[u][v];
        const grown = set | (1 << v);
        if (best[set] + up < best[grown]) {
          best[grown] = best[set] + up;
          last[grown] = v;
        }
      }
    }
    const mine = [];
    for (let set = (1 << n) - 1; set; set &= ~(1 << last[set])) mine.unshift(circle[last[set]]);
    order.push(mine);
  }
  // the rest, and each circle as a block, in an order where every import between blocks points down
  const blockOf = new Map();
  order.forEach((block, i) => {
    for (const f of block) blockOf.set(f, `circle${i}`);
  });
  const block = (f) => blockOf.get(f) ?? f;
  const placed = [];
  const done = new Set();
  const place = (b, members) => {
    if (done.has(b)) return;
    done.add(b);
    for (const f of members) for (const to of folders.get(f).keys()) if (block(to) !== b) placeFolder(to);
    placed.push(...members);
  };
  const placeFolder = (f) => {
    const b = block(f);
    place(b, b === f ? [f] : order[Number(b.slice(6))]);
  };
  for (const f of [...folders.keys()].sort()) placeFolder(f);
  return placed.map((f) => [f]);
}

/** The figures of a house: floors, circles, imports pointing up, with their details. */
export function drawHouse(modules, layers, upward = []) {
  const files = fileGraph(modules);
  const folders = folderGraph(files);
  const level = new Map();
  layers.forEach((names, i) => {
    for (const name of names) level.set(name, i);
  });
  const undeclared = [...folders.keys()].filter((f) => !level.has(f)).sort();
  const allowed = new Set(upward.map((u) => `${u.from} -> ${u.to}`));
  const up = [];
  const down = new Map([...folders.keys()].map((f) => [f, new Set()]));
  for (const [a, tos] of folders) {
    for (const [b, imports] of tos) {
      const pointsUp = level.has(a) && level.has(b) && level.get(b) > level.get(a);
      if (pointsUp) for (const i of imports) up.push({ import: i, allowed: allowed.has(i) });
      else down.get(a).add(b);
    }
  }
  // floors: the longest chain of folders over the imports that point down (or sideways, unordered)
  const downCircles = components(down).filter((c) => c.length > 1);
  const height = new Map();
  const chainOf = (f, seen = new Set()) => {
    if (height.has(f)) return height.get(f);
    if (seen.has(f)) return [f]; // only with undeclared folders on a circle: cut there
    seen.add(f);
    let best = [];
    for (const to of down.get(f)) {
      const c = chainOf(to, seen);
      if (c.length > best.length) best = c;
    }
    const chain = [f, ...best];
    height.set(f, chain);
    return chain;
  };
  let longest = [];
  for (const f of [...folders.keys()].sort()) {
    const c = chainOf(f);
    if (c.length > longest.length) longest = c;
  }
  const fileCircles = components(files)
    .filter((c) => c.length > 1)
    .map((c) => ({ files: c, folders: [...new Set(c.map(folderOf))].sort() }));
  const simple = new Map([...folders].map(([a, tos]) => [a, new Set(tos.keys())]));
  const folderCircles = components(simple).filter((c) => c.length > 1);
  // the folder graph without the documented imports that point up: each folder a layer when this is empty
  const kept = new Map(
    [...folders].map(([a, tos]) => [
      a,
      new Set([...tos].filter(([, imports]) => imports.some((i) => !allowed.has(i))).map(([b]) => b)),
    ]),
  );
  const undocumentedCircles = components(kept).filter((c) => c.length > 1);
  return {
    files: files.size,
    imports: [...files.values()].reduce((n, s) => n + s.size, 0),
    folders: folders.size,
    floors: longest.length,
    longestChain: longest,
    circles: fileCircles,
    circlesAcrossFolders: fileCircles.filter((c) => c.folders.length > 1).length,
    folderCircles,
    undocumentedCircles,
    up,
    upNotAllowed: up.filter((u) => !u.allowed).length,
    undeclared,
    downCircles,
    layers,
  };
}

function format(h) {
  const lines = [];
  lines.push(`src/: ${h.files} files, ${h.imports} imports between them, ${h.folders} folders`);
  lines.push(`floors: ${h.floors} (${h.longestChain.join(' -> ')})`);
  lines.push(
    `circles: ${h.circles.length} (${h.circlesAcrossFolders} across folders); folder circles: ${h.folderCircles.length} (${h.undocumentedCircles.length} without the documented imports up)`,
  );
  for (const c of h.circles)
    lines.push(`  ${c.folders.length > 1 ? 'ACROSS ' : ''}${c.files.length} files: ${c.files.join(' ')}`);
  for (const c of h.folderCircles) lines.push(`  folder circle: ${c.join(' ')}`);
  for (const c of h.undocumentedCircles)
    lines.push(`  folder circle without the documented imports: ${c.join(' ')}`);
  lines.push(`imports pointing up: ${h.up.length} (${h.upNotAllowed} not documented in UPWARD)`);
  for (const u of h.up) lines.push(`  ${u.allowed ? 'documented: ' : 'UNDOCUMENTED '}${u.import}`);
  if (h.undeclared.length) lines.push(`folders in no layer: ${h.undeclared.join(' ')}`);
  lines.push(`layers, bottom to top: ${h.layers.map((l) => l.join('+')).join(' < ')}`);
  return lines.join('\n');
}

async function main() {
  const args = process.argv.slice(2);
  const rootAt = args.indexOf('--root');
  const root = rootAt >= 0 ? resolve(args[rootAt + 1]) : HERE;
  const { output, config } = await cruiseSrc(root);
  const modules = output.modules;
  const auto = args.includes('--auto');
  const layers = auto ? autoLayers(folderGraph(fileGraph(modules))) : config.layers;
  const house = drawHouse(modules, layers, auto ? [] : config.upward);
  if (args.includes('--json')) console.log(JSON.stringify(house, null, 2));
  else console.log(format(house));
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(new URL(import.meta.url).pathname)) await main();
