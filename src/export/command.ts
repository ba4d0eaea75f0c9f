/** `polar export`: typed flags in, the export (src/export/export.ts), its result out. */
import { EXIT } from '../errors.ts';
import { onStopSignals } from '../util/interrupt.ts';
import { log } from '../util/log.ts';
import { plural } from '../util/plural.ts';
import { runExport } from './export.ts';

/** `polar export` flags after parsing (commands/export.ts). */
export interface ExportFlags {
  onnx: string;
  quantize?: 'int8';
  tokenizer?: string;
  python?: string;
  opset?: number;
  json?: boolean;
  /** -q: no progress or result line on stderr (warnings and errors still show) */
  quiet?: boolean;
  overwrite?: boolean;
}

/** The body of `polar export`: the export, its result on stdout (--json) and one line on stderr. */
export async function exportCommand(checkpoint: string, flags: ExportFlags): Promise<number> {
  const { json, quiet, ...request } = flags;
  if (quiet) log.configure({ quiet: true });
  // SIGINT, SIGTERM and SIGHUP alike: the exporter stops; the output folder is left as it was
  const interrupt = onStopSignals('stopping the export (the output folder is left as it was)');
  let result: Awaited<ReturnType<typeof runExport>>;
  try {
    result = await runExport({ checkpoint, ...request, signal: interrupt.signal });
  } finally {
    interrupt.dispose();
  }
  if (json) process.stdout.write(`${JSON.stringify(result)}\n`);
  const sizes = Object.entries(result.sizes)
    .map(([f, b]) => `${f} ${(b / 2 ** 20).toFixed(1)} MiB`)
    .join(', ');
  log.info(
    `exported ${result.source} to ${result.dir} (${result.model_type}, ${plural(result.layers, 'layer')}, ${sizes})`,
  );
  return EXIT.ok;
}
