import type { Command } from 'commander';

/** The backend flags every subcommand that talks to a model shares. */
export function addBackendFlags(cmd: Command): Command {
  return cmd
    .option(
      '--backend <kind>',
      'vllm | sglang | openai | tokens | embedded (default: embedded, or vllm with --backend-url)',
    )
    .option('--backend-url <url>', 'inference server base URL, e.g. http://127.0.0.1:8000/v1')
    .option('--model <name>', 'model the backend serves (harness model names all map to it)')
    .option('--api-key <key>', 'key for the backend (default: $POLAR_BACKEND_API_KEY)')
    .option('--tokenizer <dir|hub-id>', 'tokenizer for --backend tokens/embedded (default: the model)')
    .option(
      '--chat-template-kwargs <json>',
      'passed to the chat template, e.g. \'{"enable_thinking":false}\'',
    )
    .option('--temperature <t>', 'sampling temperature when the harness sets none')
    .option('--top-p <p>', 'top-p when the harness sets none')
    .option('--max-tokens <n>', 'max completion tokens when the harness sets none')
    .option('--max-tokens-cap <n>', 'hard cap on completion tokens of every call, whatever the harness asks')
    .option('--backend-timeout <seconds>', 'abandon a backend call after this long', '600')
    .option(
      '--no-require-token-ids',
      'accept backend answers without token ids (records say token_exact: false)',
    );
}

/** The flags of every command that runs a harness on SWE-bench-style tasks (eval, loop, gym). */
export function addRolloutFlags(cmd: Command): Command {
  return cmd
    .option(
      '--pi-api <api>',
      'the wire API Pi uses: openai-completions | openai-responses | anthropic-messages',
    )
    .option('--runtime <kind>', 'local, docker or podman', 'docker')
    .option('--repos <dir>', 'local runtime: DIR/<owner>/<name> git repositories', 'fixtures/swe/repos')
    .option('--image <template>', 'container image override ({instance_id} is replaced)')
    .option('--network <name>', 'container network (default host, so the capture proxy is reachable)')
    .option('--allow-unsandboxed', 'allow a harness to run on this machine with --runtime local')
    .option('--agent-timeout <s>', 'seconds before the harness is killed', '1800')
    .option('--test-timeout <s>', 'seconds before the tests are killed', '1800');
}
