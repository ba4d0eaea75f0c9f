import { type Command, Option } from 'commander';
import type { CaptureFlags } from '../src/capture/options.ts';
import { PI_APIS } from '../src/harnesses/pi.ts';
import { DEFAULTS, withDefault } from '../src/options/defaults.ts';
import {
  bytes,
  captureFormat,
  keyValue,
  nonNegativeInt,
  oneOf,
  port,
  seconds,
} from '../src/options/parsers.ts';
import {
  addFlags,
  BACKEND_FLAGS,
  harnessFlag,
  jsonFlag,
  PASS_ENV_FLAG,
  QUIET_FLAG,
  type Report,
  toOption,
} from './flags.ts';

export function defineCapture(program: Command, report: Report): void {
  const cmd = program
    .command('capture')
    .description("run a harness behind polar's recording proxy and capture every model call with token ids")
    .argument('<command...>', 'the harness command line, after --')
    .addOption(toOption(harnessFlag('', ' (default: from the command name)')))
    .addOption(
      new Option('--pi-api <api>', `the wire API Pi uses: ${PI_APIS.join(' | ')}`).argParser(oneOf(PI_APIS)),
    )
    .option(
      '-o, --output <file>',
      'capture file (JSONL, appended; default: polar-captures/<time>-<harness>.jsonl)',
    )
    .addOption(toOption(PASS_ENV_FLAG))
    .option('--harness-node <path>', 'node binary for a harness that needs a newer Node (Qwen Code: 22)')
    .addOption(
      withDefault(
        new Option(
          '--format <version>',
          'capture format: v3 (calls as deltas, with the weight versions that sampled them), v2 (the same without them) or v1 (every call whole)',
        ).argParser(captureFormat),
        DEFAULTS.captureFormat,
      ),
    )
    .option('--task-id <id>', 'task id recorded in the session record')
    .addOption(
      new Option('--sample <n>', 'sample index recorded in the session record').argParser(nonNegativeInt),
    )
    .addOption(new Option('--meta <key=value>', 'extra session metadata (repeatable)').argParser(keyValue))
    .addOption(withDefault(new Option('--host <host>', 'address the proxy binds'), DEFAULTS.host))
    .addOption(new Option('--port <port>', 'port the proxy binds (default: ephemeral)').argParser(port))
    .addOption(
      withDefault(
        new Option('--max-body <bytes>', 'largest request body accepted').argParser(bytes),
        DEFAULTS.maxBodyBytes,
      ),
    )
    .addOption(new Option('--timeout <seconds>', 'kill the harness after this long').argParser(seconds))
    .option('--keep-run-dir', 'keep the private harness config dir for inspection', false)
    .addOption(toOption(QUIET_FLAG))
    .addOption(
      toOption(
        jsonFlag(
          'a summary of the capture (its file, calls, failed calls, how the harness ended)',
          "one line, after the harness's own output",
        ),
      ),
    )
    .passThroughOptions()
    .addHelpText(
      'after',
      `
Examples:
  polar capture --backend vllm --backend-url http://127.0.0.1:8000/v1 --model Qwen/Qwen3.5-4B \\
    -o run.jsonl -- codex exec "fix the failing test"
  polar capture -o run.jsonl -- claude -p "explain this repo"
  polar capture --pi-api openai-responses -- pi -p "list the files"`,
    );
  addFlags(cmd, BACKEND_FLAGS).action(async (command: string[], flags: CaptureFlags) => {
    const { captureCommand } = await import('../src/capture/command.ts');
    report(await captureCommand(command, flags));
  });
}
