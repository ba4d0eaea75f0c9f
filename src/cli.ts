/**
 * The CLI: declares the subcommands and maps errors to exit codes, in one place. Each subcommand lives
 * in commands/<name>.ts, which declares its flags (parsed by src/options/parsers.ts, defaults from
 * src/options/defaults.ts), lazily imports its implementation from src/ and reports its exit code.
 * Conventions: docs/cli.md.
 */
import { Command, CommanderError, Help, type Option } from 'commander';
import { defineBuild } from '../commands/build.ts';
import { defineCapture } from '../commands/capture.ts';
import { defineDoctor } from '../commands/doctor.ts';
import { defineEnv } from '../commands/env.ts';
import { defineEval } from '../commands/eval.ts';
import { defineExport } from '../commands/export.ts';
import type { Report } from '../commands/flags.ts';
import { defineGrade } from '../commands/grade.ts';
import { defineGym } from '../commands/gym.ts';
import { defineInspect } from '../commands/inspect.ts';
import { defineJob } from '../commands/job.ts';
import { defineLoop } from '../commands/loop.ts';
import { defineServe } from '../commands/serve.ts';
import { defineSetup } from '../commands/setup.ts';
import { defineTrain } from '../commands/train.ts';
import { EXIT, EXIT_TABLE, type ExitCode, PolarError } from './errors.ts';
import { splitSuggestion } from './options/suggest.ts';
import { log } from './util/log.ts';
import { POLAR_VERSION } from './version.ts';

/** Said at the end of every --help: the exit codes of docs/cli.md, from the one table (EXIT_TABLE). */
export const EXIT_CODES_HELP = `\n${wrap(
  `Exit codes: ${EXIT_TABLE.map((row) => `${row.code} ${row.short}`).join(', ')}. Conventions: docs/cli.md`,
  100,
)}`;

/** `text` in lines of at most `width` characters, broken at spaces. */
function wrap(text: string, width: number): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  return [...lines, line].join('\n');
}

/** commander's help, with "(required)" after every option that must be given. */
function optionDescription(this: Help, option: Option): string {
  let text = Help.prototype.optionDescription.call(this, option);
  // a switch is off unless given: "(default: false)" says nothing
  if (option.isBoolean() && option.defaultValue === false) text = text.replace(/ \(default: false\)$/, '');
  return option.mandatory && !/\(required\)/.test(text) ? `${text} (required)` : text;
}

export function program(report: Report = () => {}): Command {
  const cmd = new Command('polar')
    .description('Token-level capture, trajectory building and GRPO training for coding agents')
    .version(POLAR_VERSION, '-V, --version')
    .option('--debug', 'show stack traces and debug logs', false)
    // commander's own errors (unknown option, missing value, bad value) are printed by `main`, in polar's format
    .configureOutput({ outputError: () => {} })
    .configureHelp({ optionDescription })
    .enablePositionalOptions()
    .exitOverride()
    .addHelpText('after', EXIT_CODES_HELP);
  defineCapture(cmd, report);
  defineBuild(cmd, report);
  defineTrain(cmd, report);
  defineEval(cmd, report);
  defineJob(cmd, report);
  defineEnv(cmd, report);
  defineGrade(cmd, report);
  defineServe(cmd, report);
  defineInspect(cmd, report);
  defineGym(cmd, report);
  defineExport(cmd, report);
  defineLoop(cmd, report);
  defineDoctor(cmd, report);
  defineSetup(cmd, report);
  // every subcommand's help, and a subcommand's own (`env build`)
  for (const sub of cmd.commands.flatMap((c) => [c, ...c.commands]))
    sub.addHelpText('after', EXIT_CODES_HELP);
  return cmd;
}

/**
 * commander's message in polar's words: `error: option '-o, --output <file>' argument 'x' is invalid.
 * expected ...` becomes `--output x: expected ...` (a parser's "is not one of ..." reads on from the value).
 */
export function commanderMessage(error: CommanderError): string {
  const text = splitSuggestion(error.message.replace(/^error: /, '')).message;
  const invalid = /^option '([^']+)' argument '([\s\S]*)' is invalid\. ([\s\S]*)$/.exec(text);
  if (!invalid) return text;
  const [, flags = '', value = '', problem = ''] = invalid;
  const flag = /--[\w-]+/.exec(flags)?.[0] ?? flags;
  return problem.startsWith('is ') ? `${flag} ${value} ${problem}` : `${flag} ${value}: ${problem}`;
}

/** Runs the CLI; returns the exit code (never calls process.exit, so callers and tests stay in control). */
export async function main(argv: string[]): Promise<ExitCode> {
  let code: ExitCode = EXIT.ok;
  const cmd = program((c) => {
    code = c;
  });
  const debug = argv.includes('--debug') || process.env.POLAR_DEBUG === '1';
  guardStdout();
  try {
    await cmd.parseAsync(argv);
    return code;
  } catch (error) {
    return reportError(error, debug);
  }
}

let stdoutGuarded = false;
/** A reader that goes away (`polar build | head`) is the end of the output, not an error (once per process). */
function guardStdout(): void {
  if (stdoutGuarded) return;
  stdoutGuarded = true;
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
  });
}

/** One error format for every failure: `polar: error: <what>`, a hint line, the stack only under --debug. */
export function reportError(error: unknown, debug: boolean): ExitCode {
  if (error instanceof CommanderError) {
    // help and version print themselves and exit 0; `polar` alone prints the help and is a usage error
    if (error.exitCode === 0) return EXIT.ok;
    if (error.code === 'commander.help' || error.code === 'commander.helpDisplayed') return EXIT.usage;
    // commander's "(Did you mean capture?)" line (and a value parser's, src/options/suggest.ts) is the hint
    const { suggestion } = splitSuggestion(error.message);
    log.error(commanderMessage(error));
    log.hint(suggestion ? `${suggestion} (run with --help for usage)` : 'run with --help for usage');
    return EXIT.usage;
  }
  // stdout closed by its reader (`| head`): the output ends there, quietly, with success
  if ((error as NodeJS.ErrnoException | null)?.code === 'EPIPE') return EXIT.ok;
  if (PolarError.isInstance(error)) {
    log.error(error.message);
    if (error.hint) log.hint(error.hint);
    if (debug && error.stack) log.raw(error.stack);
    return error.exitCode;
  }
  log.error(`internal error: ${(error as Error)?.message ?? String(error)}`);
  if (debug && error instanceof Error && error.stack) log.raw(error.stack);
  else log.hint('run again with --debug for the stack trace, and please report it');
  return EXIT.failure;
}
