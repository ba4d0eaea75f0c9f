/** Flag groups several subcommands share, each flag with its parser (src/options/parsers.ts) and default. */
import { type Command, Option } from 'commander';
import { BACKEND_KINDS } from '../src/backends/kinds.ts';
import { passEnvOption } from '../src/harnesses/env.ts';
import { PI_APIS } from '../src/harnesses/pi.ts';
import { HARNESS_NAMES } from '../src/harnesses/types.ts';
import { DEFAULTS, withDefault } from '../src/options/defaults.ts';
import {
  bytes,
  cluster,
  collect,
  floatIn,
  grader,
  hostAndPort,
  jsonObject,
  keyValue,
  nonNegativeInt,
  oneOf,
  overlongMode,
  positiveInt,
  repeatable,
  reportTargets,
  seconds,
  url,
  urlList,
} from '../src/options/parsers.ts';
import { parseReward } from '../src/options/reward.ts';
import { JUDGE_MODES } from '../src/rollout/judge/types.ts';
import { RUNTIME_KINDS } from '../src/rollout/runtime/types.ts';

/**
 * --python of `polar train` and `polar export`: the candidates in the order findPython (src/train/env.ts)
 * tries them.
 */
export const pythonOption = (): Option =>
  new Option(
    '--python <path>',
    "Python with torch (default: $POLAR_PYTHON, the clone's .venv of npm run setup:python, polar setup's environment, python3, /usr/bin/python3)",
  );

/** --grader (polar, swebench or a verifier command; src/options/parsers.ts `grader`) with its default. */
export const graderOption = (description: string): Option =>
  withDefault(new Option('--grader <kind>', description).argParser(grader), DEFAULTS.grader);

/**
 * --overlong (build and loop: recorded in the trajectories, which polar train applies) with its default;
 * `old`: build's old values of the flag (now --over-max-trace-tokens), accepted with a warning.
 */
export const overlongOption = (old: readonly string[] = []): Option =>
  withDefault(
    new Option(
      '--overlong <mode>',
      'a trace a length limit cut (a call at max tokens, --max-trace-tokens): mask (no loss), penalty (DAPO soft length penalty on the reward, over --overlong-buffer) or keep',
    ).argParser(overlongMode(old)),
    DEFAULTS.overlong,
  );

/** --overlong-buffer: DAPO's L_cache, in tokens below a limit in force */
export const overlongBufferOption = (): Option =>
  withDefault(
    new Option(
      '--overlong-buffer <n>',
      'with --overlong penalty: the tokens below a limit where the penalty starts (DAPO L_cache)',
    ).argParser(positiveInt),
    DEFAULTS.overlongBuffer,
  );

/** --harness, its help naming every harness profile (src/harnesses/types.ts) between `lead` and `tail`. */
export const harnessOption = (lead = '', tail = ''): Option =>
  new Option('--harness <name>', `${lead}${HARNESS_NAMES.join(' | ')}${tail}`).argParser(
    oneOf(HARNESS_NAMES),
  );

/** The backend flags every subcommand that talks to a model shares (typed as BackendFlags), in order. */
function backendFlagOptions(): Option[] {
  return [
    new Option(
      '--backend <kind>',
      `${BACKEND_KINDS.join(' | ')} (default: embedded, or vllm with --backend-url)`,
    ).argParser(oneOf(BACKEND_KINDS)),
    new Option('--backend-url <url>', 'inference server base URL, e.g. http://127.0.0.1:8000/v1').argParser(
      url,
    ),
    new Option(
      '--model <name>',
      `model the backend serves (harness model names all map to it; embedded default: ${DEFAULTS.embeddedModel.shown})`,
    ),
    new Option('--api-key <key>', 'key for the backend (default: $POLAR_BACKEND_API_KEY)'),
    new Option('--tokenizer <dir|hub-id>', 'tokenizer for --backend tokens/embedded (default: the model)'),
    new Option(
      '--chat-template-kwargs <json>',
      'passed to the chat template, e.g. \'{"enable_thinking":false}\'',
    ).argParser(jsonObject),
    new Option('--temperature <t>', 'sampling temperature when the harness sets none').argParser(
      floatIn(0, Number.POSITIVE_INFINITY),
    ),
    new Option('--top-p <p>', 'top-p when the harness sets none').argParser(floatIn(0, 1, { open: 'min' })),
    new Option('--max-tokens <n>', 'max completion tokens when the harness sets none').argParser(positiveInt),
    new Option(
      '--seed <n>',
      'sampling seed (tokens, embedded): call k samples with n + k, so a run at concurrency 1 repeats',
    ).argParser(nonNegativeInt),
    new Option(
      '--max-tokens-cap <n>',
      'hard cap on completion tokens of every call, whatever the harness asks',
    ).argParser(positiveInt),
    withDefault(
      new Option(
        '--backend-timeout <seconds>',
        'abandon a backend call after this long, streaming or not',
      ).argParser(seconds),
      DEFAULTS.backendTimeoutMs,
    ),
    withDefault(
      new Option(
        '--backend-idle-timeout <seconds>',
        'abandon a backend call whose started answer sends nothing for this long',
      ).argParser(seconds),
      DEFAULTS.backendIdleTimeoutMs,
    ),
    new Option(
      '--no-require-token-ids',
      'accept backend answers without token ids (records say token_exact: false)',
    ),
    withDefault(
      new Option(
        '--skip-backend-check',
        'start without probing the server set-up first (model served, token ids, tool calling)',
      ),
      DEFAULTS.skipBackendCheck,
    ),
  ];
}

/**
 * The backend flags a set-up probe reads (`polar doctor`: src/backends/probe.ts and wait.ts): which server
 * and model, the key, the sampling settings a NeMo RL server asserts, how long --wait waits, and whether
 * token ids are required. What only a harness's calls use (max tokens, seed, the chat template, the
 * tokenizer, the idle timeout, skipping the probe) means nothing there.
 */
export const PROBE_BACKEND_FLAGS = [
  '--backend',
  '--backend-url',
  '--model',
  '--api-key',
  '--temperature',
  '--top-p',
  '--backend-timeout',
  '--no-require-token-ids',
] as const;

/** Adds the backend flags (typed as BackendFlags): all of them, or only those named in `only`. */
export function addBackendFlags(cmd: Command, only?: readonly string[]): Command {
  for (const option of backendFlagOptions())
    if (!only || only.includes(option.long ?? '')) cmd.addOption(option);
  return cmd;
}

/** --report-to and its companions (train, loop, eval): typed as ReportFlags (src/options/report.ts). */
export function addReportFlags(cmd: Command, what: string): Command {
  return cmd
    .addOption(
      withDefault(
        new Option(
          '--report-to <trackers>',
          `write ${what} to tensorboard, wandb or both (comma-separated) while the run goes; none: neither`,
        ).argParser(reportTargets),
        DEFAULTS.reportTo,
      ),
    )
    .option('--run-name <name>', "the W&B run's name (default: the --out folder's name)")
    .addOption(new Option('--project <name>', `the W&B project (default: ${DEFAULTS.wandbProject.shown})`))
    .option('--tensorboard-dir <dir>', 'where TensorBoard event files go (default: <out>/tensorboard)');
}

/** The flags of every command that runs a harness on SWE-bench-style tasks (eval, loop, gym): RolloutFlags. */
export function addRolloutFlags(cmd: Command): Command {
  return cmd
    .addOption(passEnvOption())
    .addOption(
      new Option('--pi-api <api>', `the wire API Pi uses: ${PI_APIS.join(' | ')}`).argParser(oneOf(PI_APIS)),
    )
    .addOption(
      withDefault(
        new Option(
          '--runtime <kind>',
          'sandbox (bubblewrap), local (unsandboxed: your rights), docker, podman or apptainer',
        ).argParser(oneOf(RUNTIME_KINDS)),
        DEFAULTS.runtime,
      ),
    )
    .addOption(
      withDefault(
        new Option('--repos <dir>', 'sandbox and local runtimes: DIR/<owner>/<name> git repositories'),
        DEFAULTS.repos,
      ),
    )
    .option(
      '--image <template>',
      'container image override ({instance_id} is replaced; apptainer: also a .sif)',
    )
    .option(
      '--network <name>',
      `${DEFAULTS.containerNetwork.shown} (default: loopback only, the capture proxy through a socket); host (unsafe: every port and the internet); containers: also a network name`,
    )
    .addOption(
      new Option(
        '--network-allow <host:port>',
        'sandbox: also reach this host address, at 127.0.0.1:PORT inside (repeatable; unsafe: a way out)',
      ).argParser(collect(hostAndPort)),
    )
    .option('--allow-unsandboxed', 'allow a harness to run on this machine with --runtime local')
    .addOption(envCacheOption())
    .addOption(envPythonOption())
    .option(
      '--no-envs',
      "sandbox and local runtimes: run the tests in polar's own environment (no environment from the spec)",
    )
    .addOption(
      withDefault(
        new Option('--memory-limit <size>', 'memory of one environment (e.g. 8GiB)').argParser(bytes),
        DEFAULTS.memoryLimit,
      ),
    )
    .addOption(
      withDefault(
        new Option('--pids-limit <n>', 'processes and threads of one environment at once').argParser(
          positiveInt,
        ),
        DEFAULTS.pidsLimit,
      ),
    )
    .addOption(
      withDefault(
        new Option('--disk-limit <size>', 'largest file written, and the size of the private /tmp').argParser(
          bytes,
        ),
        DEFAULTS.diskLimit,
      ),
    )
    .addOption(
      new Option(
        '--env-dir <dir>',
        'a host environment (venv or prefix) read-only at the same path inside, DIR/bin first on PATH (repeatable)',
      ).argParser(collect((v: string) => v)),
    )
    .option(
      '--cgroup-parent <dir>',
      'sandbox: a delegated cgroup v2 directory; limits then hold for the whole process tree (polar doctor --runtime sandbox)',
    )
    .addOption(
      withDefault(
        new Option('--agent-timeout <s>', 'seconds before the harness is killed').argParser(seconds),
        DEFAULTS.agentTimeoutMs,
      ),
    )
    .addOption(
      withDefault(
        new Option('--test-timeout <s>', 'seconds before the tests are killed').argParser(seconds),
        DEFAULTS.testTimeoutMs,
      ),
    );
}

/** --env-cache: where the environments built from the specs are kept (src/rollout/env/). */
export const envCacheOption = (): Option =>
  withDefault(
    new Option('--env-cache <dir>', 'where environments built from the specs are kept'),
    DEFAULTS.envCache,
  );

/** --env-python X.Y=PATH (repeatable): the interpreter for a spec's Python version. */
export const envPythonOption = (): Option =>
  new Option(
    '--env-python <version=path>',
    "the interpreter for a spec's Python version, e.g. 3.9=/opt/py39/bin/python3.9 (repeatable)",
  ).argParser(keyValue);

/**
 * --backend-url taking several inference servers (comma-separated or repeated), for the commands that
 * spread rollouts over them (eval, loop, gym): each rollout talks to one server, the least loaded.
 */
export function severalBackendUrls(cmd: Command, description: string): void {
  const option = cmd.options.find((o) => o.long === '--backend-url');
  if (!option) return;
  option.argParser(urlList);
  option.description = description;
}

/** --cluster and what one sample asks of a node (eval, loop): typed as the cluster fields of EvalFlags. */
export function addClusterFlags(cmd: Command): Command {
  return cmd
    .addOption(
      new Option(
        '--cluster <engine>',
        'run the samples on a cluster: ray (RAY_ADDRESS or auto), ray=HOST:PORT, or slurm (docs/cluster.md)',
      ).argParser(cluster),
    )
    .addOption(
      withDefault(
        new Option('--cluster-cpus <n>', 'CPUs one sample asks of its node').argParser(positiveInt),
        DEFAULTS.clusterCpus,
      ),
    )
    .addOption(
      withDefault(
        new Option('--cluster-memory <bytes>', 'memory one sample asks of its node').argParser(bytes),
        DEFAULTS.clusterMemoryBytes,
      ),
    )
    .addOption(
      withDefault(
        new Option(
          '--cluster-retries <n>',
          'ray: runs of a sample lost with its node, beyond the first (it is never scored)',
        ).argParser(nonNegativeInt),
        DEFAULTS.clusterRetries,
      ),
    )
    .option(
      '--cluster-shared <dir>',
      'ray: a folder every node and this machine see; samples write there instead of sending their files back',
    )
    .option(
      '--cluster-polar <cmd>',
      'how a node starts polar (default: this node binary and bin/polar, same path)',
    )
    .addOption(
      new Option(
        '--cluster-shards <n>',
        'slurm: array tasks, one shard each (default: instances, at most 8)',
      ).argParser(positiveInt),
    )
    .addOption(
      new Option(
        '--sbatch-arg <arg>',
        'slurm: one more #SBATCH line, e.g. --partition=cpu (repeatable)',
      ).argParser(repeatable),
    );
}

/** Hands a command's exit code to `main` (src/cli.ts), which returns it: no command sets process.exitCode. */
/** The judge's flags (eval, loop, gym; typed as JudgeFlags, resolved by src/rollout/judge/setup.ts). docs/judge.md. */
export function addJudgeFlags(cmd: Command): Command {
  return cmd
    .option(
      '--rubric <file>',
      'the rubric a judge model grades each rollout against (with --grader judge, or beside another grader for --reward)',
    )
    .addOption(
      new Option(
        '--judge-url <url>',
        "an OpenAI-compatible chat completions server for the judge (default: the run's --backend-url)",
      ).argParser(url),
    )
    .option(
      '--judge-model <name>',
      "the model the judge server serves (default: --model when the run's server judges)",
    )
    .addOption(
      withDefault(
        new Option(
          '--judge-mode <mode>',
          "single: each rollout alone; group: a task's samples ranked together (RULER)",
        ).argParser(oneOf(JUDGE_MODES)),
        DEFAULTS.judgeMode,
      ),
    )
    .addOption(
      withDefault(
        new Option('--judge-timeout <seconds>', 'time limit of one judge call').argParser(seconds),
        DEFAULTS.judgeTimeoutMs,
      ),
    )
    .addOption(
      new Option(
        '--reward <expr>',
        "the reward as a weighted sum of the run's graders, e.g. 'swebench + 0.2*judge' (default: the --grader's alone)",
      ).argParser(parseReward),
    );
}

export type Report = (code: number) => void;
