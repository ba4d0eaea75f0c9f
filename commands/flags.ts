/**
 * The flags the commands share, as data: each declared once (its spelling, its help, its parser from
 * src/options/parsers.ts, its default from src/options/defaults.ts), in the groups a command includes with
 * addFlags: BACKEND_FLAGS (every command that talks to a model), RUNTIME_FLAGS (eval, loop, gym: where a
 * harness runs and for how long), GRADING_FLAGS, JUDGE_FLAGS (eval, loop, gym), CLUSTER_FLAGS (eval,
 * loop), reportFlags (train, loop, eval). A command narrows a shared flag by name (its help, its parser)
 * where it means less there; it never declares the flag again. Being data, the groups are what a
 * configuration file's keys can be read against: a key is a flag's long name (longName, FLAG_GROUPS), and
 * a key that no group of the command declares is not one of its flags.
 */
import { type Command, Option } from 'commander';
import { BACKEND_KINDS } from '../src/backends/kinds.ts';
import { passEnvArg } from '../src/harnesses/env.ts';
import { PI_APIS } from '../src/harnesses/pi.ts';
import { HARNESS_NAMES } from '../src/harnesses/types.ts';
import { DEFAULTS, type Default, withDefault } from '../src/options/defaults.ts';
import {
  absolutePath,
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

/** One flag of a command line. */
export interface Flag {
  /** commander's spelling: `--runtime <kind>`, `-q, --quiet`, `--no-envs` */
  flags: string;
  help: string;
  /** text to value (src/options/parsers.ts); a repeatable flag's gets the value so far */
  parse?: (value: string, previous: never) => unknown;
  /** the value when not given, and the words --help shows for it (src/options/defaults.ts) */
  default?: Default<unknown>;
  hidden?: boolean;
  required?: boolean;
}

/** What a command changes of a shared flag (by long name): its help, its parser. */
export type FlagChanges = Record<string, Partial<Pick<Flag, 'help' | 'parse' | 'hidden'>>>;

/** A flag's long name, as commander and a configuration file name it: `--backend-url`. */
export function longName(flag: Flag): string {
  return new Option(flag.flags).long ?? flag.flags;
}

/** A flag as a commander option. */
export function toOption(flag: Flag): Option {
  const option = new Option(flag.flags, flag.help);
  if (flag.parse) option.argParser(flag.parse as (value: string, previous: unknown) => unknown);
  if (flag.default) withDefault(option, flag.default);
  if (flag.hidden) option.hideHelp();
  if (flag.required) option.makeOptionMandatory();
  return option;
}

/** Adds a group's flags to a command, in order: all of them or those `only` names, each with its changes. */
export function addFlags(
  cmd: Command,
  flags: readonly Flag[],
  { only, change = {} }: { only?: readonly string[]; change?: FlagChanges } = {},
): Command {
  for (const flag of flags) {
    const name = longName(flag);
    if (!only || only.includes(name)) cmd.addOption(toOption({ ...flag, ...change[name] }));
  }
  return cmd;
}

/**
 * --python of `polar train` and `polar export`: the candidates in the order findPython (src/train/env.ts)
 * tries them.
 */
export const PYTHON_FLAG: Flag = {
  flags: '--python <path>',
  help: "Python with torch (default: $POLAR_PYTHON, the clone's .venv of npm run setup:python, polar setup's environment, python3, /usr/bin/python3)",
};

/**
 * --overlong (build and loop: recorded in the trajectories, which polar train applies) with its default;
 * `old`: build's old values of the flag (now --over-max-trace-tokens), accepted with a warning.
 */
export const overlongFlag = (old: readonly string[] = []): Flag => ({
  flags: '--overlong <mode>',
  help: 'a trace a length limit cut (a call at max tokens, --max-trace-tokens): mask (no loss), penalty (DAPO soft length penalty on the reward, over --overlong-buffer) or keep',
  parse: overlongMode(old),
  default: DEFAULTS.overlong,
});

/** --overlong-buffer: DAPO's L_cache, in tokens below a limit in force */
export const OVERLONG_BUFFER_FLAG: Flag = {
  flags: '--overlong-buffer <n>',
  help: 'with --overlong penalty: the tokens below a limit where the penalty starts (DAPO L_cache)',
  parse: positiveInt,
  default: DEFAULTS.overlongBuffer,
};

/** --harness, its help naming every harness profile (src/harnesses/types.ts) between `lead` and `tail`. */
export const harnessFlag = (lead = '', tail = ''): Flag => ({
  flags: '--harness <name>',
  help: `${lead}${HARNESS_NAMES.join(' | ')}${tail}`,
  parse: oneOf(HARNESS_NAMES),
});

/**
 * -q of every command that prints progress or a report on stderr: one spelling, one meaning (docs/cli.md,
 * "Names that mean one thing"; test/unit/cli/help.test.ts).
 */
export const QUIET_FLAG: Flag = {
  flags: '-q, --quiet',
  help: 'no progress or report on stderr (warnings and errors still show)',
};

/** --json of every command with a result to hand on: `what` as JSON on stdout. */
export const jsonFlag = (what: string, note?: string): Flag => ({
  flags: '--json',
  help: `${what} as JSON on stdout${note ? ` (${note})` : ''}`,
});

/** The backend flags every subcommand that talks to a model shares (typed as BackendFlags), in order. */
export const BACKEND_FLAGS: readonly Flag[] = [
  {
    flags: '--backend <kind>',
    help: `${BACKEND_KINDS.join(' | ')} (default: embedded, or vllm with --backend-url)`,
    parse: oneOf(BACKEND_KINDS),
  },
  {
    flags: '--backend-url <url>',
    help: 'inference server base URL, e.g. http://127.0.0.1:8000/v1',
    parse: url,
  },
  {
    flags: '--model <name>',
    help: `model the backend serves (harness model names all map to it; embedded default: ${DEFAULTS.embeddedModel.shown})`,
  },
  { flags: '--api-key <key>', help: 'key for the backend (default: $POLAR_BACKEND_API_KEY)' },
  { flags: '--tokenizer <dir|hub-id>', help: 'tokenizer for --backend tokens/embedded (default: the model)' },
  {
    flags: '--chat-template-kwargs <json>',
    help: 'passed to the chat template, e.g. \'{"enable_thinking":false}\'',
    parse: jsonObject,
  },
  {
    flags: '--temperature <t>',
    help: 'sampling temperature when the harness sets none',
    parse: floatIn(0, Number.POSITIVE_INFINITY),
  },
  { flags: '--top-p <p>', help: 'top-p when the harness sets none', parse: floatIn(0, 1, { open: 'min' }) },
  { flags: '--max-tokens <n>', help: 'max completion tokens when the harness sets none', parse: positiveInt },
  {
    flags: '--seed <n>',
    help: 'sampling seed (tokens, embedded): call k samples with n + k, so a run at concurrency 1 repeats',
    parse: nonNegativeInt,
  },
  {
    flags: '--max-tokens-cap <n>',
    help: 'hard cap on completion tokens of every call, whatever the harness asks',
    parse: positiveInt,
  },
  {
    flags: '--backend-timeout <seconds>',
    help: 'abandon a backend call after this long, streaming or not',
    parse: seconds,
    default: DEFAULTS.backendTimeoutMs,
  },
  {
    flags: '--backend-idle-timeout <seconds>',
    help: 'abandon a backend call whose started answer sends nothing for this long',
    parse: seconds,
    default: DEFAULTS.backendIdleTimeoutMs,
  },
  {
    flags: '--no-require-token-ids',
    help: 'accept backend answers without token ids (records say token_exact: false)',
  },
  {
    flags: '--skip-backend-check',
    help: 'start without probing the server set-up first (model served, token ids, tool calling)',
    default: DEFAULTS.skipBackendCheck,
  },
];

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

/**
 * --backend-url taking several inference servers (comma-separated or repeated), for the commands that
 * spread rollouts over them (eval, loop, gym): each rollout talks to one server, the least loaded.
 */
export const severalBackendUrls = (help: string): FlagChanges => ({
  '--backend-url': { parse: urlList, help },
});

/** --report-to and its companions (train, loop, eval): typed as ReportFlags (src/options/report.ts). */
export const reportFlags = (what: string): Flag[] => [
  {
    flags: '--report-to <trackers>',
    help: `write ${what} to tensorboard, wandb or both (comma-separated) while the run goes; none: neither`,
    parse: reportTargets,
    default: DEFAULTS.reportTo,
  },
  { flags: '--run-name <name>', help: "the W&B run's name (default: the --out folder's name)" },
  { flags: '--project <name>', help: `the W&B project (default: ${DEFAULTS.wandbProject.shown})` },
  { flags: '--tensorboard-dir <dir>', help: 'where TensorBoard event files go (default: <out>/tensorboard)' },
];

/** --env-cache: where the environments built from the specs are kept (src/rollout/env/). */
export const ENV_CACHE_FLAG: Flag = {
  flags: '--env-cache <dir>',
  help: 'where environments built from the specs are kept',
  parse: absolutePath,
  default: DEFAULTS.envCache,
};

/** --env-python X.Y=PATH (repeatable): the interpreter for a spec's Python version. */
export const ENV_PYTHON_FLAG: Flag = {
  flags: '--env-python <version=path>',
  help: "the interpreter for a spec's Python version, e.g. 3.9=/opt/py39/bin/python3.9 (repeatable)",
  parse: keyValue,
};

/** --pass-env NAME (repeatable): another variable of polar's environment a harness may see. */
export const PASS_ENV_FLAG: Flag = {
  flags: '--pass-env <name>',
  help: "another variable of polar's environment the harness may see (repeatable; it gets PATH, HOME, locale, TERM, TMPDIR and proxies)",
  parse: passEnvArg,
};

/** The flags of every command that runs a harness on SWE-bench-style tasks (eval, loop, gym): RolloutFlags. */
export const RUNTIME_FLAGS: readonly Flag[] = [
  PASS_ENV_FLAG,
  { flags: '--pi-api <api>', help: `the wire API Pi uses: ${PI_APIS.join(' | ')}`, parse: oneOf(PI_APIS) },
  {
    flags: '--runtime <kind>',
    help: 'sandbox (bubblewrap), local (unsandboxed: your rights), docker, podman or apptainer',
    parse: oneOf(RUNTIME_KINDS),
    default: DEFAULTS.runtime,
  },
  {
    flags: '--repos <dir>',
    help: 'sandbox and local runtimes: DIR/<owner>/<name> git repositories',
    default: DEFAULTS.repos,
  },
  {
    flags: '--image <template>',
    help: 'container image override ({instance_id} is replaced; apptainer: also a .sif)',
  },
  {
    flags: '--network <name>',
    help: `${DEFAULTS.containerNetwork.shown} (default: loopback only, the capture proxy through a socket); host (unsafe: every port and the internet); containers: also a network name`,
  },
  {
    flags: '--network-allow <host:port>',
    help: 'sandbox: also reach this host address, at 127.0.0.1:PORT inside (repeatable; unsafe: a way out)',
    parse: collect(hostAndPort),
  },
  { flags: '--allow-unsandboxed', help: 'allow a harness to run on this machine with --runtime local' },
  ENV_CACHE_FLAG,
  ENV_PYTHON_FLAG,
  {
    flags: '--no-envs',
    help: "sandbox and local runtimes: run the tests in polar's own environment (no environment from the spec)",
  },
  {
    flags: '--memory-limit <size>',
    help: 'memory of one environment (e.g. 8GiB)',
    parse: bytes,
    default: DEFAULTS.memoryLimit,
  },
  {
    flags: '--pids-limit <n>',
    help: 'processes and threads of one environment at once',
    parse: positiveInt,
    default: DEFAULTS.pidsLimit,
  },
  {
    flags: '--disk-limit <size>',
    help: 'largest file written, and the size of the private /tmp',
    parse: bytes,
    default: DEFAULTS.diskLimit,
  },
  {
    flags: '--env-dir <dir>',
    help: 'a host environment (venv or prefix) read-only at the same path inside, DIR/bin first on PATH (repeatable)',
    parse: collect((v: string) => v),
  },
  {
    flags: '--cgroup-parent <dir>',
    help: 'sandbox: a delegated cgroup v2 directory; limits then hold for the whole process tree (polar doctor --runtime sandbox)',
  },
  {
    flags: '--agent-timeout <s>',
    help: 'seconds before the harness is killed',
    parse: seconds,
    default: DEFAULTS.agentTimeoutMs,
  },
  {
    flags: '--test-timeout <s>',
    help: 'seconds before the tests are killed',
    parse: seconds,
    default: DEFAULTS.testTimeoutMs,
  },
];

/** --grader (polar, swebench, judge or a verifier command); its help is the command's where it takes fewer. */
export const GRADER_FLAG: Flag = {
  flags: '--grader <kind>',
  help: 'polar, judge (with --rubric), or a verifier command (see polar eval)',
  parse: grader,
  default: DEFAULTS.grader,
};

/**
 * How a sample is graded (eval, loop; gym takes GRADER_FLAG alone): --grader's help is the command's, as
 * the graders it takes differ (swebench grades a finished run: eval only).
 */
export const GRADING_FLAGS: readonly Flag[] = [
  GRADER_FLAG,
  {
    flags: '--grade-empty-patches',
    help: 'run the tests for empty patches too instead of scoring them 0 outright',
  },
  {
    flags: '--reject-test-tampering',
    help: 'grade 0 a sample the integrity layers flag (a changed test surface, code that reaches into the test runner, a pytest11 entry point, an expected test passed as XFAIL; docs/eval.md, "Grading integrity"); without it the official outcome is kept and the report gives pass@1 both ways',
  },
  {
    flags: '--no-reject-test-tampering',
    help: `keep the tests' outcome of a sample the integrity layers flag (polar eval's default; docs/eval.md, "Grading integrity")`,
  },
];

/**
 * The help of the tampering flags where training is the purpose (loop, gym): there a flagged sample is
 * graded 0 by default (DEFAULTS.trainingRejectsTampering), and still trained on.
 */
export const TRAINING_TAMPERING: FlagChanges = {
  '--reject-test-tampering': { help: 'grade 0 a sample the integrity layers flag (the default)' },
  '--no-reject-test-tampering': {
    help: `keep the tests' outcome of a sample the integrity layers flag (default: reward 0, trained on; docs/eval.md, "Grading integrity")`,
  },
};

/** --cluster and what one sample asks of a node (eval, loop): ClusterFlags (src/rollout/flags.ts). */
export const CLUSTER_FLAGS: readonly Flag[] = [
  {
    flags: '--cluster <engine>',
    help: 'run the samples on a cluster: ray (RAY_ADDRESS or auto), ray=HOST:PORT, or slurm (docs/cluster.md)',
    parse: cluster,
  },
  {
    flags: '--cluster-cpus <n>',
    help: 'CPUs one sample asks of its node',
    parse: positiveInt,
    default: DEFAULTS.clusterCpus,
  },
  {
    flags: '--cluster-memory <bytes>',
    help: 'memory one sample asks of its node',
    parse: bytes,
    default: DEFAULTS.clusterMemoryBytes,
  },
  {
    flags: '--cluster-retries <n>',
    help: 'ray: runs of a sample lost with its node, beyond the first (it is never scored)',
    parse: nonNegativeInt,
    default: DEFAULTS.clusterRetries,
  },
  {
    flags: '--cluster-shared <dir>',
    help: 'ray: a folder every node and this machine see; samples write there instead of sending their files back',
  },
  {
    flags: '--cluster-polar <cmd>',
    help: 'how a node starts polar (default: this node binary and bin/polar, same path)',
  },
  {
    flags: '--cluster-shards <n>',
    help: 'slurm: array tasks, one shard each (default: instances, at most 8)',
    parse: positiveInt,
  },
  {
    flags: '--sbatch-arg <arg>',
    help: 'slurm: one more #SBATCH line, e.g. --partition=cpu (repeatable)',
    parse: repeatable,
  },
];

/** The judge's flags (eval, loop, gym; typed as JudgeFlags, resolved by src/rollout/judge/setup.ts). docs/judge.md. */
export const JUDGE_FLAGS: readonly Flag[] = [
  {
    flags: '--rubric <file>',
    help: 'the rubric a judge model grades each rollout against (with --grader judge, or beside another grader for --reward)',
  },
  {
    flags: '--judge-url <url>',
    help: "an OpenAI-compatible chat completions server for the judge (default: the run's --backend-url)",
    parse: url,
  },
  {
    flags: '--judge-model <name>',
    help: "the model the judge server serves (default: --model when the run's server judges)",
  },
  {
    flags: '--judge-mode <mode>',
    help: "single: each rollout alone; group: a task's samples ranked together (RULER)",
    parse: oneOf(JUDGE_MODES),
    default: DEFAULTS.judgeMode,
  },
  {
    flags: '--judge-timeout <seconds>',
    help: 'time limit of one judge call',
    parse: seconds,
    default: DEFAULTS.judgeTimeoutMs,
  },
  {
    flags: '--reward <expr>',
    help: "the reward as a weighted sum of the run's graders, e.g. 'swebench + 0.2*judge' (default: the --grader's alone)",
    parse: parseReward,
  },
];

/** Samples run at once (eval, loop). */
export const CONCURRENCY_FLAG: Flag = {
  flags: '--concurrency <n>',
  help: 'samples run at once',
  parse: positiveInt,
  default: DEFAULTS.concurrency,
};

/** The prompt a harness gets (eval, loop; gym's help says when a row gives none). */
export const PROMPT_TEMPLATE_FLAG: Flag = {
  flags: '--prompt-template <file>',
  help: 'prompt template ({{problem_statement}}, {{workdir}}, {{repo}})',
};

/** Every shared group by name: what a configuration file's keys are read against (issue 47). */
export const FLAG_GROUPS = {
  backend: BACKEND_FLAGS,
  runtime: RUNTIME_FLAGS,
  grading: GRADING_FLAGS,
  cluster: CLUSTER_FLAGS,
  judge: JUDGE_FLAGS,
} as const;

/** --config, on every command that reads one */
export const CONFIG_FLAG: Flag = {
  flags: '--config <file>',
  help: 'the options in a YAML or JSON file, keys the long flag names (a run\'s loop.json or run.json repeats it); flags on the command line win (docs/cli.md, "Options in a file")',
};

/** Hands a command's exit code to `main` (src/cli.ts), which returns it: no command sets process.exitCode. */
export type Report = (code: number) => void;
