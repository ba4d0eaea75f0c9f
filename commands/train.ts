import type { Command } from 'commander';
import { PolarError } from '../src/errors.ts';

export function defineTrain(program: Command): void {
  program
    .command('train')
    .description('(not yet implemented: see the project issues)')
    .allowUnknownOption()
    .action(() => {
      throw new PolarError('polar train is not implemented yet');
    });
}
