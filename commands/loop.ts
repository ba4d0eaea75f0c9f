import { type Command, Option } from 'commander';
import { HARNESS_NAMES } from '../src/harnesses/types.ts';
import type { LoopFlags } from '../src/loop/command.ts';
import { readsConfig } from '../src/options/config.ts';
import {
  DEFAULTS,
  OVERDUE_POLICIES,
  PAUSE_MODES,
  WEIGHT_SYNC_CHOICES,
  withDefault,
} from '../src/options/defaults.ts';
import { hostMaybePort, nonNegativeInt, oneOf, positiveInt } from '../src/options/parsers.ts';
import { trainOption } from '../src/train/options.ts';
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
  OVERLONG_BUFFER_FLAG,
  overlongFlag,
  PROMPT_TEMPLATE_FLAG,
  QUIET_FLAG,
  type Report,
  RUNTIME_FLAGS,
  reportFlags,
  severalBackendUrls,
  TRAINING_TAMPERING,
  toOption,
} from './flags.ts';

export function defineLoop(program: Command, report: Report): void {
  const cmd = program
    .command('loop')
    .description('the whole RL loop: rollouts -> build -> train -> publish new weights -> rollouts')
    .requiredOption('--train-set <path>', 'tasks to train on (SWE-bench schema: .jsonl, .json, .parquet)')
    .option('--eval-set <path>', 'held-out tasks, evaluated every --eval-every steps')
    .addOption(
      toOption({
        flags: '--agent <name>',
        help: `the harness the rollouts run under polar capture: ${HARNESS_NAMES.join(' | ')} (required)`,
        parse: oneOf(HARNESS_NAMES),
      }),
    )
    // the old name of --agent (polar eval's too): still works for a release, with a warning
    .addOption(toOption({ ...harnessFlag('deprecated: --agent; '), hidden: true }))
    .addOption(toOption(PROMPT_TEMPLATE_FLAG))
    .option('--train-model <path|id>', 'checkpoint training starts from (default: --model)')
    .addOption(
      withDefault(
        new Option('--group-size <n>', 'samples per task (the GRPO group)').argParser(positiveInt),
        DEFAULTS.groupSize,
      ),
    )
    .addOption(
      withDefault(
        new Option('--tasks-per-step <n>', 'tasks per step').argParser(positiveInt),
        DEFAULTS.tasksPerStep,
      ),
    )
    .addOption(withDefault(new Option('--steps <n>', 'steps to run').argParser(positiveInt), DEFAULTS.steps))
    .addOption(
      withDefault(
        new Option('--eval-every <n>', 'held-out eval every n steps (0: never)').argParser(nonNegativeInt),
        DEFAULTS.evalEvery,
      ),
    )
    .addOption(
      withDefault(
        new Option(
          '--max-staleness <k>',
          'rollouts run on while a step trains; a sample is trained at most k policy versions after the one that sampled it (0: strict alternation)',
        ).argParser(nonNegativeInt),
        DEFAULTS.maxStaleness,
      ),
    )
    .addOption(
      withDefault(
        new Option(
          '--overdue <policy>',
          'with --max-staleness >= 1, a group still running that the bound cannot carry to a later step: wait (the step waits for it) or drop (the step trains without it; it is cancelled and its task launched afresh: biased against long tasks)',
        ).argParser(oneOf(OVERDUE_POLICIES)),
        DEFAULTS.overdue,
      ),
    )
    .addOption(
      withDefault(
        new Option(
          '--oversample <n>',
          'with --overdue drop, n groups run beyond those the staleness bound lets the next steps train; each step trains the first complete groups and what goes stale is dropped (less waiting for the long tail, more slot time spent)',
        ).argParser(nonNegativeInt),
        DEFAULTS.oversample,
      ),
    )
    .requiredOption('--out <dir>', 'run directory (run/step-N/...)')
    .addOption(toOption(CONCURRENCY_FLAG))
    .option(
      '--reload-cmd <cmd>',
      'command that restarts the server on {checkpoint}; polar then waits until it answers (the fallback of a server that cannot take weights in place)',
    )
    .addOption(
      withDefault(
        new Option(
          '--weight-sync <how>',
          'how full weights reach a running vLLM or SGLang: auto (in place by the path the server offers: vLLM its --weight-transfer-config backend, SGLang from disk; else --reload-cmd), disk, nccl, or restart (--reload-cmd)',
        ).argParser(oneOf(WEIGHT_SYNC_CHOICES)),
        DEFAULTS.weightSync,
      ),
    )
    .addOption(
      withDefault(
        new Option(
          '--weight-sync-pause <mode>',
          'what an in-place update does to the calls in flight: wait (they finish on the old weights first), keep (they go on with the new ones) or abort (they are cut and sent again)',
        ).argParser(oneOf(PAUSE_MODES)),
        DEFAULTS.weightSyncPause,
      ),
    )
    .addOption(
      new Option(
        '--weight-sync-address <host[:port]>',
        "with --weight-sync nccl: this machine's address as the server's workers reach it, for the group's rendezvous (default 127.0.0.1 and a free port)",
      ).argParser(hostMaybePort),
    )
    .option('--train-config <file>', 'train.json for polar train')
    .addOption(
      withDefault(
        new Option(
          '--train-nodes <n>',
          "nodes of the --cluster each step's training runs on (srun or a Ray placement group, torchrun on each; docs/cluster.md)",
        ).argParser(positiveInt),
        DEFAULTS.trainNodes,
      ),
    );
  // polar train's options the loop passes on (src/train/options.ts): unset, train.json or train's default applies
  for (const option of [
    ...trainOption('device', 'training device: cuda | cpu'),
    ...trainOption('lora', 'train LoRA adapters instead of all weights'),
    ...trainOption('lr', 'learning rate'),
  ])
    cmd.addOption(option);
  addFlags(cmd, GRADING_FLAGS, { change: TRAINING_TAMPERING })
    .addOption(toOption(overlongFlag()))
    .addOption(toOption(OVERLONG_BUFFER_FLAG))
    .addOption(
      withDefault(
        new Option(
          '--dynamic-sampling <n>',
          "up to n extra rounds of the training set's next tasks while fewer groups than --tasks-per-step have rewards that differ (DAPO); uniform groups are then not trained on",
        ).argParser(nonNegativeInt),
        DEFAULTS.dynamicSampling,
      ),
    )
    .option('--resume', 'continue the run in --out after its last finished step', false)
    .addOption(toOption(QUIET_FLAG))
    .addOption(
      toOption(
        jsonFlag(
          "a summary of the run (its out folder, last checkpoint, every step's step.json)",
          'one line at the end',
        ),
      ),
    );
  addFlags(cmd, reportFlags("the trainer's steps, each step's rollout figures and rollout health"));
  cmd.addHelpText(
    'after',
    `
Examples:
  polar loop --train-set train.jsonl --eval-set heldout.jsonl --agent pi --backend vllm \\
    --backend-url http://127.0.0.1:8000/v1 --model Qwen/Qwen3.5-4B --reload-cmd './restart-vllm {checkpoint}' \\
    --runtime docker --out runs/loop-1
  polar loop ... --out runs/loop-1 --resume   # continue after the last finished step
  polar loop ... --cluster ray=10.0.0.1:6379 --out runs/loop-1   # each step's rollouts on Ray (docs/cluster.md)
  polar loop ... --cluster slurm --train-nodes 2 --device cuda --out /shared/runs/loop-1   # and its training on 2 nodes`,
  );
  addFlags(cmd, RUNTIME_FLAGS);
  addFlags(cmd, BACKEND_FLAGS, {
    change: severalBackendUrls(
      'inference server base URL; several (comma-separated or repeated): --cluster spreads the rollouts over them, each new checkpoint is published to all',
    ),
  });
  addFlags(cmd, JUDGE_FLAGS);
  addFlags(cmd, CLUSTER_FLAGS).addOption(toOption(CONFIG_FLAG));
  readsConfig(cmd).action(async (flags: LoopFlags) => {
    const { loopCommand } = await import('../src/loop/command.ts');
    report(await loopCommand(flags));
  });
}
