/**
 * Writes src/train/worker/polar_train/schema.json from src/train/options.ts and src/train/schema.ts
 * (training defaults, enums, checkpoint file names, the options' and the worker events' JSON Schema):
 * `node --import tsx scripts/gen-train-schema.ts`. test/unit/train/schema.test.ts fails when the
 * checked-in file is out of date.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { workerSchemaText } from '../src/train/schema.ts';

export const SCHEMA_JSON = fileURLToPath(
  new URL('../src/train/worker/polar_train/schema.json', import.meta.url),
);

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  writeFileSync(SCHEMA_JSON, workerSchemaText());
  // in the repository's JSON style, so that `biome check .` passes on the generated file
  const biome = fileURLToPath(new URL('../node_modules/.bin/biome', import.meta.url));
  const r = spawnSync(biome, ['format', '--write', SCHEMA_JSON], { stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
  process.stdout.write(`wrote ${SCHEMA_JSON}\n`);
}
