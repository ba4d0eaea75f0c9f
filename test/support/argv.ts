/**
 * argv -> the typed flags a subcommand's action receives, through the real program (src/cli.ts) with
 * every action replaced by a recorder: what each command file declares, parsed by commander, nothing run.
 */
import { CommanderError } from 'commander';
import { commanderMessage, program } from '../../src/cli.ts';

export interface Parsed {
  command: string;
  args: unknown[];
  flags: Record<string, unknown>;
}

export function parseArgv(argv: string[]): Parsed {
  const root = program();
  let parsed: Parsed | undefined;
  for (const sub of root.commands) {
    sub.configureOutput({ writeErr: () => {}, writeOut: () => {}, outputError: () => {} });
    sub.action((...args: unknown[]) => {
      // commander passes the positional arguments, then the options object, then the command
      const flags = args.at(-2) as Record<string, unknown>;
      parsed = { command: sub.name(), args: args.slice(0, -2), flags };
    });
  }
  root.configureOutput({ writeErr: () => {}, writeOut: () => {}, outputError: () => {} });
  root.parse(['node', 'polar', ...argv]);
  if (!parsed) throw new Error(`no subcommand ran for ${argv.join(' ')}`);
  return parsed;
}

/** The message `main` prints for argv's usage error (`polar: error: <this>`), or null when argv parses. */
export function usageError(argv: string[]): string | null {
  try {
    parseArgv(argv);
    return null;
  } catch (error) {
    if (error instanceof CommanderError) return commanderMessage(error);
    throw error;
  }
}
