import type { Command } from 'commander';
import { addBackendFlags } from './shared.ts';

export function defineGym(program: Command): void {
  const cmd = program
    .command('gym')
    .description(
      'serve a NeMo Gym agent server: POST /run runs a harness on a SWE-bench row, grades it, and answers with token ids and the reward',
    )
    .option('--harness <name>', 'codex, claude, pi or generic', 'pi')
    .option(
      '--pi-api <api>',
      'the wire API Pi uses: openai-completions | openai-responses | anthropic-messages',
    )
    .option('--agent-cmd <cmd>', 'command for --harness generic; {prompt} is replaced by the prompt')
    .option(
      '--prompt-template <file>',
      'prompt when a row gives no input text ({{problem_statement}}, {{workdir}})',
    )
    .option('--runtime <kind>', 'local, docker or podman', 'docker')
    .option('--repos <dir>', 'local runtime: DIR/<owner>/<name> git repositories', 'fixtures/swe/repos')
    .option('--image <template>', 'container image override ({instance_id} is replaced)')
    .option('--network <name>', 'container network (default host, so the capture proxy is reachable)')
    .option('--allow-unsandboxed', 'allow --runtime local (the harness runs on this machine)')
    .option('--dataset <path|hub-id>', 'SWE-bench rows that task rows may name by instance_id only')
    .option('--split <name>', 'split of a hub dataset', 'test')
    .option('--out <dir>', 'one folder per rollout: capture, patch, test log', 'runs/gym')
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--port <port>', 'port to bind (0: ephemeral)', '8200')
    .option('--max-rollouts <n>', 'rollouts running at once; the rest wait', '8')
    .option('--max-inflight <n>', 'backend calls in flight at most, over all rollouts', '64')
    .option('--agent-timeout <s>', 'seconds before the harness is killed', '1800')
    .option('--test-timeout <s>', 'seconds before the tests are killed', '1800')
    .option('-q, --quiet', 'no status output', false);
  addBackendFlags(cmd).action(async (flags) => {
    const { gymCommand } = await import('../src/gym/command.ts');
    process.exitCode = await gymCommand(flags);
  });
}
