/**
 * polar's own messages: always stderr (stdout belongs to the harness or to data), colour only when
 * stderr is a TTY and NO_COLOR is unset, quiet mode for scripts, a debug log with timestamps.
 */
import chalk from 'chalk';
import { redactUrl } from './redact.ts';

const state = { quiet: false, debug: process.env.POLAR_DEBUG === '1' };

const color = (): boolean => Boolean(process.stderr.isTTY) && !('NO_COLOR' in process.env);

/** every line printed: a URL in it loses its credentials (a --backend-url with user:password@) */
function write(line: string): void {
  process.stderr.write(`${redactUrl(line)}\n`);
}

export const log = {
  configure(options: { quiet?: boolean; debug?: boolean }): void {
    if (options.quiet !== undefined) state.quiet = options.quiet;
    if (options.debug !== undefined) state.debug = options.debug;
  },
  get quiet(): boolean {
    return state.quiet;
  },
  get color(): boolean {
    return color();
  },
  info(message: string): void {
    if (!state.quiet) write(color() ? `${chalk.cyan('polar')} ${message}` : `polar: ${message}`);
  },
  warn(message: string): void {
    write(color() ? `${chalk.yellow('polar warning')} ${message}` : `polar: warning: ${message}`);
  },
  error(message: string): void {
    write(color() ? `${chalk.red('polar error')} ${message}` : `polar: error: ${message}`);
  },
  hint(message: string): void {
    write(color() ? chalk.dim(`  ${message}`) : `  ${message}`);
  },
  debug(message: string): void {
    if (state.debug) write(`[${new Date().toISOString()}] ${message}`);
  },
  raw(message: string): void {
    write(message);
  },
};
