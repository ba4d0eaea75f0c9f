import { type Command, Option } from 'commander';
import type { ExportFlags } from '../src/export/index.ts';
import { intIn, oneOf } from '../src/options/parsers.ts';
import type { Report } from './shared.ts';

export function defineExport(program: Command, report: Report): void {
  program
    .command('export')
    .description('write a checkpoint as an ONNX model directory for Transformers.js and --backend embedded')
    .argument('<checkpoint>', 'step-N directory, a polar train --out directory, or tiny:arch=llama,...')
    .requiredOption('--onnx <dir>', 'output model directory (config.json, tokenizer, onnx/model.onnx)')
    .addOption(
      new Option('--quantize <kind>', 'also write onnx/model_quantized.onnx (weight-only int8)').argParser(
        oneOf(['int8'] as const),
      ),
    )
    .option('--tokenizer <dir>', "tokenizer files (default: the checkpoint's, else the Qwen3 tokenizer)")
    .option('--python <path>', 'Python with torch (default: $POLAR_PYTHON, python3, /usr/bin/python3)')
    .addOption(new Option('--opset <n>', 'ONNX opset (default: 17)').argParser(intIn(14, 20)))
    .option('--json', 'print the result as JSON on stdout')
    .action(async (checkpoint: string, flags: ExportFlags) => {
      const { exportCommand } = await import('../src/export/index.ts');
      report(await exportCommand(checkpoint, flags));
    });
}
