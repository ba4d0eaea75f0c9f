#!/usr/bin/env node
// The shape check (`npm run check:shape`): the target shape of the codebase, as numbers.
//   - no file in src/ (TypeScript and Python) over 450 lines
//   - no TypeScript function, method, accessor, constructor or arrow in src/ over 120 lines (a nested
//     function counts inside its parent too; lines from the declaration's first token to its last)
//   - the house of src/ (dependency-cruiser's rules in .dependency-cruiser.cjs, over every import: static,
//     type-only, re-export, dynamic): no import circle through two top-level folders, no import to a
//     folder of a layer above (but the UPWARD ones, each documented) or beside, every folder in LAYERS
//     (src/proxy/ below src/capture/: the proxy imports nothing of the recorder)
// Lists every offender as `file:line name length` (an import: `from:- to rule`) and exits 1 when there is
// any; with --report it lists them and exits 0. --root DIR checks another checkout (default: this one;
// its own .dependency-cruiser.cjs, else this one's). Plain Node; parses with the `typescript` package the
// project already has, and reads the import graph with `dependency-cruiser` (scripts/house.mjs).
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { cruiseSrc, drawHouse } from './house.mjs';

const MAX_FILE_LINES = 450;
const MAX_FUNCTION_LINES = 120;

function parseArgs(argv) {
  const options = { report: false, root: resolve(new URL('..', import.meta.url).pathname) };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--report') options.report = true;
    else if (arg === '--root' && argv[i + 1] !== undefined) options.root = resolve(argv[++i]);
    else if (arg === '--help' || arg === '-h') {
      console.log('usage: node scripts/check-shape.mjs [--report] [--root DIR]');
      process.exit(0);
    } else {
      console.error(`check-shape: unknown argument ${arg} (usage: [--report] [--root DIR])`);
      process.exit(2);
    }
  }
  return options;
}

/** Every .ts / .mts / .py file under dir, sorted, skipping dot folders, node_modules and __pycache__. */
function sourceFiles(dir, out = []) {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return out;
  }
  for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    if (entry.name.startsWith('.') || entry.name === 'node_modules' || entry.name === '__pycache__') continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) sourceFiles(path, out);
    else if (/\.(m?ts|py)$/.test(entry.name) && !entry.name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

function lineCount(text) {
  if (text.length === 0) return 0;
  const lines = text.split('\n').length;
  return text.endsWith('\n') ? lines - 1 : lines;
}

const propertyName = (name) =>
  name && (ts.isIdentifier(name) || ts.isStringLiteral(name) || ts.isPrivateIdentifier(name))
    ? name.text
    : name
      ? name.getText()
      : undefined;

/** A readable name for a function-like node: its own, its variable's or property's, with its class. */
function functionName(node) {
  const owner = (n) => {
    const parent = n.parent;
    return parent && (ts.isClassDeclaration(parent) || ts.isClassExpression(parent)) && parent.name
      ? `${parent.name.text}.`
      : '';
  };
  if (ts.isConstructorDeclaration(node)) return `${owner(node)}constructor`;
  if (ts.isMethodDeclaration(node) || ts.isGetAccessor(node) || ts.isSetAccessor(node)) {
    return `${owner(node)}${propertyName(node.name)}`;
  }
  if (ts.isFunctionDeclaration(node) && node.name) return node.name.text;
  if (ts.isFunctionExpression(node) && node.name) return node.name.text;
  const parent = node.parent;
  if (parent && ts.isVariableDeclaration(parent) && ts.isIdentifier(parent.name)) return parent.name.text;
  if (parent && (ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent))) {
    return `${ts.isPropertyDeclaration(parent) ? owner(parent) : ''}${propertyName(parent.name)}`;
  }
  if (parent && ts.isCallExpression(parent))
    return `<callback of ${parent.expression.getText().slice(0, 40)}>`;
  return ts.isArrowFunction(node) ? '<arrow>' : '<function>';
}

const isFunctionLike = (node) =>
  ts.isFunctionDeclaration(node) ||
  ts.isFunctionExpression(node) ||
  ts.isArrowFunction(node) ||
  ts.isMethodDeclaration(node) ||
  ts.isConstructorDeclaration(node) ||
  ts.isGetAccessor(node) ||
  ts.isSetAccessor(node);

/** Function-likes over the limit. */
function inspectTs(path, text) {
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const functions = [];
  const lineOf = (pos) => source.getLineAndCharacterOfPosition(pos).line + 1;
  const visit = (node) => {
    if (isFunctionLike(node) && node.body) {
      const start = lineOf(node.getStart(source));
      const length = lineOf(node.getEnd()) - start + 1;
      if (length > MAX_FUNCTION_LINES) functions.push({ line: start, name: functionName(node), length });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return functions;
}

/** Runs the size checks over root/src; returns the offenders, per check. */
export function checkShape(root) {
  const src = join(root, 'src');
  const found = { files: [], functions: [] };
  for (const path of sourceFiles(src)) {
    const rel = relative(root, path);
    const text = readFileSync(path, 'utf8');
    const lines = lineCount(text);
    if (lines > MAX_FILE_LINES) found.files.push({ file: rel, line: 1, name: '(file)', length: lines });
    if (path.endsWith('.py')) continue;
    for (const f of inspectTs(path, text)) found.functions.push({ file: rel, ...f });
  }
  return found;
}

/**
 * The house check over root/src: each import that breaks a rule of .dependency-cruiser.cjs (with the
 * circle it closes), and each top-level entry of src/ that LAYERS does not place.
 */
export async function checkGraph(root) {
  const { output, config } = await cruiseSrc(root, { validate: true });
  const offenders = output.summary.violations.map((v) => ({
    file: v.from,
    line: '-',
    name: v.cycle?.length
      ? `${v.to} (circle: ${[v.from, ...v.cycle.map((c) => c.name)].join(' -> ')})`
      : v.to,
    length: v.rule.name,
  }));
  for (const name of drawHouse(output.modules, config.layers, config.upward).undeclared)
    if (!offenders.some((o) => o.length === 'no-undeclared-folder' && o.file.split('/')[1] === name))
      offenders.push({
        file: `src/${name}`,
        line: '-',
        name: '(not in LAYERS)',
        length: 'no-undeclared-folder',
      });
  return offenders;
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const found = checkShape(options.root);
  const sections = [
    [`files in src/ over ${MAX_FILE_LINES} lines`, found.files],
    [`functions in src/ over ${MAX_FUNCTION_LINES} lines`, found.functions],
    ['imports against the house of src/ (.dependency-cruiser.cjs)', await checkGraph(options.root)],
  ];
  let total = 0;
  for (const [title, offenders] of sections) {
    total += offenders.length;
    console.log(`${title}: ${offenders.length}`);
    for (const o of offenders) console.log(`  ${o.file}:${o.line} ${o.name} ${o.length}`);
  }
  if (total === 0) {
    console.log('check-shape: ok');
    return;
  }
  console.log(
    `check-shape: ${total} offender${total === 1 ? '' : 's'}${options.report ? ' (report only)' : ''}`,
  );
  if (!options.report) process.exitCode = 1;
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(new URL(import.meta.url).pathname)) await main();
