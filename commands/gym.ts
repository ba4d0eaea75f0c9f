import { type Command, Option } from 'commander';
import type { GymFlags } from '../src/gym/command.ts';
import { readsConfig } from '../src/options/config.ts';
import { DEFAULTS, withDefault } from '../src/options/defaults.ts';
import { bytes, port, positiveInt } from '../src/options/parsers.ts';
import {
  addFlags,
  BACKEND_FLAGS,
  CONFIG_FLAG,
  GRADER_FLAG,
  GRADING_FLAGS,
  harnessFlag,
  JUDGE_FLAGS,
  QUIET_FLAG,
  type Report,
  RUNTIME_FLAGS,
  severalBackendUrls,
  TRAINING_TAMPERING,
  toOption,
} from './flags.ts';

export function defineGym(program: Command, report: Report): void {
  const cmd = program
    .command('gym')
    .description(
      'serve a NeMo Gym agent server: POST /run runs a harness on a SWE-bench row, grades it, and answers with token ids and the reward',
    )
    .addOption(toOption({ ...harnessFlag(), default: DEFAULTS.gymHarness }))
    .option('--agent-cmd <cmd>', 'command for --harness generic; {prompt} is replaced by the prompt')
    .option(
      '--prompt-template <file>',
      'prompt when a row gives no input text ({{problem_statement}}, {{workdir}})',
    )
    .option('--dataset <path|hub-id>', 'SWE-bench rows that task rows may name by instance_id only')
    .addOption(
      toOption({
        ...GRADER_FLAG,
        help: "polar, judge (a model with --rubric), or a verifier command that reads the rollout as JSON on stdin and prints a reward in [0, 1] (see polar eval; a --dataset row's `grader` field wins)",
      }),
    )
    .addOption(withDefault(new Option('--split <name>', 'split of a hub dataset'), DEFAULTS.split))
    .addOption(
      withDefault(
        new Option('--out <dir>', 'one folder per rollout: capture, patch, test log'),
        DEFAULTS.gymOut,
      ),
    )
    .addOption(withDefault(new Option('--host <host>', 'address to bind'), DEFAULTS.host))
    .addOption(
      withDefault(
        new Option('--port <port>', 'port to bind (0: ephemeral)').argParser(port),
        DEFAULTS.gymPort,
      ),
    )
    .addOption(
      withDefault(
        new Option('--max-rollouts <n>', 'rollouts running at once; the rest wait').argParser(positiveInt),
        DEFAULTS.maxRollouts,
      ),
    )
    .addOption(
      withDefault(
        new Option(
          '--max-inflight <n>',
          'backend calls in flight at most per inference server, over all rollouts',
        ).argParser(positiveInt),
        DEFAULTS.maxInflight,
      ),
    )
    .option(
      '--token <token>',
      'bearer token every route but /health requires (default: $POLAR_GYM_TOKEN, else a fresh one, printed)',
    )
    .option(
      '--no-auth',
      'serve without a token (for callers that send no Authorization header, such as NeMo Gym; keep it on loopback)',
    )
    .option(
      '--trust-row-commands',
      "take a row's own commands, image and environment fields (test_cmd, eval_script, grader, image, python, pip_packages, pre_install, install; src/rollout/row-trust.ts): without it such a row is refused",
    )
    .addOption(
      withDefault(
        new Option('--max-body <bytes>', 'largest request body (a task row, verify responses)').argParser(
          bytes,
        ),
        DEFAULTS.gymMaxBodyBytes,
      ),
    )
    .option(
      '--dry-run',
      "check flags, harness, runtime and dataset, then exit 0 without listening (NeMo Gym's dry_run)",
    )
    .addOption(toOption(QUIET_FLAG));
  cmd.addHelpText(
    'after',
    `
Examples:
  polar gym --harness pi --backend vllm --backend-url http://127.0.0.1:8000/v1 --model Qwen/Qwen3.5-4B \\
    --dataset princeton-nlp/SWE-bench_Verified --runtime docker --port 8200
  polar gym --harness pi --backend nemo-rl --model Qwen/Qwen3-4B --runtime docker --no-auth \\
    --backend-url http://10.0.0.5:41231/v1,http://10.0.0.6:41231/v1
  curl -s localhost:8200/run -d '{"responses_create_params":{"input":"..."},"verifier_metadata":{"instance_id":"..."}}'`,
  );
  addFlags(cmd, RUNTIME_FLAGS);
  // polar gym takes several inference servers (NeMo RL's policy_base_url list): rollouts are spread over them
  addFlags(cmd, BACKEND_FLAGS, {
    change: severalBackendUrls(
      'inference server base URL; several (comma-separated or repeated) spread the rollouts over them, e.g. the policy_base_url list of NeMo RL',
    ),
  });
  addFlags(cmd, JUDGE_FLAGS);
  addFlags(cmd, GRADING_FLAGS, {
    only: ['--reject-test-tampering', '--no-reject-test-tampering'],
    change: TRAINING_TAMPERING,
  });
  cmd.addOption(toOption(CONFIG_FLAG));
  readsConfig(cmd);
  cmd.action(async (flags: GymFlags) => {
    const { gymCommand } = await import('../src/gym/command.ts');
    report(await gymCommand(flags));
  });
}
