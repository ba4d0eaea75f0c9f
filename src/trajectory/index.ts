/** The public API of the trajectory builder (`polar build`) and reader (`polar train`). */

export { normalizeBuildOptions, type RawBuildOptions, runBuild } from '../build/command.ts';
export { type AdvantageKind, advantageKinds, groupAdvantages, isUniform } from './advantage.ts';
export { type BuildOptions, buildTrajectories, DEFAULT_EOT_IDS, expandInputs } from './build.ts';
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
export { type BuildStats, formatStats } from './stats.ts';
