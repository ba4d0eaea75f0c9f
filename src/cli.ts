/**
 * The CLI: declares the subcommands and maps errors to exit codes, in one place. Each subcommand lives
 * in commands/<name>.ts, which declares its flags and lazily imports its implementation from src/.
 */
import { Command, CommanderError } from 'commander';
import { defineBuild } from '../commands/build.ts';
import { defineCapture } from '../commands/capture.ts';
import { defineDoctor } from '../commands/doctor.ts';
import { defineEval } from '../commands/eval.ts';
import { defineExport } from '../commands/export.ts';
import { defineGym } from '../commands/gym.ts';
import { defineInspect } from '../commands/inspect.ts';
import { defineLoop } from '../commands/loop.ts';
import { defineServe } from '../commands/serve.ts';
import { defineTrain } from '../commands/train.ts';
import { EXIT, PolarError } from './errors.ts';
import { log } from './util/log.ts';
import { POLAR_VERSION } from './version.ts';

export function program(): Command {
  const cmd = new Command('polar')
    .description('Token-level capture, trajectory building and GRPO training for coding agents')
    .version(POLAR_VERSION, '-V, --version')
    .option('--debug', 'show stack traces and debug logs', false)
    .showHelpAfterError('(run with --help for usage)')
    .enablePositionalOptions()
    .exitOverride();
  defineCapture(cmd);
  defineBuild(cmd);
  defineTrain(cmd);
  defineEval(cmd);
  defineServe(cmd);
  defineInspect(cmd);
  defineGym(cmd);
  defineExport(cmd);
  defineLoop(cmd);
  defineDoctor(cmd);
  return cmd;
}

/** Runs the CLI; returns the exit code (never calls process.exit, so callers and tests stay in control). */
export async function main(argv: string[]): Promise<number> {
  const cmd = program();
  const debug = argv.includes('--debug') || process.env.POLAR_DEBUG === '1';
  try {
    await cmd.parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : EXIT.ok;
  } catch (error) {
    if (error instanceof CommanderError) {
      // help and version print themselves and exit 0; usage errors were already printed
      return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
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
}
