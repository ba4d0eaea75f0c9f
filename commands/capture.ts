import type { Command } from 'commander';
import { PolarError } from '../src/errors.ts';

export function defineCapture(program: Command): void {
  program
    .command('capture')
    .description('run a harness behind polar\'s recording proxy')
    .action(() => {
      throw new PolarError('polar capture: in progress');
    });
}
