import type { Command } from 'commander';
import { PolarError } from '../src/errors.ts';

export function defineBuild(program: Command): void {
  program
    .command('build')
    .description('(not yet implemented: see the project issues)')
    .allowUnknownOption()
    .action(() => {
      throw new PolarError('polar build is not implemented yet');
    });
}
