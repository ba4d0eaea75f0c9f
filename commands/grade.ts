import { type Command, Option } from 'commander';
import type { GradeCliOptions } from '../src/grade/command.ts';
import { DEFAULTS, withDefault } from '../src/options/defaults.ts';
import { oneOf } from '../src/options/parsers.ts';
import { PARSER_VERSIONS, SEMANTICS } from '../src/rollout/log-parsers/types.ts';
import { jsonFlag, type Report, toOption } from './flags.ts';

export function defineGrade(program: Command, report: Report): void {
  program
    .command('grade')
    .description(
      'read one SWE-bench test log as the official harness does: status map, resolution (docs/eval.md)',
    )
    .argument('<log>', 'a test log (an eval log with the test markers, or a bare runner output)')
    .option('--repo <owner/name>', "repository whose parser applies (default: the --instance row's)")
    .option('--version <v>', 'the row version (picks the test command in specs)')
    .option('--log-parser <name>', 'a parser by name: parse_log_pytest, django, sympy, ...')
    .option(
      '--instance <row.json>',
      'a dataset row: adds the FAIL_TO_PASS / PASS_TO_PASS report and resolved',
    )
    .addOption(
      new Option(
        '--official-version <4.1|5>',
        'official rules to apply (default: 5 for rows with an eval_script, else 4.1)',
      ).argParser(oneOf(PARSER_VERSIONS)),
    )
    .addOption(
      withDefault(
        new Option(
          '--semantics <official|polar>',
          'official rules exactly, or with the guards polar eval adds',
        ).argParser(oneOf(SEMANTICS)),
        DEFAULTS.gradeSemantics,
      ),
    )
    .addOption(toOption(jsonFlag('the grade', 'tests maps each id to its status')))
    .addHelpText(
      'after',
      `
Examples:
  polar grade runs/eval/logs/django__django-11099.log --repo django/django --version 3.0
  polar grade test.log --instance row.json --json`,
    )
    .action(async (log: string, options: GradeCliOptions) => {
      const { gradeCommand } = await import('../src/grade/command.ts');
      report(await gradeCommand(log, options));
    });
}
