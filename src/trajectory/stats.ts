/**
 * The report of one `polar build` run. Nothing is dropped silently: every skipped line, call, trace,
 * session or group is counted here under its reason. Printed as text on stderr (or stdout with --stats),
 * or as JSON with --json.
 */
import { z } from 'zod';
import { plural } from '../util/plural.ts';
import { type TraceKind, traceKinds } from './record.ts';

const tally = z.number().int().nonnegative();
const reasons = z.record(z.string(), tally);
export type Reasons = z.infer<typeof reasons>;

/**
 * The report, as `polar build --stats --json` prints it and `polar loop` writes it (step-N/build-stats.json,
 * LOOP_FILES.buildStats); `polar inspect` reads that file through this schema.
 */
export const buildStatsSchema = z.object({
  inputs: tally,
  lines: tally,
  /** lines skipped under --skip-invalid, by reason */
  lines_skipped: reasons,
  /** whole files skipped (non-capture JSONL found while scanning a directory) */
  files_skipped: reasons,
  /** session records seen */
  sessions: tally,
  trajectories_written: tally,
  traces_written: tally,
  sessions_skipped: reasons,
  /** call records seen */
  calls: tally,
  /** calls placed into a trace */
  calls_used: tally,
  /** calls that extended an existing chain (calls_used minus the calls that started a trace) */
  calls_merged: tally,
  calls_skipped: reasons,
  /** calls used although their ids are not token-exact, by cause (backend_info.token_inexact.cause) */
  calls_inexact: reasons,
  /** traces started, by kind, before filters */
  chains: tally,
  kinds: z.record(z.enum(traceKinds), tally),
  traces_dropped: reasons,
  truncations: reasons,
  spliced_turns: tally,
  status: reasons,
  /** irregularities that were handled without dropping anything (out-of-order seq, no session_end, ...) */
  notes: reasons,
  rewards: z.object({ capture: tally, file: tally, missing: tally }),
  groups: tally,
  groups_dropped_uniform: tally,
  groups_without_reward: tally,
  /** groups kept whose rewards are all equal (every advantage polar train computes is 0: nothing to learn) */
  groups_uniform: tally,
  /** groups kept of one sample (uniform too) */
  groups_single: tally,
  /** call records whose text holds a tool call the server did not parse (`tool_call_unparsed`) */
  calls_tool_unparsed: tally,
  /** built trajectories with such a call in their traces */
  trajectories_tool_unparsed: tally,
  /** of those, the ones whose reward --unparsed-tool-calls zero set to 0 */
  rewards_zeroed_unparsed: tally,
  /** call records that ended at their max tokens (finish reason length, any API's name for it) */
  calls_length: tally,
  /** written traces a length limit cut: a call ended at max tokens, or --max-trace-tokens cut it */
  traces_overlong: tally,
  /** written trajectories with such a trace */
  trajectories_overlong: tally,
  /** of those traces, the ones --overlong mask takes out of the loss (polar train applies it; verl rows here) */
  overlong_masked: tally,
  /** written trajectories whose reward --overlong penalty lowers (DAPO's soft overlong punishment) */
  overlong_penalised: tally,
  /** written trajectories only */
  tokens_trainable: tally,
  tokens_total: tally,
});
export type BuildStats = z.infer<typeof buildStatsSchema>;

export function emptyStats(): BuildStats {
  return {
    inputs: 0,
    lines: 0,
    lines_skipped: {},
    files_skipped: {},
    sessions: 0,
    trajectories_written: 0,
    traces_written: 0,
    sessions_skipped: {},
    calls: 0,
    calls_used: 0,
    calls_merged: 0,
    calls_skipped: {},
    calls_inexact: {},
    chains: 0,
    kinds: { root: 0, compaction: 0, subagent: 0, divergence: 0, side: 0 },
    traces_dropped: {},
    truncations: {},
    spliced_turns: 0,
    status: {},
    notes: {},
    rewards: { capture: 0, file: 0, missing: 0 },
    groups: 0,
    groups_dropped_uniform: 0,
    groups_without_reward: 0,
    groups_uniform: 0,
    groups_single: 0,
    calls_tool_unparsed: 0,
    trajectories_tool_unparsed: 0,
    rewards_zeroed_unparsed: 0,
    calls_length: 0,
    traces_overlong: 0,
    trajectories_overlong: 0,
    overlong_masked: 0,
    overlong_penalised: 0,
    tokens_trainable: 0,
    tokens_total: 0,
  };
}

export function count(reasons: Reasons, reason: string, n = 1): void {
  reasons[reason] = (reasons[reason] ?? 0) + n;
}

function total(reasons: Reasons): number {
  let s = 0;
  for (const v of Object.values(reasons)) s += v;
  return s;
}

function list(reasons: Reasons): string {
  const entries = Object.entries(reasons).filter(([, n]) => n > 0);
  if (entries.length === 0) return 'none';
  return entries.map(([k, n]) => `${k} ${n}`).join(', ');
}

const pct = (a: number, b: number): string => (b === 0 ? '-' : `${((100 * a) / b).toFixed(1)}%`);
const num = (n: number): string => n.toLocaleString('en-US');

/** The human-readable report, one fact per line. */
export function formatStats(s: BuildStats): string {
  const sessionsBuilt = s.sessions - total(s.sessions_skipped);
  const lines = [
    `polar build: ${plural(s.sessions, 'session')}, ${plural(s.calls, 'call')} -> ${plural(s.trajectories_written, 'trajectory', 'trajectories')}, ${plural(s.traces_written, 'trace')}`,
    `  calls in traces            ${num(s.calls_used)} of ${num(s.calls)} seen: ${num(s.calls_used - s.calls_merged)} started a trace, ${num(s.calls_merged)} extended one (prefix merging)`,
    `  chains per session         ${sessionsBuilt > 0 ? (s.chains / sessionsBuilt).toFixed(2) : '-'} (${num(s.chains)} chains: ${list(s.kinds)})`,
    `  truncations                ${list(s.truncations)}`,
    `  spliced turns              ${num(s.spliced_turns)}`,
    `  tokens                     ${num(s.tokens_trainable)} trainable of ${num(s.tokens_total)} (${pct(s.tokens_trainable, s.tokens_total)})`,
    `  status                     ${list(s.status)}`,
    `  rewards                    capture ${s.rewards.capture}, file ${s.rewards.file}, missing ${s.rewards.missing}`,
    `  groups                     ${num(s.groups)} (uniform rewards ${s.groups_uniform}, of them single samples ${s.groups_single}; dropped as uniform ${s.groups_dropped_uniform}, without reward ${s.groups_without_reward})`,
    `  skipped lines              ${list(s.lines_skipped)}`,
    `  skipped files              ${list(s.files_skipped)}`,
    `  skipped calls              ${list(s.calls_skipped)}`,
    `  calls not token-exact      ${list(s.calls_inexact)}`,
    `  tool calls not parsed      ${num(s.calls_tool_unparsed)} calls in ${num(s.trajectories_tool_unparsed)} trajectories (reward set to 0: ${num(s.rewards_zeroed_unparsed)})`,
    `  overlong                   ${num(s.calls_length)} calls at max tokens; ${num(s.traces_overlong)} traces in ${num(s.trajectories_overlong)} trajectories (masked: ${num(s.overlong_masked)}, penalised: ${num(s.overlong_penalised)})`,
    `  skipped sessions           ${list(s.sessions_skipped)}`,
    `  dropped traces             ${list(s.traces_dropped)}`,
    `  notes                      ${list(s.notes)}`,
  ];
  return lines.join('\n');
}

/** Adds one report into another (counts summed, reasons kept in first-seen order). */
export function addStats(into: BuildStats, from: BuildStats): void {
  const reasonKeys = [
    'lines_skipped',
    'files_skipped',
    'sessions_skipped',
    'calls_skipped',
    'calls_inexact',
    'traces_dropped',
    'truncations',
    'status',
    'notes',
  ] as const;
  const numberKeys = [
    'inputs',
    'lines',
    'sessions',
    'trajectories_written',
    'traces_written',
    'calls',
    'calls_used',
    'calls_merged',
    'chains',
    'spliced_turns',
    'groups',
    'groups_dropped_uniform',
    'groups_without_reward',
    'groups_uniform',
    'groups_single',
    'calls_tool_unparsed',
    'trajectories_tool_unparsed',
    'rewards_zeroed_unparsed',
    'calls_length',
    'traces_overlong',
    'trajectories_overlong',
    'overlong_masked',
    'overlong_penalised',
    'tokens_trainable',
    'tokens_total',
  ] as const;
  for (const key of numberKeys) into[key] += from[key];
  for (const key of reasonKeys) {
    for (const [reason, n] of Object.entries(from[key])) count(into[key], reason, n);
  }
  for (const [kind, n] of Object.entries(from.kinds)) into.kinds[kind as TraceKind] += n;
  into.rewards.capture += from.rewards.capture;
  into.rewards.file += from.rewards.file;
  into.rewards.missing += from.rewards.missing;
}

/**
 * Why a build wrote no trajectory, in words (null when it wrote some): no session at all, or sessions
 * whose calls, traces or groups were all skipped, each cause with its count (a capture cut off before
 * any call finished shows as calls 0 and its status).
 */
export function emptyBuildReason(s: BuildStats): string | null {
  if (s.trajectories_written > 0) return null;
  if (s.sessions === 0) {
    const skipped = total(s.files_skipped);
    return `no sessions found: ${plural(s.inputs, 'input file')} read, ${plural(s.lines, 'line')}${skipped ? `, ${plural(skipped, 'file')} skipped (${list(s.files_skipped)})` : ''}`;
  }
  const causes = [
    s.calls === 0 ? 'no call was recorded (a capture cut off before any call finished?)' : null,
    total(s.calls_skipped) ? `skipped calls: ${list(s.calls_skipped)}` : null,
    total(s.sessions_skipped) ? `skipped sessions: ${list(s.sessions_skipped)}` : null,
    total(s.traces_dropped) ? `dropped traces: ${list(s.traces_dropped)}` : null,
    s.groups_dropped_uniform ? `groups dropped as uniform: ${s.groups_dropped_uniform}` : null,
    total(s.status) ? `session status: ${list(s.status)}` : null,
  ].filter((c): c is string => c !== null);
  return `${plural(s.sessions, 'session')} and ${plural(s.calls, 'call')} read, nothing to build from them: ${causes.join('; ') || 'see the report'}`;
}

/**
 * What the report should warn about, in words: nothing built from an empty input, and groups from which
 * GRPO learns nothing (uniform rewards: every advantage polar train computes is 0, e.g. `--samples 1`:
 * groups of one).
 */
export function statsWarnings(s: BuildStats): string[] {
  const warnings: string[] = [];
  if (s.sessions === 0) {
    const skipped = total(s.files_skipped);
    warnings.push(
      `no sessions found: ${plural(s.inputs, 'input file')} read, ${plural(s.lines, 'line')}${skipped ? `, ${plural(skipped, 'file')} skipped (${list(s.files_skipped)})` : ''}; nothing was built`,
    );
    return warnings;
  }
  if (s.calls_tool_unparsed > 0) {
    warnings.push(
      `${plural(s.calls_tool_unparsed, 'call')} hold a tool call the server did not parse (tool_call_unparsed): the harness saw text and the turn ended; check the server's tool-call parser (vLLM: --enable-auto-tool-choice --tool-call-parser hermes)`,
    );
  }
  const scored = s.groups - s.groups_without_reward - s.groups_dropped_uniform;
  if (scored > 0 && s.groups_uniform === scored) {
    warnings.push(
      s.groups_single === scored
        ? `every group is a single sample (${plural(scored, 'group')}): every advantage is 0 and polar train has nothing to learn; sample each task several times (polar eval --samples 4 or more)`
        : `every group has uniform rewards (${plural(scored, 'group')}, ${s.groups_single} of them single samples): every advantage is 0 and polar train has nothing to learn`,
    );
  }
  return warnings;
}
