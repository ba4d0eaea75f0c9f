/**
 * A sample's reward made final: the judge asked (alone, or with the rest of its task's group once the
 * group is in), every component kept on the result line (`rewards`, `judge`) and the total computed by
 * the --reward expression (src/options/reward.ts). Runs where polar eval records each finished sample
 * (src/rollout/run/run.ts runEvalWith), after the sample's own grading, so the grading record appended to the
 * capture carries the final reward. A judge failure makes the sample an infrastructure `error` (no
 * reward, capture set aside, run again by --resume), never a 0. An errored sample is passed on as it is;
 * in group mode it still counts toward its group being complete, but is not shown to the judge.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { combineReward, type RewardName } from '../../options/reward.ts';
import { log } from '../../util/log.ts';
import type { SweInstance } from '../dataset.ts';
import { setAside } from '../run/out.ts';
import type { ResultLine } from '../run/report.ts';
import { Judge } from './judge.ts';
import type { RewardSetup } from './setup.ts';
import { readTranscript } from './transcript.ts';
import { JudgeFailure, type JudgeSample, type JudgeScore } from './types.ts';

/** A finished line and the session id of its capture (for the grading record); null session: none. */
export type Finished = (line: ResultLine, session: string | null) => Promise<void>;

interface Pending {
  line: ResultLine;
  session: string | null;
  sample: JudgeSample | null;
}

export interface RewardFinisher {
  /** a sample's line as its grading left it */
  add(line: ResultLine): Promise<void>;
  /** calls made to the judge server */
  readonly judgeCalls: number;
}

const keyOf = (line: ResultLine) => `${line.instance_id}__s${line.sample}`;

async function judgeSample(
  line: ResultLine,
  statements: Map<string, string>,
): Promise<{ session: string | null; sample: JudgeSample }> {
  const capture = typeof line.capture === 'string' ? line.capture : null;
  const transcript = await readTranscript(capture);
  const patchFile = typeof line.patch_file === 'string' ? line.patch_file : '';
  const patch = patchFile && existsSync(patchFile) ? await readFile(patchFile, 'utf8') : '';
  return {
    session: transcript.session,
    sample: {
      key: keyOf(line),
      task: transcript.task || (statements.get(line.instance_id) ?? ''),
      transcript: transcript.text,
      patch,
    },
  };
}

/** The line with its components and total, or an infrastructure error when the judge failed. */
export function finalLine(
  setup: RewardSetup,
  line: ResultLine,
  verdict: JudgeScore | JudgeFailure | null,
): ResultLine {
  if (verdict instanceof JudgeFailure)
    return {
      ...line,
      status: 'error',
      resolved: false,
      reward: null,
      reason: `judge: ${verdict.message}`,
      judge: { error: verdict.message },
    };
  const components: Partial<Record<RewardName, number>> = {};
  if (setup.primary !== 'judge') components[setup.primary] = line.reward ?? 0;
  const out: ResultLine = { ...line };
  if (verdict) {
    components.judge = verdict.score;
    out.judge = {
      score: verdict.score,
      reason: verdict.reason,
      mode: setup.judge?.mode,
      model: setup.judge?.model,
      cached: (verdict as { cached?: boolean }).cached ?? false,
    };
    // the judge alone grades: `resolved` is a full score, as for a verifier's reward
    if (setup.primary === 'judge') {
      out.status = verdict.score >= 1 ? 'resolved' : 'unresolved';
      out.resolved = out.status === 'resolved';
      out.reason = out.resolved ? null : `judge: ${verdict.reason}`;
      out.grader = 'judge';
    }
  }
  out.rewards = components;
  out.reward_expr = setup.reward.text;
  out.reward = combineReward(setup.reward, components);
  return out;
}

/**
 * The finisher of a run: `expected` is how many samples of each instance this run grades (a group is
 * complete when that many lines are in), `statements` each instance's problem statement (the task when a
 * capture has none).
 */
export async function rewardFinisher(
  setup: RewardSetup,
  runDir: string,
  expected: Map<string, number>,
  statements: Map<string, string>,
  done: Finished,
  signal?: AbortSignal,
): Promise<RewardFinisher> {
  const judge = setup.judge ? await Judge.open(setup.judge, runDir) : null;
  const groups = new Map<string, Pending[]>();

  const finishOne = async (p: Pending, verdict: JudgeScore | JudgeFailure | null) =>
    done(p.line.status === 'error' ? p.line : finalLine(setup, p.line, verdict), p.session);

  const add = async (line: ResultLine): Promise<void> => {
    const read = line.status === 'error' ? null : await judgeSample(line, statements);
    const pending: Pending = {
      line,
      session: read?.session ?? null,
      sample: judge && read ? read.sample : null,
    };
    if (!judge) return finishOne(pending, null);
    if (judge.config.mode === 'single') {
      if (!pending.sample) return finishOne(pending, null);
      return finishOne(pending, await judge.single(pending.sample, signal).catch(failure));
    }
    // group mode: wait for the task's other samples of this run, then show them in sample order
    const members = groups.get(line.instance_id) ?? [];
    members.push(pending);
    groups.set(line.instance_id, members);
    if (members.length < (expected.get(line.instance_id) ?? 1)) return;
    groups.delete(line.instance_id);
    members.sort((a, b) => a.line.sample - b.line.sample);
    const judged = members.filter((m) => m.sample !== null);
    let verdicts: Array<JudgeScore | JudgeFailure> = [];
    if (judged.length > 0) {
      try {
        verdicts = await judge.group(
          judged.map((m) => m.sample as JudgeSample),
          signal,
        );
      } catch (error) {
        verdicts = judged.map(() => failure(error));
      }
    }
    for (const m of members) {
      const at = judged.indexOf(m);
      await finishOne(m, at === -1 ? null : (verdicts[at] as JudgeScore | JudgeFailure));
    }
  };
  return {
    add,
    get judgeCalls() {
      return judge?.calls ?? 0;
    },
  };
}

function failure(error: unknown): JudgeFailure {
  if (error instanceof JudgeFailure) return error;
  return new JudgeFailure((error as Error).message);
}

/**
 * A run's `record` behind the finisher (src/rollout/run/run.ts runEvalWith): the judge asked, the components
 * combined, then the grading record appended to the capture (or, for a judge failure, the capture set
 * aside as any errored sample's: `polar build DIR` does not read it) and the line recorded.
 */
export async function recordFinished(
  setup: RewardSetup,
  run: {
    out: string;
    jobs: Array<{ instance: SweInstance; sample: number }>;
    instances: SweInstance[];
    record: (line: ResultLine) => Promise<void>;
    appendGrading: (capture: string, session: string, line: ResultLine) => Promise<void>;
    signal?: AbortSignal | undefined;
  },
): Promise<(line: ResultLine) => Promise<void>> {
  const expected = new Map<string, number>();
  for (const { instance } of run.jobs)
    expected.set(instance.instance_id, (expected.get(instance.instance_id) ?? 0) + 1);
  const statements = new Map(run.instances.map((i) => [i.instance_id, i.problem_statement]));
  const finisher = await rewardFinisher(
    setup,
    run.out,
    expected,
    statements,
    async (line, session) => {
      const capture = typeof line.capture === 'string' ? line.capture : null;
      if (capture && line.status === 'error') {
        // (one set aside by the sample's own run already is not moved again)
        if (capture.endsWith('.jsonl')) line.capture = await setAside(capture, 'error');
      } else if (capture && session) {
        await run
          .appendGrading(capture, session, line)
          .catch((error) =>
            log.warn(
              `${line.instance_id} s${line.sample}: cannot append the grading record to ${capture}: ${(error as Error).message}`,
            ),
          );
      }
      await run.record(line);
    },
    run.signal,
  );
  return (line) => finisher.add(line);
}
