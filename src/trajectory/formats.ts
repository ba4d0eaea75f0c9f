/**
 * Output formats of `polar build`. Each output line is written in two parts: a tail (the token data,
 * serialised once, when the session is built) and a head (reward, group: known only after every
 * session is read). The mapping of the `verl` rows is documented in docs/trajectory-format.md.
 */
import { isOverlong } from './overlong.ts';
import { TRAJECTORY_VERSION, type Trace, type TrajectoryRecord, type TrajectoryStats } from './record.ts';

export const outputFormats = ['polar', 'verl'] as const;
export type OutputFormat = (typeof outputFormats)[number];

/** The fields of a trajectory known only at the end of the run (or carried from its session record). */
export type TrajectoryHead = Pick<
  TrajectoryRecord,
  | 'id'
  | 'session'
  | 'task_id'
  | 'sample'
  | 'group_id'
  | 'harness'
  | 'model'
  | 'status'
  | 'reward'
  | 'policy_version'
> & {
  /** --overlong and its buffer, for polar train to apply: set when a trace has overlong facts */
  overlong?: TrajectoryRecord['overlong'];
  /** DAPO's length penalty under --overlong penalty (0 otherwise): added to the verl rows' reward */
  lengthPenalty: number;
};

/** What the verl rows' trainer cannot apply itself: --overlong mask zeroes an overlong trace's loss mask. */
export interface TailOptions {
  maskOverlong: boolean;
}

/** JSON of an object without its opening brace: `"a":1,...}`. */
function body(value: object): string {
  return JSON.stringify(value).slice(1);
}

/** The serialised tails of one trajectory, one per output line, each ending in a newline. */
export function encodeTails(
  format: OutputFormat,
  traces: readonly Trace[],
  stats: TrajectoryStats,
  options: TailOptions = { maskOverlong: false },
): string[] {
  if (format === 'polar') return [`${body({ traces, stats })}\n`];
  return traces.map((t) => {
    const n = t.prompt_ids.length;
    const inputIds = t.prompt_ids.concat(t.response_ids);
    const masked = options.maskOverlong && isOverlong(t);
    const lossMask = new Array<number>(n).fill(0).concat(masked ? t.loss_mask.map(() => 0) : t.loss_mask);
    const logprobs =
      t.response_logprobs === null ? null : new Array<number>(n).fill(0).concat(t.response_logprobs);
    return `${body({
      kind: t.kind,
      finish_reason: t.finish_reason,
      truncated: t.truncated === true,
      length_stopped: t.length_stopped ?? 0,
      headroom: t.headroom ?? null,
      token_exact: t.token_exact,
      prompt_length: n,
      input_ids: inputIds,
      loss_mask: lossMask,
      logprobs,
    })}\n`;
  });
}

/** The start of one output line, to be followed by one of its tails (`row` is the index of the tail). */
export function encodeHead(format: OutputFormat, head: TrajectoryHead, row: number): string {
  if (format === 'polar') {
    const {
      id,
      session,
      task_id,
      sample,
      group_id,
      harness,
      model,
      status,
      reward,
      overlong,
      policy_version,
    } = head;
    const h = {
      v: TRAJECTORY_VERSION,
      id,
      session,
      task_id,
      sample,
      group_id,
      harness,
      model,
      status,
      reward,
      ...(overlong ? { overlong } : {}),
      // only from a loop's captures (docs/trajectory-format.md)
      ...(policy_version !== undefined ? { policy_version } : {}),
    };
    return `${JSON.stringify(h).slice(0, -1)},`;
  }
  const h = {
    id: `${head.id}#${row}`,
    trajectory_id: head.id,
    trace_index: row,
    session: head.session,
    task_id: head.task_id,
    sample: head.sample,
    group_id: head.group_id,
    uid: head.group_id ?? head.id,
    status: head.status,
    // the verl rows' trainer reads the reward as it is: the length penalty is in it
    reward: head.reward === null ? null : head.reward + head.lengthPenalty,
    ...(head.policy_version !== undefined ? { policy_version: head.policy_version } : {}),
  };
  return `${JSON.stringify(h).slice(0, -1)},`;
}
