import type { Command } from 'commander';
import { PolarError } from '../src/errors.ts';

export function defineEval(program: Command): void {
  program
    .command('eval')
    .description('(not yet implemented: see the project issues)')
    .allowUnknownOption()
    .action(() => {
      throw new PolarError('polar eval is not implemented yet');
    });
}
