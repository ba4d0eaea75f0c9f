/** Hand-made trajectory records and run directories for the inspect tests, tokenized with the real Qwen3 tokenizer. */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Trace, TrajectoryRecord } from '../../../src/trajectory/record.ts';
import { emptyStats } from '../../../src/trajectory/stats.ts';
import { qwenTokenizer } from '../../support/qwen-tokenizer.ts';

export const PROMPT =
  '<|im_start|>system\nYou are a coding agent.<|im_end|>\n<|im_start|>user\nFix the bug 🦜 in a.py<|im_end|>\n<|im_start|>assistant\n';
export const CALL1 =
  '<think>\nLet me look at the file first.\n</think>\n\n<tool_call>\n{"name": "bash", "arguments": {"cmd": "cat a.py"}}\n</tool_call><|im_end|>';
export const GLUE =
  '\n<|im_start|>user\n<tool_response>\nprint("hi") </script><b>x</b>\n</tool_response><|im_end|>\n<|im_start|>assistant\n';
export const CALL2 = 'Done: the café bug is fixed 🦜.<|im_end|>';

export async function encode(text: string): Promise<number[]> {
  const t = await qwenTokenizer();
  return t.encode(text, { add_special_tokens: false });
}

/** A two-call trace: prompt, call 1 (mask 1), tool response glue (mask 0), call 2 (mask 1). */
export async function makeTrace(extra: Partial<Trace> = {}): Promise<Trace> {
  const prompt = await encode(PROMPT);
  const c1 = await encode(CALL1);
  const glue = await encode(GLUE);
  const c2 = await encode(CALL2);
  const response = [...c1, ...glue, ...c2];
  const mask = [...c1.map(() => 1), ...glue.map(() => 0), ...c2.map(() => 1)] as Array<0 | 1>;
  const logprobs = mask.map((m, i) => (m === 1 ? (i === 3 ? -3.2 : -0.05) : 0));
  return {
    kind: 'root',
    prompt_ids: prompt,
    response_ids: response,
    loss_mask: mask,
    response_logprobs: logprobs,
    finish_reason: 'stop',
    calls: ['call-a', 'call-b'],
    token_exact: true,
    ...extra,
  };
}

export function makeRecord(
  id: string,
  traces: Trace[],
  extra: Partial<TrajectoryRecord> = {},
): TrajectoryRecord {
  let trainable = 0;
  let total = 0;
  for (const t of traces) {
    trainable += t.loss_mask.filter((m) => m === 1).length;
    total += t.prompt_ids.length + t.response_ids.length;
  }
  return {
    v: 1,
    id,
    session: id,
    task_id: 'demo__task-1',
    sample: 0,
    group_id: 'demo__task-1',
    harness: 'pi',
    model: 'qwen3-test',
    status: 'completed',
    reward: 1,
    advantage: 0.5,
    traces,
    stats: {
      calls: traces.reduce((a, t) => a + t.calls.length, 0),
      calls_merged: 1,
      chains: traces.length,
      truncations: 0,
      spliced_turns: 0,
      tokens_trainable: trainable,
      tokens_total: total,
    },
    ...extra,
  };
}

export function writeJsonl(path: string, values: unknown[]): void {
  writeFileSync(path, values.map((v) => JSON.stringify(v)).join('\n') + '\n');
}

export function buildStatsFixture(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    ...emptyStats(),
    inputs: 1,
    sessions: 2,
    trajectories_written: 2,
    traces_written: 3,
    calls: 5,
    calls_used: 5,
    calls_merged: 2,
    chains: 3,
    kinds: { root: 2, compaction: 0, subagent: 0, divergence: 1, side: 0 },
    truncations: { divergence: 1 },
    status: { completed: 2 },
    rewards: { capture: 2, file: 0, missing: 0 },
    groups: 1,
    tokens_trainable: 120,
    tokens_total: 400,
    ...over,
  };
}

/** Two trajectories: a plain two-call rollout, and one with a divergence branch whose parent was cut. */
export async function sampleRecords(): Promise<TrajectoryRecord[]> {
  const a = makeRecord('sess-a', [await makeTrace()]);
  const parent = await makeTrace({ cut: 'divergence' });
  const branch = await makeTrace({
    kind: 'divergence',
    parent: 0,
    diverged_at: parent.prompt_ids.length + 5,
    truncated: true,
    spliced_turns: 1,
    calls: ['call-c', 'call-d'],
  });
  branch.prompt_ids = [...parent.prompt_ids, ...parent.response_ids.slice(0, 5)];
  const b = makeRecord('sess-b', [parent, branch], {
    reward: 0,
    advantage: -0.5,
    sample: 1,
    status: 'truncated',
  });
  return [a, b];
}

export interface RunDirOptions {
  /** step 3 is left half-written (no step.json, no train/eval, a broken metrics line) */
  running?: boolean;
}

/** A loop run directory with steps 1 and 2 done (held-out eval on step 2) and optionally a step 3 still running. */
export async function makeRunDir(dir: string, options: RunDirOptions = {}): Promise<void> {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'loop.json'), JSON.stringify({ steps: 3, harness: 'pi', model: 'qwen3-test' }));
  const records = await sampleRecords();
  const steps = [
    { n: 1, rewards: [0, 0], pass: 0.25, loss: [0.5, 0.3], kl: 0.01, clip: 0.1, tps: 1000 },
    { n: 2, rewards: [1, 0], pass: 0.5, loss: [0.2], kl: 0.02, clip: 0.05, tps: 1500, heldout: 0.4 },
  ];
  for (const s of steps) {
    const sd = join(dir, `step-${s.n}`);
    mkdirSync(join(sd, 'captures'), { recursive: true });
    mkdirSync(join(sd, 'train'), { recursive: true });
    mkdirSync(join(sd, 'eval'), { recursive: true });
    writeFileSync(join(sd, 'captures', 'a.jsonl'), '');
    writeJsonl(
      join(sd, 'traj.jsonl'),
      records.map((r, i) => ({ ...r, reward: s.rewards[i] })),
    );
    writeFileSync(join(sd, 'build-stats.json'), JSON.stringify(buildStatsFixture()));
    writeJsonl(
      join(sd, 'train', 'metrics.jsonl'),
      s.loss.map((loss, i) => ({
        event: 'step',
        step: i + 1,
        total_steps: s.loss.length,
        loss,
        pg_loss: loss,
        kl: s.kl,
        clip_frac: s.clip,
        tokens_per_s: s.tps,
        lr: 1e-6,
      })),
    );
    writeFileSync(
      join(sd, 'eval', 'report.json'),
      JSON.stringify({
        dataset: 'mini',
        instances: 4,
        samples: 1,
        total: 4,
        counts: { resolved: s.pass * 4, unresolved: 4 - s.pass * 4, empty_patch: 0, error: 0 },
        pass_at_1: { mean: s.pass, std: 0, sem: 0, per_sample: [s.pass] },
      }),
    );
    if (s.heldout !== undefined) {
      mkdirSync(join(sd, 'heldout'), { recursive: true });
      writeFileSync(
        join(sd, 'heldout', 'report.json'),
        JSON.stringify({
          instances: 10,
          samples: 1,
          total: 10,
          counts: {},
          pass_at_1: { mean: s.heldout, std: 0 },
        }),
      );
    }
    writeFileSync(
      join(sd, 'step.json'),
      JSON.stringify({
        step: s.n,
        started_at: `2025-01-01T00:0${s.n}:00.000Z`,
        ended_at: `2025-01-01T00:0${s.n}:30.000Z`,
        status: 'done',
        // the rollout health polar loop writes (src/loop/health.ts), on the first step
        ...(s.n === 1
          ? {
              health: {
                groups: 4,
                groups_no_signal: 3,
                no_signal_share: 0.75,
                drift_rate: 0,
                failed_call_rate: 0.125,
                truncated_traces: 2,
                infra_errors: 1,
                tool_calls_unparsed: 0,
                flagged: 1,
                tampering_proven: 1,
                flagged_samples: [
                  {
                    instance_id: 'repo__x-1',
                    sample: 2,
                    proven: true,
                    rejected: true,
                    evidence: [
                      'runner-access: pkg/__init__.py:7: registers an exit hook (atexit)',
                      'proof: a canary test polar added was reported wrongly (tests/test_c.py::test_f: PASSED)',
                    ],
                  },
                ],
                warnings: [
                  '75% of groups have equal rewards (3 all solved, 0 all failed): raise --group-size or pick harder tasks',
                ],
              },
            }
          : {}),
      }),
    );
  }
  if (options.running) {
    const sd = join(dir, 'step-3');
    mkdirSync(join(sd, 'captures'), { recursive: true });
    mkdirSync(join(sd, 'train'), { recursive: true });
    writeFileSync(join(sd, 'captures', 'a.jsonl'), '');
    writeFileSync(join(sd, 'train', 'metrics.jsonl'), '{"event":"step","step":1,"loss":0.1}\n{"event":"st');
    writeFileSync(join(sd, 'build-stats.json'), '{"sessions": 2, "calls');
  }
}
