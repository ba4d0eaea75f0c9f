/** The public API of the trajectory builder (`polar build`) and reader (`polar train`). */

export { type BuildFlags, type BuildRun, buildRun, runBuild } from '../build/command.ts';
export { type BuildOptions, buildTrajectories, expandInputs } from './build.ts';
export { encodeHead, encodeTails, type OutputFormat, outputFormats } from './formats.ts';
export {
  type MergeCall,
  type MergedTrace,
  type MergeOptions,
  type MergeResult,
  mergeCalls,
} from './merge.ts';
export { type LocatedTrajectory, readTrajectories, validateTrajectory } from './reader.ts';
export * from './record.ts';
export { isUniform } from './rewards.ts';
export { type BuildStats, formatStats } from './stats.ts';
