import type { Command } from 'commander';
import { addBackendFlags, addRolloutFlags } from './shared.ts';

export function defineGym(program: Command): void {
  const cmd = program
    .command('gym')
    .description(
      'serve a NeMo Gym agent server: POST /run runs a harness on a SWE-bench row, grades it, and answers with token ids and the reward',
    )
    .option('--harness <name>', 'codex, claude, pi or generic', 'pi')
    .option('--agent-cmd <cmd>', 'command for --harness generic; {prompt} is replaced by the prompt')
    .option(
      '--prompt-template <file>',
      'prompt when a row gives no input text ({{problem_statement}}, {{workdir}})',
    )
    .option('--dataset <path|hub-id>', 'SWE-bench rows that task rows may name by instance_id only')
    .option('--split <name>', 'split of a hub dataset', 'test')
    .option('--out <dir>', 'one folder per rollout: capture, patch, test log', 'runs/gym')
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--port <port>', 'port to bind (0: ephemeral)', '8200')
    .option('--max-rollouts <n>', 'rollouts running at once; the rest wait', '8')
    .option('--max-inflight <n>', 'backend calls in flight at most, over all rollouts', '64')
    .option('-q, --quiet', 'no status output', false);
  addBackendFlags(addRolloutFlags(cmd)).action(async (flags) => {
    const { gymCommand } = await import('../src/gym/command.ts');
    process.exitCode = await gymCommand(flags);
  });
}
