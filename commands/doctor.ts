import type { Command } from 'commander';
import { addBackendFlags } from './shared.ts';

export function defineDoctor(program: Command): void {
  const cmd = program
    .command('doctor')
    .description(
      "check an inference server's set-up before a run: model, token ids, tool calling (docs/backends.md)",
    )
    .option(
      '--wait',
      'wait for a server that is still starting, up to --backend-timeout, with a countdown',
      false,
    )
    .option('--json', 'print the report as JSON', false);
  addBackendFlags(cmd).action(async (flags: Record<string, unknown>) => {
    const { doctorCommand } = await import('../src/backends/doctor.ts');
    process.exitCode = await doctorCommand(flags);
  });
}
