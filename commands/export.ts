import { type Command, Option } from 'commander';
import { UsageError } from '../src/errors.ts';
import type { ExportFlags } from '../src/export/command.ts';
import { renamedFlag } from '../src/options/output.ts';
import { intIn, oneOf } from '../src/options/parsers.ts';
import { log } from '../src/util/log.ts';
import { jsonFlag, PYTHON_FLAG, QUIET_FLAG, type Report, toOption } from './flags.ts';

export function defineExport(program: Command, report: Report): void {
  program
    .command('export')
    .description('write a checkpoint as an ONNX model directory for Transformers.js and --backend embedded')
    .argument('<checkpoint>', 'step-N directory, a polar train --out directory, or tiny:arch=llama,...')
    .option('--out <dir>', 'output model directory (config.json, tokenizer, onnx/model.onnx) (required)')
    .addOption(new Option('--onnx <dir>', 'deprecated: --out').hideHelp())
    .addOption(
      new Option('--quantize <kind>', 'also write onnx/model_quantized.onnx (weight-only int8)').argParser(
        oneOf(['int8'] as const),
      ),
    )
    .option('--tokenizer <dir>', "tokenizer files (default: the checkpoint's, else the Qwen3 tokenizer)")
    .addOption(toOption(PYTHON_FLAG))
    .addOption(new Option('--opset <n>', 'ONNX opset (default: 17)').argParser(intIn(14, 20)))
    .option('--overwrite', 'replace an --out folder that holds something other than a previous export')
    .addOption(toOption(jsonFlag('the result')))
    .addOption(toOption(QUIET_FLAG))
    .addHelpText(
      'after',
      `
Examples:
  polar export runs/train/step-50 --out runs/train/step-50-onnx
  polar export runs/train --out model-onnx --quantize int8   # the run's latest checkpoint`,
    )
    .action(
      async (checkpoint: string, flags: Omit<ExportFlags, 'onnx'> & { out?: string; onnx?: string }) => {
        const out = renamedFlag(
          { current: flags.out, old: flags.onnx },
          { current: '--out', old: '--onnx' },
          (m) => log.warn(m),
        );
        if (!out) throw new UsageError('polar export needs --out DIR', 'the model directory to write');
        const { out: _out, ...rest } = flags;
        const { exportCommand } = await import('../src/export/command.ts');
        report(await exportCommand(checkpoint, { ...rest, onnx: out }));
      },
    );
}
