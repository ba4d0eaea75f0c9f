/**
 * The run's report: pass@1 as the mean over samples (a_j = resolved in sample j / instances) with its
 * standard deviation and standard error, unbiased pass@k, outcome counts, per-repository rates, and
 * polar's own overhead per sample (wall time minus the agent and the tests).
 */
import { z } from 'zod';
import { GRADE_STATUSES, type GradeStatus } from '../grade.ts';
import { FINDING_LAYERS } from '../integrity/findings.ts';

const gradeStatusSchema = z.enum(GRADE_STATUSES);

/** one finding of the integrity layers (src/rollout/integrity/findings.ts) */
const findingSchema = z.object({
  layer: z.enum(FINDING_LAYERS),
  reason: z.string(),
  file: z.string().optional(),
  line: z.number().int().optional(),
  tests: z.array(z.string()).optional(),
  proof: z.boolean().optional(),
});

/**
 * One line of results.jsonl (EVAL_FILES.results): the core every reader counts on, and what else the
 * writer (src/rollout/run/run.ts) adds (the agent's summary, the grading detail, the files) as further keys.
 */
export const resultLineSchema = z.looseObject({
  instance_id: z.string(),
  repo: z.string(),
  sample: z.number().int().nonnegative(),
  status: gradeStatusSchema,
  resolved: z.boolean(),
  /** null for an error: an infrastructure failure is no reward */
  reward: z.number().nullable(),
  reason: z.string().nullable(),
  suspicious: z.boolean(),
  /**
   * what the integrity layers found (src/rollout/integrity/findings.ts): the files named, the reasons,
   * whether the sample was graded 0 for it, whether a finding proves tampering, and each finding with its
   * evidence; absent in older lines
   */
  tampering: z
    .object({
      files: z.array(z.string()),
      reason: z.string(),
      rejected: z.boolean(),
      proven: z.boolean().optional(),
      findings: z.array(findingSchema).optional(),
    })
    .nullable()
    .optional(),
  /**
   * set on an `error` sample that got no run because its environment failed validation
   * (src/rollout/validate.ts); the report counts these apart (`excluded`)
   */
  excluded: z.literal('invalid_environment').optional(),
  /** the official version whose rules graded the sample ('4.1', '5'); null when no test log graded it */
  official_version: z.string().nullable().optional(),
  durations_ms: z
    .object({ total: z.number(), agent: z.number(), tests: z.number(), overhead: z.number() })
    .catchall(z.number()),
});
export type ResultLine = z.infer<typeof resultLineSchema>;

/** a rate in [0, 1]; null where nothing it counts over has a result yet */
const rate = z.number().nullable();

/** report.json (EVAL_FILES.report), written whole by buildReport; `polar inspect` reads it with this. */
export const reportSchema = z.looseObject({
  dataset: z.string(),
  agent: z.string(),
  model: z.string(),
  runtime: z.string(),
  instances: z.number().int().nonnegative(),
  samples: z.number().int().nonnegative(),
  total: z.number().int().nonnegative(),
  /** samples of the run without a result yet (an interrupted run; --resume runs them) */
  pending: z.number().int().nonnegative(),
  counts: z.record(gradeStatusSchema, z.number().int().nonnegative()),
  /**
   * over the samples that have results: a_j = resolved in sample j / instances with a result in sample j
   * (null for a sample with none); mean, std and sem null when no sample has a result
   */
  pass_at_1: z.object({ mean: rate, std: rate, sem: rate, per_sample: z.array(rate) }),
  /**
   * the same with every flagged sample (a `tampering` record: docs/eval.md, "Grading integrity") counted
   * as a failure, beside the official figure; absent in older reports
   */
  pass_at_1_unflagged: z.object({ mean: rate, std: rate, sem: rate, per_sample: z.array(rate) }).optional(),
  /** null while samples are pending: pass@k needs every sample of every instance */
  pass_at_k: z.record(z.string(), rate),
  per_repo: z.record(
    z.string(),
    z.object({ instances: z.number(), samples: z.number(), resolved: z.number(), rate: z.number() }),
  ),
  suspicious: z.number().int().nonnegative(),
  /**
   * samples the integrity layers flagged; `rejected`: graded 0 for it; `proven`: whose graded run was
   * proven tampered with (absent in older reports)
   */
  tampering: z
    .object({
      flagged: z.number().int().nonnegative(),
      rejected: z.number().int().nonnegative(),
      proven: z.number().int().nonnegative().optional(),
    })
    .optional(),
  /** samples graded from a test log, by the official version whose rules applied ('4.1', '5') */
  official_versions: z.record(z.string(), z.number()),
  overhead_ms: z.object({ mean: z.number(), max: z.number() }),
  errors: z.array(z.object({ instance_id: z.string(), sample: z.number(), reason: z.string().nullable() })),
  /**
   * samples with no score because their environment failed validation: in `counts.error`, left out of
   * pass@1, pass@k, per_repo and `errors` (absent in older reports)
   */
  excluded: z
    .object({
      invalid_environment: z.object({
        instances: z.number().int().nonnegative(),
        samples: z.number().int().nonnegative(),
        /** environment name -> why it failed validation */
        environments: z.record(z.string(), z.string()),
      }),
    })
    .optional(),
  created_at: z.string(),
});
export type Report = z.infer<typeof reportSchema>;

function binom(n: number, k: number): number {
  if (k < 0 || k > n) return 0;
  let r = 1;
  for (let i = 1; i <= k; i++) r = (r * (n - k + i)) / i;
  return r;
}

/** Unbiased pass@k for one instance with n samples and c successes: 1 - C(n-c, k) / C(n, k). */
export function passAtK(n: number, c: number, k: number): number {
  if (n - c < k) return 1;
  return 1 - binom(n - c, k) / binom(n, k);
}

export function meanStd(values: number[]): { mean: number | null; std: number | null; sem: number | null } {
  if (values.length === 0) return { mean: null, std: null, sem: null };
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  if (values.length === 1) return { mean, std: 0, sem: 0 };
  const variance = values.reduce((a, b) => a + (b - mean) ** 2, 0) / (values.length - 1);
  const std = Math.sqrt(variance);
  return { mean, std, sem: std / Math.sqrt(values.length) };
}

export function buildReport(
  all: ResultLine[],
  context: {
    dataset: string;
    agent: string;
    model: string;
    runtime: string;
    instances: string[];
    samples: number;
  },
): Report {
  const counts: Record<GradeStatus, number> = { resolved: 0, unresolved: 0, empty_patch: 0, error: 0 };
  for (const r of all) counts[r.status]++;
  // samples of an environment that failed validation are no measurement: counted apart, scored nowhere
  const excludedLines = all.filter((r) => r.excluded === 'invalid_environment');
  const excludedIds = new Set(excludedLines.map((r) => r.instance_id));
  const results = all.filter((r) => r.excluded !== 'invalid_environment');
  const instances = context.instances.filter((id) => !excludedIds.has(id));
  const n = instances.length;
  // a figure is made of results only: a sample without any (an interrupted run) has no pass@1
  const rates = (solved: (r: ResultLine) => boolean) => {
    const perSample: Array<number | null> = [];
    for (let j = 0; j < context.samples; j++) {
      const ran = results.filter((r) => r.sample === j);
      perSample.push(ran.length === 0 ? null : ran.filter(solved).length / ran.length);
    }
    return { ...meanStd(perSample.filter((a): a is number => a !== null)), per_sample: perSample };
  };
  const pending = Math.max(0, context.instances.length * context.samples - all.length);
  const byInstance = new Map<string, { n: number; c: number }>();
  for (const r of results) {
    const e = byInstance.get(r.instance_id) ?? { n: 0, c: 0 };
    e.n++;
    if (r.resolved) e.c++;
    byInstance.set(r.instance_id, e);
  }
  const passK: Record<string, number | null> = {};
  const ks = [...new Set([1, 2, 4, 8, 16, 32, context.samples].filter((k) => k <= context.samples))].sort(
    (a, b) => a - b,
  );
  for (const k of ks) {
    let sum = 0;
    for (const id of instances) {
      const e = byInstance.get(id);
      // samples never run count as failures
      sum += e ? passAtK(Math.max(e.n, context.samples), e.c, k) : 0;
    }
    passK[String(k)] = n === 0 || pending > 0 ? null : sum / n;
  }
  const perRepo: Report['per_repo'] = {};
  for (const r of results) {
    const e = perRepo[r.repo] ?? { instances: 0, samples: 0, resolved: 0, rate: 0 };
    e.samples++;
    if (r.resolved) e.resolved++;
    perRepo[r.repo] = e;
  }
  const repoInstances = new Map<string, Set<string>>();
  for (const r of results) {
    const set = repoInstances.get(r.repo) ?? new Set();
    set.add(r.instance_id);
    repoInstances.set(r.repo, set);
  }
  for (const [repo, e] of Object.entries(perRepo)) {
    e.instances = repoInstances.get(repo)?.size ?? 0;
    e.rate = e.samples === 0 ? 0 : e.resolved / e.samples;
  }
  const versions: Record<string, number> = {};
  for (const r of results) {
    if (typeof r.official_version === 'string')
      versions[r.official_version] = (versions[r.official_version] ?? 0) + 1;
  }
  const overheads = results.map((r) => r.durations_ms.overhead).filter((v) => Number.isFinite(v));
  return {
    dataset: context.dataset,
    agent: context.agent,
    model: context.model,
    runtime: context.runtime,
    instances: context.instances.length,
    samples: context.samples,
    total: all.length,
    pending,
    counts,
    pass_at_1: rates((r) => r.resolved),
    pass_at_1_unflagged: rates((r) => r.resolved && !r.tampering),
    pass_at_k: passK,
    per_repo: Object.fromEntries(Object.entries(perRepo).sort(([a], [b]) => a.localeCompare(b))),
    suspicious: results.filter((r) => r.suspicious).length,
    tampering: {
      flagged: results.filter((r) => r.tampering).length,
      rejected: results.filter((r) => r.tampering?.rejected).length,
      proven: results.filter((r) => r.tampering?.proven).length,
    },
    official_versions: versions,
    overhead_ms: {
      mean: overheads.length ? overheads.reduce((a, b) => a + b, 0) / overheads.length : 0,
      max: overheads.length ? Math.max(...overheads) : 0,
    },
    errors: results
      .filter((r) => r.status === 'error')
      .map((r) => ({ instance_id: r.instance_id, sample: r.sample, reason: r.reason })),
    ...(excludedLines.length > 0
      ? {
          excluded: {
            invalid_environment: {
              instances: excludedIds.size,
              samples: excludedLines.length,
              environments: Object.fromEntries(
                excludedLines.map((r) => [String(r.environment ?? r.instance_id), r.reason ?? '']),
              ),
            },
          },
        }
      : {}),
    created_at: new Date().toISOString(),
  };
}

const pct = (x: number | null) => (x === null ? 'n/a' : `${(x * 100).toFixed(1)}%`);

export function formatReport(report: Report): string {
  const p = report.pass_at_1;
  const out: string[] = [];
  out.push(
    `polar eval: ${report.dataset} — agent ${report.agent}, model ${report.model}, runtime ${report.runtime}`,
  );
  const withResults = p.per_sample.filter((a) => a !== null).length;
  out.push(
    `pass@1  ${pct(p.mean)}${withResults > 1 ? ` ± ${pct(p.std)} (std over ${withResults} samples, sem ${pct(p.sem)})` : ''}${report.pending > 0 ? ` (${report.pending} of ${report.instances * report.samples} not run: --resume runs them)` : ''}`,
  );
  const strict = report.pass_at_1_unflagged;
  if (report.tampering?.flagged && strict)
    out.push(
      `pass@1  ${pct(strict.mean)} with the ${report.tampering.flagged} flagged samples counted as failures (the figure above: the official rules)`,
    );
  for (const [k, v] of Object.entries(report.pass_at_k)) if (k !== '1') out.push(`pass@${k}  ${pct(v)}`);
  const c = report.counts;
  out.push(
    `samples ${report.total} of ${report.instances * report.samples}: resolved ${c.resolved}, unresolved ${c.unresolved}, empty patch ${c.empty_patch}, error ${c.error}${report.suspicious ? `, suspicious ${report.suspicious}` : ''}`,
  );
  const t = report.tampering;
  if (t?.flagged)
    out.push(
      `test tampering: ${t.flagged} samples flagged${t.proven ? `, ${t.proven} proven (graded 0)` : ''}${t.rejected ? `, ${t.rejected} graded 0` : ' (--reject-test-tampering grades them 0)'}: results.jsonl \`tampering\` and polar inspect show the evidence`,
    );
  const versions = Object.entries(report.official_versions ?? {});
  if (versions.length > 0)
    out.push(`graded by official rules: ${versions.map(([v, n]) => `v${v} ${n}`).join(', ')} (docs/eval.md)`);
  const repos = Object.entries(report.per_repo);
  if (repos.length > 0) {
    const width = Math.max(10, ...repos.map(([r]) => r.length));
    out.push('');
    out.push(`${'repository'.padEnd(width)}  instances  resolved  rate`);
    for (const [repo, e] of repos) {
      out.push(
        `${repo.padEnd(width)}  ${String(e.instances).padStart(9)}  ${`${e.resolved}/${e.samples}`.padStart(8)}  ${pct(e.rate).padStart(6)}`,
      );
    }
  }
  const excluded = report.excluded?.invalid_environment;
  if (excluded) {
    out.push('');
    out.push(
      `excluded: ${excluded.instances} instances (${excluded.samples} samples) whose environment failed validation, left out of pass@1:`,
    );
    for (const [name, why] of Object.entries(excluded.environments)) out.push(`  ${name}: ${why}`);
  }
  if (report.errors.length > 0) {
    out.push('');
    out.push('errors:');
    for (const e of report.errors.slice(0, 10)) out.push(`  ${e.instance_id} s${e.sample}: ${e.reason}`);
    if (report.errors.length > 10)
      out.push(`  ... and ${report.errors.length - 10} more (see results.jsonl)`);
  }
  return out.join('\n');
}
