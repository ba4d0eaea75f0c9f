/**
 * argv -> the typed flags a subcommand's action receives, through the real program (src/cli.ts) with
 * every action replaced by a recorder: what each command file declares, parsed by commander, nothing run;
 * and the `polar loop` argv the loop's argv tests start from (test/unit/cluster).
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

/** A policy served by vLLM at a cluster node's address: the words a loop step's `polar eval` gets as well. */
export const SERVED_POLICY = [
  '--backend',
  'vllm',
  '--backend-url',
  'http://10.0.0.2:8000/v1',
  '--model',
  'Qwen/Qwen3-4B',
];

/**
 * The least `polar loop` argv: its task file, Pi, `policy` (SERVED_POLICY unless given) and --out, then
 * `extra`. The argv tests parse it; nothing reads the task file or writes --out unless a test runs it.
 */
export function loopArgv(
  extra: string[] = [],
  o: { policy?: string[]; trainSet?: string; out?: string } = {},
): string[] {
  return [
    'loop',
    '--train-set',
    o.trainSet ?? 't.jsonl',
    '--harness',
    'pi',
    ...(o.policy ?? SERVED_POLICY),
    '--out',
    o.out ?? '/tmp/x',
    ...extra,
  ];
}
