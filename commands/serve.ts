import type { Command } from 'commander';
import { addBackendFlags } from './shared.ts';

export function defineServe(program: Command): void {
  const cmd = program
    .command('serve')
    .description('run the capture proxy for many concurrent rollouts; sessions come and go over an admin API')
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--port <port>', 'port to bind (0: ephemeral)', '8100')
    .option('--captures <dir>', 'directory for capture files, one per session', 'polar-captures')
    .option('--max-inflight <n>', 'backend calls in flight at most; the rest queue', '64')
    .option(
      '--admin-token <token>',
      'require this bearer token on the admin API (default: $POLAR_ADMIN_TOKEN)',
    )
    .option('-q, --quiet', 'no status output', false)
    .addHelpText(
      'after',
      `
Admin API (JSON):
  POST   /sessions        {harness?, task_id?, sample?, meta?, harness_options?, argv?}
                          -> {id, key, proxy_url, env, unset_env, files, capture}
  GET    /sessions[/:id]  open sessions and their call counts
  DELETE /sessions/:id    [?exit_code=N&status=completed|error|timeout] close and flush its capture
  GET    /status          sessions, requests in flight, backend in flight and queue depth`,
    );
  addBackendFlags(cmd).action(async (flags: Record<string, unknown>) => {
    const { serveCommand } = await import('../src/serve/command.ts');
    process.exitCode = await serveCommand(flags);
  });
}
