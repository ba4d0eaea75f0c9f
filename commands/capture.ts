import type { Command } from 'commander';
import { addBackendFlags } from './shared.ts';

export function defineCapture(program: Command): void {
  const cmd = program
    .command('capture')
    .description("run a harness behind polar's recording proxy and capture every model call with token ids")
    .argument('<command...>', 'the harness command line, after --')
    .option('--harness <name>', 'codex | claude | pi | qwen | generic (default: from the command name)')
    .option(
      '--pi-api <api>',
      'the wire API Pi uses: openai-completions | openai-responses | anthropic-messages',
    )
    .option(
      '--pass-env <name>',
      "another variable of polar's environment the harness may see (repeatable; it gets PATH, HOME, locale, TERM, TMPDIR and proxies)",
      (v: string, prev: string[] = []) => [...prev, v],
    )
    .option('--harness-node <path>', 'node binary for a harness that needs a newer Node (Qwen Code: 22)')
    .option('-o, --output <file>', 'capture file (JSONL, appended)', undefined)
    .option('--task-id <id>', 'task id recorded in the session record')
    .option('--sample <n>', 'sample index recorded in the session record')
    .option('--meta <key=value>', 'extra session metadata (repeatable)', (v: string, prev: string[] = []) => [
      ...prev,
      v,
    ])
    .option('--host <host>', 'address the proxy binds', '127.0.0.1')
    .option('--port <port>', 'port the proxy binds (default: ephemeral)')
    .option('--max-body <bytes>', 'largest request body accepted', String(64 * 1024 * 1024))
    .option('--timeout <seconds>', 'kill the harness after this long')
    .option('--keep-run-dir', 'keep the private harness config dir for inspection', false)
    .option('-q, --quiet', 'no status output from polar', false)
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
  addBackendFlags(cmd);
  cmd.action(async (command: string[], flags: Record<string, unknown>) => {
    const { captureCommand } = await import('../src/capture/command.ts');
    process.exitCode = await captureCommand(command, flags);
  });
}
