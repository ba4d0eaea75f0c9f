/**
 * Reads trajectory files (the `polar` format of `polar build`), validating each line against the
 * trajectory record (version 2, or version 1 of older builds) and failing with file:line and the field.
 * Used by `polar train` and `polar inspect`.
 */
import type { Readable } from 'node:stream';
import { InputError } from '../errors.ts';
import { parseJsonLine, readLines } from '../util/jsonl.ts';
import { firstIssue } from '../util/zod.ts';
import { TRAJECTORY_VERSIONS, type TrajectoryRecord, trajectoryRecordSchema } from './record.ts';

export interface ReadTrajectoriesOptions {
  /** skip invalid lines (reporting each through onInvalid) instead of failing */
  skipInvalid?: boolean;
  onInvalid?: (error: InputError) => void;
  stdin?: Readable;
}

export interface LocatedTrajectory {
  record: TrajectoryRecord;
  source: string;
  line: number;
}

const HINT = 'see docs/trajectory-format.md; write trajectories with `polar build` (--format polar)';

/** the `type` of every capture record (src/capture/record.ts) */
const CAPTURE_RECORD_TYPES: readonly string[] = ['session', 'session_end', 'call', 'grading'];

/** Validates one parsed JSON value as a trajectory record; throws InputError naming file:line and field. */
export function validateTrajectory(source: string, line: number, value: unknown): TrajectoryRecord {
  if (typeof value === 'object' && value !== null) {
    const v = (value as { v?: unknown }).v;
    if (typeof v === 'number' && !(TRAJECTORY_VERSIONS as readonly number[]).includes(v)) {
      throw new InputError(
        source,
        line,
        'v',
        `trajectory format version ${v} is not supported (this polar reads versions ${TRAJECTORY_VERSIONS.join(' and ')})`,
        'rebuild the trajectories with this version of polar',
      );
    }
    // a capture's records (polar capture, polar eval's captures/): one step before trajectories
    const type = (value as { type?: unknown }).type;
    if (typeof type === 'string' && CAPTURE_RECORD_TYPES.includes(type)) {
      throw new InputError(
        source,
        line,
        undefined,
        `this is a capture (a "${type}" record of polar capture), not a trajectory file`,
        `build its trajectories first: polar build ${source} -o traj.jsonl (graded captures, as polar eval writes them, carry the rewards training needs)`,
      );
    }
    if (Array.isArray((value as { input_ids?: unknown }).input_ids)) {
      throw new InputError(
        source,
        line,
        undefined,
        'this is a verl-format row, not a polar trajectory',
        HINT,
      );
    }
  }
  const parsed = trajectoryRecordSchema.safeParse(value);
  if (!parsed.success) {
    const { field, message } = firstIssue(parsed.error);
    throw new InputError(source, line, field, message, HINT);
  }
  return parsed.data;
}

/** Streams validated trajectory records from a file or `-` (stdin). */
export async function* readTrajectories(
  source: string,
  options: ReadTrajectoriesOptions = {},
): AsyncGenerator<LocatedTrajectory> {
  for await (const line of readLines(source, options.stdin)) {
    try {
      const record = validateTrajectory(source, line.line, parseJsonLine(source, line));
      yield { record, source, line: line.line };
    } catch (error) {
      if (options.skipInvalid && error instanceof InputError) {
        options.onInvalid?.(error);
        continue;
      }
      throw error;
    }
  }
}
