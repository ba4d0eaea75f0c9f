import type { Command } from 'commander';
import type { DoctorFlags } from '../src/doctor/command.ts';
import { addBackendFlags, type Report } from './shared.ts';

export function defineDoctor(program: Command, report: Report): void {
  const cmd = program
    .command('doctor')
    .description(
      "check an inference server's set-up before a run: model, token ids, tool calling (docs/backends.md)",
    )
    .option('--wait', 'wait for a server that is still starting, up to --backend-timeout, with a countdown')
    .option('--json', 'print the report as JSON')
    .addHelpText(
      'after',
      `
Exits 0 when the server is ready for polar, 4 when it is not (the report names the server flag to add).

Examples:
  polar doctor --backend vllm --backend-url http://127.0.0.1:8000/v1 --model Qwen/Qwen3.5-4B
  polar doctor --backend sglang --backend-url http://127.0.0.1:30000/v1 --wait --json`,
    );
  addBackendFlags(cmd).action(async (flags: DoctorFlags) => {
    const { doctorCommand } = await import('../src/doctor/command.ts');
    report(await doctorCommand(flags));
  });
}
