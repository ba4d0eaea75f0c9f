import { type Command, Option } from 'commander';
import type { EvalFlags } from '../src/eval/flags.ts';
import { HARNESS_NAMES } from '../src/harnesses/types.ts';
import { readsConfig } from '../src/options/config.ts';
import { DEFAULTS, withDefault } from '../src/options/defaults.ts';
import { floatIn, list, oneOf, positiveInt, shard } from '../src/options/parsers.ts';
import { AGENT_NAMES, BUILTIN_AGENTS } from '../src/rollout/agent-names.ts';
import {
  addFlags,
  BACKEND_FLAGS,
  CLUSTER_FLAGS,
  CONCURRENCY_FLAG,
  CONFIG_FLAG,
  GRADING_FLAGS,
  harnessFlag,
  JUDGE_FLAGS,
  jsonFlag,
  PROMPT_TEMPLATE_FLAG,
  QUIET_FLAG,
  type Report,
  RUNTIME_FLAGS,
  reportFlags,
  severalBackendUrls,
  toOption,
} from './flags.ts';

export function defineEval(program: Command, report: Report): void {
  const cmd = program
    .command('eval')
    .description('score an agent on a SWE-bench-style dataset (pass@1), or produce graded training rollouts')
    .requiredOption(
      '--dataset <path|hub-id>',
      '.jsonl, .json or .parquet in the SWE-bench schema, or a hub id',
    )
    .addOption(withDefault(new Option('--split <name>', 'split of a hub dataset'), DEFAULTS.split))
    .addOption(
      new Option(
        '--agent <name>',
        `a harness run under polar capture (${HARNESS_NAMES.join(' | ')}), or ${BUILTIN_AGENTS.join(' | ')}`,
      ).argParser(oneOf(AGENT_NAMES)),
    )
    // polar eval's old name of --agent for a harness: still works for a release, with a warning
    .addOption(toOption({ ...harnessFlag('deprecated: --agent; '), hidden: true }))
    .option('--agent-cmd <cmd>', 'command for --agent generic; {prompt} is replaced by the prompt')
    .option('--predictions <file>', 'predictions file for --agent predictions')
    .addOption(toOption(PROMPT_TEMPLATE_FLAG))
    .addOption(
      withDefault(
        new Option('--samples <n>', 'samples per instance').argParser(positiveInt),
        DEFAULTS.samples,
      ),
    )
    .addOption(toOption(CONCURRENCY_FLAG))
    .addOption(withDefault(new Option('--out <dir>', 'output folder'), DEFAULTS.evalOut))
    .addOption(new Option('--instances <ids>', 'comma-separated instance ids').argParser(list))
    .addOption(
      new Option('--limit <n>', 'first n instances (after --instances and --shard)').argParser(positiveInt),
    )
    .addOption(
      new Option('--shard <i/n>', 'run the i-th of n shards (1-based, round robin)').argParser(shard),
    )
    .option(
      '--resume',
      'continue the run in --out: skip graded samples, run errored and unfinished ones again',
    )
    .option('--overwrite', 'clear a non-empty --out first (without --resume or --overwrite it is refused)')
    .option('--regrade', 'grade the test logs of the run in --out again, rewriting results and report');
  addFlags(cmd, GRADING_FLAGS, {
    change: {
      '--grader': {
        help: "polar, swebench (the official harness, when installed), judge (a model with --rubric), or a verifier command that reads the rollout as JSON on stdin and prints a reward in [0, 1] (a row's `grader` field wins)",
      },
    },
  })
    .addOption(toOption(jsonFlag('the report')))
    .addOption(
      new Option('--fail-under <fraction>', 'exit 5 when pass@1 is below this').argParser(
        floatIn(0, 1, { what: 'a fraction between 0 and 1 (for example 0.25)' }),
      ),
    )
    .option('--keep-envs', "keep the environments' folders of the local and sandbox runtimes (debugging)")
    .addOption(
      new Option(
        '--merge <dirs...>',
        'merge the --out folders of a sharded run (--shard i/n) into --out (refuses overlapping or missing shards)',
      ),
    )
    .addHelpText(
      'after',
      `
Examples:
  polar eval --dataset fixtures/swe/mini.jsonl --agent gold --out runs/gold
  polar eval --dataset princeton-nlp/SWE-bench_Verified --agent codex --backend vllm \\
    --backend-url http://127.0.0.1:8000/v1 --model Qwen/Qwen3.5-4B --samples 4 --out runs/eval-1
  polar eval ... --out runs/eval-1 --resume      # after Ctrl-C: graded samples are kept, the rest run
  polar eval ... --cluster ray=10.0.0.1:6379 --out runs/eval-1   # one Ray task per sample (docs/cluster.md)`,
    )
    .addOption(toOption(QUIET_FLAG));
  addFlags(cmd, RUNTIME_FLAGS);
  addFlags(cmd, BACKEND_FLAGS, {
    change: severalBackendUrls(
      'inference server base URL; several (comma-separated or repeated): each sample uses one, the least loaded',
    ),
  });
  addFlags(cmd, CLUSTER_FLAGS);
  addFlags(cmd, JUDGE_FLAGS);
  addFlags(cmd, reportFlags("the report's figures (pass@1, pass@k, outcomes, rewards, time per sample)"));
  cmd.addOption(toOption(CONFIG_FLAG));
  readsConfig(cmd);
  cmd.action(async (flags: EvalFlags) => {
    const { evalCommand } = await import('../src/eval/command.ts');
    report(await evalCommand(flags));
  });
}
