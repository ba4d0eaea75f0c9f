/**
 * Reads what --report-to wrote with the trackers' own readers: TensorBoard's EventAccumulator (the reader
 * TensorBoard's own server uses) and, for W&B, `wandb leet inspect`, wandb 0.30's reader of a run's
 * .wandb transaction log (wandb/cli/leet.py: "prints the records as text" when stdout is not a terminal;
 * each record in protobuf text format, a history record's items as `nested_key: "K"` / `value_json: "V"`).
 * And a watch on the trackers' imports: a sitecustomize that records every Python process's import of
 * tensorboard or wandb (a run without --report-to must make none; with it, only the writer makes them).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';

/** Whether `python` can import `module` (a package whose own dependencies are missing cannot). */
export async function canImport(python: string, module: string): Promise<boolean> {
  const r = await execa(python, ['-c', `import ${module}`], { reject: false, timeout: 120_000 });
  return r.exitCode === 0;
}

const READ_SCALARS = `
import json, logging, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
logging.getLogger("tensorboard").setLevel(logging.ERROR)
acc = EventAccumulator(sys.argv[1])
acc.Reload()
print(json.dumps({t: [[e.step, e.value] for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}))
`;

/** Every scalar tag of a TensorBoard log directory: [step, value] pairs in the reader's order. */
export async function tensorboardScalars(
  python: string,
  dir: string,
): Promise<Record<string, Array<[number, number]>>> {
  const r = await execa(python, ['-c', READ_SCALARS, dir], { timeout: 120_000 });
  return JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '{}');
}

/** The .wandb transaction logs under DIR/wandb/, oldest run folder first (a resumed run writes another). */
export function wandbRunFiles(dir: string): string[] {
  const root = join(dir, 'wandb');
  return readdirSync(root)
    .filter((n) => /^(offline-)?run-\d{8}_\d{6}-[a-z0-9]+$/.test(n))
    .sort()
    .flatMap((n) =>
      readdirSync(join(root, n))
        .filter((f) => f.endsWith('.wandb'))
        .map((f) => join(root, n, f)),
    );
}

/** The history rows of a .wandb file, read by `wandb leet inspect`. */
export async function wandbHistory(python: string, file: string): Promise<Array<Record<string, number>>> {
  const r = await execa(python, ['-m', 'wandb', 'leet', 'inspect', file], { timeout: 120_000 });
  const rows: Array<Record<string, number>> = [];
  for (const block of r.stdout.split(/^# record \d+: /m)) {
    if (!block.startsWith('history')) continue;
    const row: Record<string, number> = {};
    for (const m of block.matchAll(/(?:nested_)?key: "([^"]+)"\s+value_json: "([^"]*)"/g))
      row[m[1]!] = Number(m[2]);
    rows.push(row);
  }
  return rows;
}

// a meta-path finder first in line for the tracker packages: it finds them where Python's own path finder
// does, and records the execution of each of their modules (an import, with the process's command line);
// a lookup alone (importlib.util.find_spec, as transformers' is_tensorboard_available does) runs nothing
const WATCH_IMPORTS = `import importlib.machinery, json, os, sys
class _PolarTestImportWatch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] not in ("tensorboard", "tensorboardX", "wandb"):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module
        def exec_module(module, _run=run, _name=name):
            with open(os.environ.get("POLAR_TEST_IMPORT_LOG", os.devnull), "a") as fh:
                fh.write(json.dumps({"module": _name, "argv": list(getattr(sys, "orig_argv", sys.argv))}) + "\\n")
            _run(module)
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, _PolarTestImportWatch())
`;

export interface ImportWatch {
  /** the environment that puts the watch into every Python process polar starts */
  env: Record<string, string>;
  /** the tracker modules imported so far, with the command line of the process that imported each */
  imports(): Array<{ module: string; argv: string[] }>;
}

/** A watch on the tracker imports of every Python process that gets `env` (sitecustomize under DIR). */
export async function watchTrackerImports(dir: string): Promise<ImportWatch> {
  const site = join(dir, 'import-watch');
  const logFile = join(dir, 'tracker-imports.jsonl');
  await mkdir(site, { recursive: true });
  await writeFile(join(site, 'sitecustomize.py'), WATCH_IMPORTS);
  const pythonPath = process.env.PYTHONPATH ? `${site}:${process.env.PYTHONPATH}` : site;
  return {
    env: { PYTHONPATH: pythonPath, POLAR_TEST_IMPORT_LOG: logFile },
    imports: () =>
      existsSync(logFile)
        ? readFileSync(logFile, 'utf8')
            .trim()
            .split('\n')
            .map((l) => JSON.parse(l))
        : [],
  };
}
