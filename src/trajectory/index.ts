/**
 * The public API of the trajectory builder and reader (`polar train`); `polar build` itself (runBuild) is
 * src/build/command.ts, a layer above.
 */
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
