import { type Command, Option } from 'commander';
import { readsConfig } from '../src/options/config.ts';
import { DEFAULTS, withDefault } from '../src/options/defaults.ts';
import { port, positiveInt, seconds } from '../src/options/parsers.ts';
import type { ServeFlags } from '../src/serve/command.ts';
import { log } from '../src/util/log.ts';
import { addFlags, BACKEND_FLAGS, CONFIG_FLAG, QUIET_FLAG, type Report, toOption } from './flags.ts';

export function defineServe(program: Command, report: Report): void {
  const cmd = program
    .command('serve')
    .description('run the capture proxy for many concurrent rollouts; sessions come and go over an admin API')
    .addOption(withDefault(new Option('--host <host>', 'address to bind'), DEFAULTS.host))
    .addOption(
      withDefault(
        new Option('--port <port>', 'port to bind (0: ephemeral)').argParser(port),
        DEFAULTS.servePort,
      ),
    )
    .addOption(
      withDefault(
        new Option('--out <dir>', 'directory for capture files, one per session'),
        DEFAULTS.serveCaptures,
      ),
    )
    .addOption(new Option('--captures <dir>', 'deprecated: --out').hideHelp())
    .addOption(
      withDefault(
        new Option('--max-inflight <n>', 'backend calls in flight at most; the rest queue').argParser(
          positiveInt,
        ),
        DEFAULTS.maxInflight,
      ),
    )
    .option(
      '--admin-token <token>',
      'the bearer token the admin API requires (default: $POLAR_ADMIN_TOKEN, else a fresh one, printed)',
    )
    .addOption(
      withDefault(
        new Option('--max-sessions <n>', 'sessions open at once at most; more are refused (429)').argParser(
          positiveInt,
        ),
        DEFAULTS.maxSessions,
      ),
    )
    .addOption(
      withDefault(
        new Option(
          '--session-idle-timeout <s>',
          'close a session (status timeout) after this long without a call or an admin request',
        ).argParser(seconds),
        DEFAULTS.sessionIdleTimeoutMs,
      ),
    )
    .addOption(toOption(QUIET_FLAG))
    .addHelpText(
      'after',
      `
Admin API (JSON; every request needs "Authorization: Bearer <admin token>"):
  POST   /sessions        {harness?, task_id?, sample?, meta?, harness_options?, argv?}
                          -> {id, key, proxy_url, env, unset_env, files, capture}
  GET    /sessions[/:id]  open sessions and their call counts
  DELETE /sessions/:id    [?exit_code=N&status=completed|error|timeout] close and flush its capture
  GET    /status          sessions, requests in flight, backend in flight and queue depth`,
    );
  cmd.addHelpText(
    'after',
    `
Examples:
  polar serve --backend vllm --backend-url http://127.0.0.1:8000/v1 --model Qwen/Qwen3.5-4B --out captures/
  curl -s -X POST localhost:8100/sessions -d '{"harness":"codex","task_id":"t1"}'`,
  );
  addFlags(cmd, BACKEND_FLAGS).addOption(toOption(CONFIG_FLAG));
  readsConfig(cmd).action(
    async (flags: Omit<ServeFlags, 'captures'> & { out: string; captures?: string }) => {
      // --captures, the old name of --out, still works for a release
      if (flags.captures !== undefined)
        log.warn('--captures is now --out (the old name goes in the next release)');
      const captures = flags.captures ?? flags.out;
      const { serveCommand } = await import('../src/serve/command.ts');
      report(await serveCommand({ ...flags, captures }));
    },
  );
}
