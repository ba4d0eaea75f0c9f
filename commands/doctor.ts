import { type Command, Option } from 'commander';
import type { DoctorFlags } from '../src/doctor/command.ts';
import { oneOf } from '../src/options/parsers.ts';
import { RUNTIME_KINDS } from '../src/rollout/runtime/types.ts';
import { addFlags, BACKEND_FLAGS, jsonFlag, PROBE_BACKEND_FLAGS, type Report, toOption } from './flags.ts';

export function defineDoctor(program: Command, report: Report): void {
  const cmd = program
    .command('doctor')
    .description(
      "check an inference server's set-up before a run (model, token ids, tool calling), or that a runtime works here",
    )
    .option('--wait', 'wait for a server that is still starting, up to --backend-timeout, with a countdown')
    .addOption(toOption(jsonFlag('the set-up report')))
    .addOption(
      new Option(
        '--runtime <kind>',
        'check that this runtime works here (sandbox: bubblewrap and which limits apply)',
      ).argParser(oneOf(RUNTIME_KINDS)),
    )
    .option('--network <name>', 'with --runtime sandbox: the network a run uses (none or host)')
    .option(
      '--cgroup-parent <dir>',
      'with --runtime sandbox: the delegated cgroup v2 directory a run would use',
    )
    .addHelpText(
      'after',
      `
Exits 0 when what was checked is ready, 4 when it is not (the report names the flag to add or the fix).

Examples:
  polar doctor --backend vllm --backend-url http://127.0.0.1:8000/v1 --model Qwen/Qwen3.5-4B
  polar doctor --backend sglang --backend-url http://127.0.0.1:30000/v1 --wait --json
  polar doctor --runtime sandbox`,
    );
  // only the backend flags that mean something for a probe (no --max-tokens, --seed, --skip-backend-check)
  addFlags(cmd, BACKEND_FLAGS, { only: PROBE_BACKEND_FLAGS }).action(async (flags: DoctorFlags) => {
    const { doctorCommand } = await import('../src/doctor/command.ts');
    report(await doctorCommand(flags));
  });
}
