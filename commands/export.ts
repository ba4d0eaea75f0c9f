import { type Command, InvalidArgumentError, Option } from 'commander';

interface ExportFlags {
  onnx: string;
  quantize?: 'int8';
  tokenizer?: string;
  python?: string;
  opset?: number;
  json?: boolean;
}

const int = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n)) throw new InvalidArgumentError(`not an integer: ${value}`);
  return n;
};

export function defineExport(program: Command): void {
  program
    .command('export')
    .description('write a checkpoint as an ONNX model directory for Transformers.js and --backend embedded')
    .argument('<checkpoint>', 'step-N directory, a polar train --out directory, or tiny:arch=llama,...')
    .requiredOption('--onnx <dir>', 'output model directory (config.json, tokenizer, onnx/model.onnx)')
    .addOption(
      new Option('--quantize <kind>', 'also write onnx/model_quantized.onnx (weight-only int8)').choices([
        'int8',
      ]),
    )
    .option('--tokenizer <dir>', "tokenizer files (default: the checkpoint's, else the Qwen3 tokenizer)")
    .option('--python <path>', 'Python with torch (default: $POLAR_PYTHON, python3, /usr/bin/python3)')
    .option('--opset <n>', 'ONNX opset (default 17)', int)
    .option('--json', 'print the result as JSON on stdout')
    .action(async (checkpoint: string, flags: ExportFlags) => {
      const { runExport } = await import('../src/export/index.ts');
      const { log } = await import('../src/util/log.ts');
      const result = await runExport({
        checkpoint,
        onnx: flags.onnx,
        quantize: flags.quantize,
        tokenizer: flags.tokenizer,
        python: flags.python,
        opset: flags.opset,
      });
      if (flags.json) process.stdout.write(`${JSON.stringify(result)}\n`);
      const sizes = Object.entries(result.sizes)
        .map(([f, b]) => `${f} ${(b / 2 ** 20).toFixed(1)} MiB`)
        .join(', ');
      log.info(
        `exported ${result.source} to ${result.dir} (${result.model_type}, ${result.layers} layers, ${sizes})`,
      );
    });
}
