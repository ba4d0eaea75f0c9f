import type { Command } from 'commander';
import { Option } from 'commander';
import type { EnvBuildFlags } from '../src/env/command.ts';
import { DEFAULTS, withDefault } from '../src/options/defaults.ts';
import { list, oneOf, positiveInt, seconds, shard } from '../src/options/parsers.ts';
import { ENV_CACHE_FLAG, ENV_PYTHON_FLAG, jsonFlag, QUIET_FLAG, type Report, toOption } from './flags.ts';

export function defineEnv(program: Command, report: Report): void {
  const env = program
    .command('env')
    .description("the Python environments built from each repository's spec (docs/eval.md, Environments)")
    .addHelpText(
      'after',
      `
Examples:
  polar env build --dataset verified.parquet --repos repos --instances pytest-dev__pytest-7432`,
    );
  env
    .command('build')
    .description(
      'build (or find in the cache) the environment of every selected instance, ahead of polar eval',
    )
    .requiredOption(
      '--dataset <path|hub-id>',
      '.jsonl, .json or .parquet in the SWE-bench schema, or a hub id',
    )
    .addOption(withDefault(new Option('--split <name>', 'split of a hub dataset'), DEFAULTS.split))
    .addOption(new Option('--instances <ids>', 'comma-separated instance ids').argParser(list))
    .addOption(
      new Option('--limit <n>', 'first n instances (after --instances and --shard)').argParser(positiveInt),
    )
    .addOption(new Option('--shard <i/n>', 'the i-th of n shards (1-based, round robin)').argParser(shard))
    .addOption(
      withDefault(
        new Option(
          '--repos <dir>',
          'DIR/<owner>/<name> git repositories (requirement files are read from them)',
        ),
        DEFAULTS.repos,
      ),
    )
    .addOption(toOption(ENV_CACHE_FLAG))
    .addOption(toOption(ENV_PYTHON_FLAG))
    .option(
      '--validate',
      "show each environment works as eval would before scoring from it: one instance's gold patch resolves (else its PASS_TO_PASS pass on the base tree); prints a table per repository and version",
    )
    .addOption(
      withDefault(
        new Option('--runtime <kind>', 'where --validate grades: sandbox (bubblewrap) or local').argParser(
          oneOf(['sandbox', 'local'] as const),
        ),
        DEFAULTS.runtime,
      ),
    )
    .addOption(
      withDefault(
        new Option('--test-timeout <s>', "seconds before a validation's tests are killed").argParser(seconds),
        DEFAULTS.testTimeoutMs,
      ),
    )
    .addOption(toOption(jsonFlag('one line per environment')))
    .addOption(toOption(QUIET_FLAG))
    .addHelpText(
      'after',
      `
Exits 0 when every environment is built or cached (and, with --validate, shown to work), 4 when one
fails (its error names the step and the requirement, or the failing tests; the whole log is kept beside
the cache folder). A verdict is kept with its environment: eval excludes the samples of an environment
that failed it, and --validate does not check an environment twice.

Examples:
  polar env build --dataset verified.parquet --repos repos --instances pytest-dev__pytest-7432
  polar env build --dataset verified.parquet --repos repos --validate
  polar env build --dataset rows.jsonl --repos repos --env-python 3.6=/opt/python3.6/bin/python3.6`,
    )
    .action(async (flags: EnvBuildFlags) => {
      const { envBuildCommand } = await import('../src/env/command.ts');
      report(await envBuildCommand(flags));
    });
}
