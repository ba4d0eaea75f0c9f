/**
 * Assembles what the page shows from a trajectory file or a loop run directory: one section of
 * trajectories per file (per step for a run), their summaries and build stats, and for a run the series
 * plotted over steps.
 */
import type { StepHealth } from '../loop/health.ts';
import type { BuildStats } from '../trajectory/stats.ts';
import { plural } from '../util/plural.ts';
import type { Lenient } from '../util/zod.ts';
import {
  displayName,
  type RunInfo,
  readRunDir,
  readTrajectoryFile,
  type StepInfo,
  siblingBuildStats,
  type TrajectoryFile,
} from './reader.ts';
import type { Series } from './svg.ts';
import type { TokenDecoder } from './tokens.ts';
import {
  selectTrajectories,
  summarize,
  type TrajectorySummary,
  type TrajectoryView,
  trajectoryView,
  VocabTable,
} from './view.ts';

export interface Section {
  title: string;
  /** "showing 8 of 64 trajectories" and the like */
  note: string | null;
  summary: TrajectorySummary;
  buildStats: Lenient<BuildStats> | null;
  trajectories: TrajectoryView[];
  open: boolean;
}

export interface StepRow {
  step: number;
  status: string;
  duration_s: number | null;
  trajectories: number | null;
  reward_mean: number | null;
  pass_at_1: number | null;
  heldout_pass_at_1: number | null;
  loss: number | null;
  kl: number | null;
  clip_frac: number | null;
  tokens_per_s: number | null;
  calls_merged: string | null;
  tokens_trainable: number | null;
  /** rollout health (step.json's `health`, src/loop/health.ts): shares and counts, and its warnings */
  no_signal_share: number | null;
  drift_rate: number | null;
  failed_call_rate: number | null;
  truncated_traces: number | null;
  infra_errors: number | null;
  tool_calls_unparsed: number | null;
  health_warnings: string[];
  /** samples the grading integrity layers flagged, and the listed ones with their evidence */
  flagged: number | null;
  flagged_samples: NonNullable<StepHealth['flagged_samples']>;
}

export interface Chart {
  title: string;
  series: Series[];
  /** a rate from 0 to 1, shown as a percentage on an axis from 0% to at most 100% */
  percent?: boolean;
  /** a series that is never negative (KL, a fraction, a throughput): its axis starts at 0 at the lowest */
  nonNegative?: boolean;
}

export interface PageData {
  title: string;
  source: string;
  generated_at: string;
  tokenizer: string;
  max_tokens_per_trace: number;
  warnings: string[];
  run: { config: Record<string, unknown> | null; steps: StepRow[]; charts: Chart[] } | null;
  sections: Section[];
  vocab: VocabTable;
}

export interface ReportOptions {
  maxTokensPerTrace: number;
  /** trajectories shown per section; null = all */
  maxTrajectories: number | null;
  now?: Date;
  /** shown at the top of the page (e.g. the tokenizer is not the trajectories' model's) */
  warnings?: string[];
}

function mean(values: Array<number | null | undefined>): number | null {
  const v = values.filter((x): x is number => typeof x === 'number' && Number.isFinite(x));
  return v.length === 0 ? null : v.reduce((a, b) => a + b, 0) / v.length;
}

function sectionFrom(
  title: string,
  records: Parameters<typeof summarize>[0],
  invalid: string[],
  buildStats: Lenient<BuildStats> | null,
  limit: number | null,
  vocab: VocabTable,
  decoder: TokenDecoder,
  open: boolean,
): Section {
  const shown = selectTrajectories(records, limit);
  const notes: string[] = [];
  if (shown.length < records.length) {
    notes.push(
      `showing ${shown.length} of ${plural(records.length, 'trajectory', 'trajectories')} (the highest and lowest rewards; --max-trajectories)`,
    );
  }
  if (invalid.length > 0)
    notes.push(`${invalid.length} invalid line(s) skipped: ${invalid.slice(0, 3).join('; ')}`);
  return {
    title,
    note: notes.length ? notes.join('. ') : null,
    summary: summarize(records),
    buildStats,
    trajectories: shown.map((r) => trajectoryView(r, vocab, decoder)),
    open,
  };
}

export async function reportForFile(
  path: string,
  decoder: TokenDecoder,
  options: ReportOptions,
  read?: TrajectoryFile,
): Promise<PageData> {
  const warnings: string[] = [...(options.warnings ?? [])];
  const file = read ?? (await readTrajectoryFile(path));
  const vocab = new VocabTable(decoder);
  const stats = siblingBuildStats(path, warnings);
  const section = sectionFrom(
    displayName(path),
    file.records,
    file.invalid,
    stats,
    options.maxTrajectories,
    vocab,
    decoder,
    true,
  );
  return {
    title: `polar inspect: ${displayName(path)}`,
    source: path,
    generated_at: (options.now ?? new Date()).toISOString(),
    tokenizer: decoder.source,
    max_tokens_per_trace: options.maxTokensPerTrace,
    warnings,
    run: null,
    sections: [section],
    vocab,
  };
}

function duration(step: StepInfo): number | null {
  if (!step.started_at || !step.ended_at) return null;
  const d = (Date.parse(step.ended_at) - Date.parse(step.started_at)) / 1000;
  return Number.isFinite(d) ? d : null;
}

export function stepRow(step: StepInfo, summary: TrajectorySummary | null): StepRow {
  const b = step.buildStats;
  return {
    step: step.step,
    status: step.status,
    duration_s: duration(step),
    trajectories: summary?.trajectories ?? b?.trajectories_written ?? null,
    reward_mean: summary?.reward_mean ?? null,
    pass_at_1: step.eval?.pass_at_1 ?? null,
    heldout_pass_at_1: step.heldout?.pass_at_1 ?? null,
    loss: mean(step.metrics.map((m) => m.loss)),
    kl: mean(step.metrics.map((m) => m.kl)),
    clip_frac: mean(step.metrics.map((m) => m.clip_frac)),
    tokens_per_s: mean(step.metrics.map((m) => m.tokens_per_s)),
    calls_merged: b && typeof b.calls_used === 'number' ? `${b.calls_merged}/${b.calls_used}` : null,
    tokens_trainable: typeof b?.tokens_trainable === 'number' ? b.tokens_trainable : null,
    no_signal_share: step.health?.no_signal_share ?? null,
    drift_rate: step.health?.drift_rate ?? null,
    failed_call_rate: step.health?.failed_call_rate ?? null,
    truncated_traces: step.health?.truncated_traces ?? null,
    infra_errors: step.health?.infra_errors ?? null,
    tool_calls_unparsed: step.health?.tool_calls_unparsed ?? null,
    health_warnings: step.health?.warnings ?? [],
    flagged: step.health?.flagged ?? null,
    // read leniently: a listed sample's parts that are missing show as such
    flagged_samples: (step.health?.flagged_samples ?? []).map((f) => ({
      instance_id: f.instance_id ?? '?',
      sample: f.sample ?? 0,
      proven: f.proven ?? false,
      rejected: f.rejected ?? false,
      evidence: f.evidence ?? [],
    })),
  };
}

/** The run's charts over loop steps; train metrics are averaged over the step's metrics lines. */
export function runCharts(rows: StepRow[]): Chart[] {
  const s = (name: string, key: keyof StepRow): Series => ({
    name,
    points: rows.map((r) => [r.step, typeof r[key] === 'number' ? (r[key] as number) : null]),
  });
  return [
    { title: 'reward (mean over rollouts)', series: [s('reward', 'reward_mean')] },
    {
      title: 'pass@1',
      series: [s('rollouts', 'pass_at_1'), s('held-out', 'heldout_pass_at_1')],
      percent: true,
    },
    { title: 'loss', series: [s('loss', 'loss')] },
    { title: 'KL (k3, per token)', series: [s('kl', 'kl')], nonNegative: true },
    { title: 'clip fraction', series: [s('clip_frac', 'clip_frac')], nonNegative: true },
    { title: 'tokens/s (train)', series: [s('tokens/s', 'tokens_per_s')], nonNegative: true },
    {
      title: 'rollout health',
      series: [
        s('equal-reward groups', 'no_signal_share'),
        s('token drift', 'drift_rate'),
        s('failed calls', 'failed_call_rate'),
      ],
      percent: true,
    },
  ];
}

export async function reportForRun(
  dir: string,
  decoder: TokenDecoder,
  options: ReportOptions,
  run: RunInfo = readRunDir(dir),
): Promise<PageData> {
  const vocab = new VocabTable(decoder);
  const rows: StepRow[] = [];
  const sections: Section[] = [];
  const last = run.steps.map((s) => s.trajFile !== null).lastIndexOf(true);
  for (const [i, step] of run.steps.entries()) {
    let summary: TrajectorySummary | null = null;
    if (step.trajFile) {
      const file = await readTrajectoryFile(step.trajFile);
      const section = sectionFrom(
        `step ${step.step}`,
        file.records,
        file.invalid,
        step.buildStats,
        options.maxTrajectories,
        vocab,
        decoder,
        i === last,
      );
      summary = section.summary;
      sections.push(section);
    }
    rows.push(stepRow(step, summary));
  }
  return {
    title: `polar inspect: run ${displayName(dir.replace(/\/+$/, ''))}`,
    source: dir,
    generated_at: (options.now ?? new Date()).toISOString(),
    tokenizer: decoder.source,
    max_tokens_per_trace: options.maxTokensPerTrace,
    warnings: run.warnings,
    run: { config: run.config, steps: rows, charts: runCharts(rows) },
    sections: sections.reverse(),
    vocab,
  };
}
