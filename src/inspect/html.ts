/**
 * Renders PageData as one self-contained HTML file: inline CSS, inline SVG charts, the token data as a
 * JSON block and the script that renders it (client.ts). No network, no external fonts.
 */
import type { BuildStats, Reasons } from '../trajectory/stats.ts';
import { plural } from '../util/plural.ts';
import type { Lenient } from '../util/zod.ts';
import { CLIENT_JS } from './client.ts';
import type { Chart, PageData, Section, StepRow } from './report.ts';
import { esc, lineChart } from './svg.ts';
import type { TraceView, TrajectorySummary, TrajectoryView } from './view.ts';

const num = (n: number | null | undefined): string =>
  typeof n === 'number' && Number.isFinite(n) ? n.toLocaleString('en-US') : '–';
const pct = (a: number, b: number): string => (b === 0 ? '–' : `${((100 * a) / b).toFixed(1)}%`);
const fixed = (n: number | null | undefined, digits = 3): string =>
  typeof n === 'number' && Number.isFinite(n) ? String(Number(n.toFixed(digits))) : '–';
const signed = (n: number | null | undefined): string =>
  typeof n === 'number' && Number.isFinite(n) ? `${n > 0 ? '+' : ''}${n.toFixed(3)}` : '–';

function list(reasons: Lenient<Reasons> | undefined): string {
  const entries = Object.entries(reasons ?? {}).filter((e): e is [string, number] => (e[1] ?? 0) > 0);
  if (entries.length === 0) return 'none';
  return entries.map(([k, n]) => `${k} ${num(n)}`).join(', ');
}

const CSS = `
:root { --fg:#0f172a; --muted:#64748b; --line:#e2e8f0; --bg:#f8fafc; --card:#fff;
  --m1:#dcfce7; --m1-line:#16a34a; --m1-fg:#14532d; --m0-fg:#475569; --prompt-fg:#64748b; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--fg);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", "Liberation Sans", sans-serif; }
main { max-width: 1280px; margin: 0 auto; padding: 20px 24px 60px; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 28px 0 10px; }
h3 { font-size: 14px; margin: 16px 0 8px; }
.sub { color: var(--muted); font-size: 12px; }
.warn { background:#fef9c3; border:1px solid #fde047; padding:6px 10px; border-radius:6px; margin:8px 0; font-size:12px; }
.cards { display:flex; flex-wrap:wrap; gap:10px; margin:14px 0; }
.card { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:8px 12px; min-width:130px; }
.card .k { color:var(--muted); font-size:11px; text-transform:uppercase; letter-spacing:.04em; }
.card .v { font-size:18px; font-weight:600; }
.card .d { color:var(--muted); font-size:11px; }
.charts { display:grid; grid-template-columns: repeat(auto-fill, minmax(400px, 1fr)); gap:10px; }
.chart { width:100%; height:auto; display:block; background:var(--card); border:1px solid var(--line); border-radius:8px; }
.chart .plot-bg { fill:#fff; } .chart .grid { stroke:#eef2f7; } .chart .tick { font-size:10px; fill:var(--muted); }
.chart .chart-title { font-size:12px; font-weight:600; fill:var(--fg); } .chart .legend { font-size:11px; fill:var(--fg); }
.chart .axis-label { font-size:10px; fill:var(--muted); } .chart .chart-empty { font-size:12px; fill:var(--muted); }
table { border-collapse:collapse; background:var(--card); font-size:12px; }
th, td { border:1px solid var(--line); padding:3px 8px; text-align:right; white-space:nowrap; }
th { background:#f1f5f9; font-weight:600; } td.l, th.l { text-align:left; }
.scroll { overflow-x:auto; } .scroll.overflows { box-shadow: inset -10px 0 8px -8px rgba(15,23,42,.25); }
table.steps th { white-space:normal; vertical-align:bottom; } table.steps td.warnings { white-space:normal; min-width:16em; }
table.kv td:first-child { text-align:left; color:var(--muted); } table.kv td:last-child { text-align:left; white-space:normal; }
details.section { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:8px 12px; margin:12px 0; }
details.section > summary { font-weight:600; font-size:15px; cursor:pointer; }
.legend-row { display:flex; flex-wrap:wrap; gap:8px; align-items:center; font-size:12px; margin:8px 0; color:var(--muted); }
details.traj { border:1px solid var(--line); border-radius:8px; margin:8px 0; background:#fff; }
details.traj > summary { padding:6px 10px; cursor:pointer; font-size:13px; display:flex; flex-wrap:wrap; gap:6px 12px; align-items:center; }
details.traj[open] > summary { border-bottom:1px solid var(--line); background:#f8fafc; }
.traj-body { padding: 6px 10px 10px; }
.pill { display:inline-block; padding:0 7px; border-radius:10px; font-size:12px; font-weight:600; background:#e2e8f0; }
.pill.good { background:#bbf7d0; color:#14532d; } .pill.bad { background:#fecaca; color:#7f1d1d; }
.pill.status-completed { background:#e0f2fe; color:#075985; } .pill.status-error, .pill.status-timeout { background:#fee2e2; color:#991b1b; }
.pill.status-truncated { background:#fef3c7; color:#92400e; }
.mono { font-family: ui-monospace, "DejaVu Sans Mono", "Liberation Mono", monospace; font-size:12px; }
.trace { border-top:1px dashed var(--line); padding-top:8px; margin-top:8px; }
.trace:first-child { border-top:none; margin-top:0; }
.trace-head { font-size:12px; color:var(--muted); display:flex; flex-wrap:wrap; gap:4px 10px; align-items:center; margin-bottom:6px; }
.trace-head b { color:var(--fg); }
.badge { display:inline-block; border:1px solid #fca5a5; color:#991b1b; background:#fef2f2; border-radius:4px; padding:0 5px; font-size:11px; }
.badge.info { border-color:#93c5fd; color:#1e3a8a; background:#eff6ff; }
details.prompt > summary { cursor:pointer; font-size:12px; color:var(--muted); margin:4px 0; }
.tokens { font-family: ui-monospace, "DejaVu Sans Mono", "Liberation Mono", monospace; font-size:12px; line-height:1.6;
  white-space:pre-wrap; word-break:break-word; background:#fcfcfd; border:1px solid var(--line); border-radius:6px; padding:8px 10px; }
.seg.m0 { color:var(--m0-fg); } .seg.prompt { color:var(--prompt-fg); }
.seg.m1 { background:var(--m1); color:var(--m1-fg); box-shadow: inset 0 -2px 0 var(--m1-line); }
.t.r-tool_call { color:#9a3412; font-weight:600; } .seg.m1 .t.r-tool_call { background:#fde7c7; }
.t.r-tool_response { color:#1e40af; background:#e8f0fe; }
.t.r-think { font-style:italic; color:#6d28d9; }
.t.sp { font-size:10px; color:#475569; background:#e2e8f0; border-radius:3px; padding:0 2px; font-weight:400; font-style:normal; }
.seg.m1 .t.sp { background:#86efac; color:#14532d; }
.t.low { text-decoration: underline wavy #dc2626; text-decoration-skip-ink:none; }
.seg.m1 .t.nl::before { content:'\\21B5'; opacity:.45; }
.t:hover { outline:1px solid #94a3b8; }
.mark { display:inline-block; font-family: system-ui, sans-serif; font-size:10px; font-weight:600; line-height:1.3; border-radius:3px;
  padding:0 5px; margin:0 3px; color:#fff; vertical-align:1px; white-space:nowrap; }
.mark-call { background:#2563eb; } .mark-call::before { content:'\\25B6  '; }
.mark-diverged { background:#dc2626; } .mark-diverged::before { content:'\\21B1  '; }
.mark-cut, .mark-truncated { background:#7f1d1d; } .mark-cut::before, .mark-truncated::before { content:'\\2702  '; }
.more { margin:6px 0; font-size:12px; color:var(--muted); display:flex; gap:8px; align-items:center; }
.more[hidden] { display:none; }
button.open-all { font:inherit; font-size:11px; font-weight:400; margin-left:8px; padding:1px 8px; border:1px solid #cbd5e1; background:#fff; border-radius:4px; cursor:pointer; }
.more button { font:inherit; font-size:12px; padding:2px 8px; border:1px solid #cbd5e1; background:#fff; border-radius:4px; cursor:pointer; }
.sample { padding:0 4px; border-radius:3px; font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size:12px; }
pre.config { font-size:11px; background:#fff; border:1px solid var(--line); border-radius:6px; padding:8px; overflow:auto; max-height:300px; }
`;

function card(k: string, v: string, d?: string): string {
  return `<div class="card"><div class="k">${esc(k)}</div><div class="v">${esc(v)}</div>${d ? `<div class="d">${esc(d)}</div>` : ''}</div>`;
}

function summaryCards(s: TrajectorySummary): string {
  const reward =
    s.reward_mean === null
      ? card('reward', '–', 'no rewards')
      : card(
          'reward mean',
          fixed(s.reward_mean),
          `min ${fixed(s.reward_min)} · max ${fixed(s.reward_max)} · ${s.rewarded} rewarded`,
        );
  return `<div class="cards">${[
    card('trajectories', num(s.trajectories), plural(s.groups, 'group')),
    card('traces', num(s.traces), list(s.kinds)),
    reward,
    card(
      'trained tokens',
      num(s.tokens_trainable),
      `of ${num(s.tokens_total)} (${pct(s.tokens_trainable, s.tokens_total)})`,
    ),
    // a trajectory's status (truncated: its last answer hit the token limit, or a trace was cut) and the
    // traces' own marks (cut to --max-trace-tokens; a chain a later call diverged from) count different things
    card(
      'trajectory status',
      Object.keys(s.status).length ? list(s.status) : '–',
      s.status.truncated
        ? "truncated: the model's last answer hit its token limit, or a trace was cut to --max-trace-tokens"
        : undefined,
    ),
    card(
      'token-exact traces',
      `${num(s.token_exact_traces)}/${num(s.traces)}`,
      `traces cut to --max-trace-tokens ${num(s.traces_truncated)} · chains ended by a divergence ${num(s.traces_chain_cut)} · spliced turns ${num(s.spliced_turns)}`,
    ),
  ].join('')}</div>`;
}

/** The build report as a table: the facts of formatStats (src/trajectory/stats.ts). */
export function buildStatsTable(b: Lenient<BuildStats>): string {
  const sessionsBuilt =
    (b.sessions ?? 0) - Object.values(b.sessions_skipped ?? {}).reduce<number>((a, n) => a + (n ?? 0), 0);
  const rows: Array<[string, string]> = [
    [
      'sessions',
      `${num(b.sessions)} → ${num(b.trajectories_written)} trajectories, ${num(b.traces_written)} traces`,
    ],
    [
      'calls merged into a chain',
      `${num(b.calls_merged)} of ${num(b.calls_used)} used (${pct(b.calls_merged ?? 0, b.calls_used ?? 0)}); ${num(b.calls)} seen`,
    ],
    [
      'chains per session',
      `${sessionsBuilt > 0 ? ((b.chains ?? 0) / sessionsBuilt).toFixed(2) : '–'} (${num(b.chains)} chains: ${list(b.kinds)})`,
    ],
    ['truncations', list(b.truncations)],
    ['spliced turns', num(b.spliced_turns)],
    [
      'tokens',
      `${num(b.tokens_trainable)} trainable of ${num(b.tokens_total)} (${pct(b.tokens_trainable ?? 0, b.tokens_total ?? 0)})`,
    ],
    ['status', list(b.status)],
    [
      'rewards',
      b.rewards ? `capture ${b.rewards.capture}, file ${b.rewards.file}, missing ${b.rewards.missing}` : '–',
    ],
    [
      'groups',
      `${num(b.groups)} (dropped as uniform ${num(b.groups_dropped_uniform)}, without reward ${num(b.groups_without_reward)})`,
    ],
    ['skipped lines', list(b.lines_skipped)],
    ['skipped files', list(b.files_skipped)],
    ['skipped calls', list(b.calls_skipped)],
    ['skipped sessions', list(b.sessions_skipped)],
    ['dropped traces', list(b.traces_dropped)],
    ['notes', list(b.notes)],
  ];
  return `<table class="kv build-stats">${rows.map(([k, v]) => `<tr><td>${esc(k)}</td><td>${esc(v)}</td></tr>`).join('')}</table>`;
}

function rewardPill(r: number | null): string {
  if (r === null) return '<span class="pill reward">reward –</span>';
  return `<span class="pill reward ${r > 0 ? 'good' : 'bad'}" data-reward="${r}">reward ${esc(fixed(r))}</span>`;
}

function traceHtml(t: TraceView, sec: number, traj: number): string {
  const badges = t.badges.map((b) => `<span class="badge">${esc(b)}</span>`).join('');
  const head = [
    `<b>trace ${t.index + 1}</b>`,
    `<span class="badge info kind">${esc(t.kind)}</span>`,
    `<span>prompt ${num(t.prompt_len)}</span>`,
    `<span>response ${num(t.response_len)} (<b>${num(t.trained)}</b> trained)</span>`,
    `<span>${num(t.calls)} call${t.calls === 1 ? '' : 's'}</span>`,
    `<span>finish ${esc(t.finish_reason ?? '–')}</span>`,
    badges,
  ].join('');
  const bar = (cls: string) =>
    `<div class="more ${cls}" hidden><span class="left"></span><button type="button" class="next">show more</button><button type="button" class="all">show all</button></div>`;
  return `<div class="trace" data-sec="${sec}" data-traj="${traj}" data-trace="${t.index}">
<div class="trace-head">${head}</div>
<details class="prompt"><summary>prompt: ${num(t.prompt_len)} tokens (mask 0, not trained) — click to show</summary><div class="tokens"></div>${bar('prompt-more')}</details>
<div class="tokens response"></div>${bar('response-more')}
</div>`;
}

function trajectoryHtml(t: TrajectoryView, sec: number, index: number, open: boolean): string {
  const parts = [
    `<b>#${index + 1}</b>`,
    `<span class="mono">${esc(t.task_id ?? t.id)}</span>`,
    t.sample !== null ? `<span>sample ${t.sample}</span>` : '',
    `<span class="pill status-${esc(t.status)}">${esc(t.status)}</span>`,
    rewardPill(t.reward),
    t.advantage === null ? '' : `<span class="pill advantage">adv ${esc(signed(t.advantage))}</span>`,
    `<span>${t.traces.length} trace${t.traces.length === 1 ? '' : 's'}</span>`,
    `<span>${num(t.tokens_total)} tokens (${num(t.tokens_trainable)} trained)</span>`,
    `<span class="sub">${esc(t.harness)} · ${esc(t.model)} · group ${esc(t.group_id ?? '–')} · ${esc(t.id)}</span>`,
  ];
  return `<details class="traj"${open ? ' open' : ''} data-id="${esc(t.id)}"><summary>${parts.join('')}</summary><div class="traj-body">${t.traces
    .map((tr) => traceHtml(tr, sec, index))
    .join('\n')}</div></details>`;
}

const LEGEND = `<div class="legend-row">legend:
<span class="sample" style="background:var(--m1);color:var(--m1-fg);box-shadow:inset 0 -2px 0 var(--m1-line)">trained (mask 1)</span>
<span class="sample" style="color:var(--m0-fg);border:1px solid var(--line)">untrained (mask 0: tool output, template glue)</span>
<span class="sample" style="color:#9a3412;font-weight:600">&lt;tool_call&gt;</span>
<span class="sample" style="color:#1e40af;background:#e8f0fe">&lt;tool_response&gt;</span>
<span class="sample" style="color:#6d28d9;font-style:italic">&lt;think&gt;</span>
<span class="sample" style="text-decoration:underline wavy #dc2626">sampled with p &lt; 0.1</span>
<span class="mark mark-call">call</span><span class="mark mark-diverged">divergence</span><span class="mark mark-cut">chain cut / truncated</span>
<span>hover a token for its id and logprob</span></div>`;

function sectionHtml(s: Section, sec: number, single: boolean): string {
  const body = [
    summaryCards(s.summary),
    s.note ? `<div class="warn">${esc(s.note)}</div>` : '',
    s.buildStats ? `<h3>build stats</h3><div class="scroll">${buildStatsTable(s.buildStats)}</div>` : '',
    `<h3>trajectories ${s.trajectories.length > 1 ? '<button type="button" class="open-all">open all</button>' : ''}</h3>`,
    LEGEND,
    s.trajectories.length === 0 ? '<p class="sub">no trajectories</p>' : '',
    ...s.trajectories.map((t, i) => trajectoryHtml(t, sec, i, s.open && i === 0)),
  ].join('\n');
  if (single) return `<section class="section">${body}</section>`;
  return `<details class="section"${s.open ? ' open' : ''}><summary>${esc(s.title)} · ${num(s.summary.trajectories)} trajectories · reward ${esc(fixed(s.summary.reward_mean))}</summary>${body}</details>`;
}

const share = (v: number | null) => (v === null ? '–' : `${(v * 100).toFixed(1)}%`);
const dur = (s: number | null) =>
  s === null ? '–' : s >= 120 ? `${(s / 60).toFixed(1)} min` : `${s.toFixed(0)} s`;
/** A table of `head` columns (a name ending in `<` is left-aligned: text, not figures) and its rows. */
const table = (cls: string, head: string[], body: string) =>
  `<div class="scroll"><table class="${cls}"><tr>${head.map((h) => (h.endsWith('<') ? `<th class="l">${esc(h.slice(0, -1))}</th>` : `<th>${esc(h)}</th>`)).join('')}</tr>${body}</table></div>`;

/**
 * The steps in two tables that each fit the page (issue 47 item 7: one table of 20 columns scrolled
 * sideways at 1280 px): what each step trained, then its rollout health.
 */
function stepsTable(rows: StepRow[]): string {
  const head = [
    'step',
    'status<',
    'time',
    'trajectories',
    'reward',
    'pass@1',
    'held-out pass@1',
    'loss',
    'KL',
    'clip frac',
    'tokens/s',
    'trained tokens',
  ];
  const body = rows
    .map(
      (r) =>
        `<tr data-step="${r.step}"><td>${r.step}</td><td class="l">${esc(r.status)}</td><td>${dur(r.duration_s)}</td><td>${num(r.trajectories)}</td><td>${fixed(r.reward_mean)}</td><td>${share(r.pass_at_1)}</td><td>${share(r.heldout_pass_at_1)}</td><td>${fixed(r.loss, 4)}</td><td>${fixed(r.kl, 4)}</td><td>${fixed(r.clip_frac, 4)}</td><td>${num(r.tokens_per_s === null ? null : Math.round(r.tokens_per_s))}</td><td>${num(r.tokens_trainable)}</td></tr>`,
    )
    .join('');
  return table('steps', head, body);
}

function healthTable(rows: StepRow[]): string {
  const head = [
    'step',
    'calls merged',
    'equal-reward groups',
    'token drift',
    'failed calls',
    'truncated',
    'infra errors',
    'unparsed tool calls',
    'flagged',
    'warnings<',
  ];
  const body = rows
    .map(
      (r) =>
        `<tr data-health-step="${r.step}"><td>${r.step}</td><td>${esc(r.calls_merged ?? '–')}</td><td>${share(r.no_signal_share)}</td><td>${share(r.drift_rate)}</td><td>${share(r.failed_call_rate)}</td><td>${num(r.truncated_traces)}</td><td>${num(r.infra_errors)}</td><td>${num(r.tool_calls_unparsed)}</td><td>${num(r.flagged)}</td><td class="l warnings">${r.health_warnings.map((w) => esc(w)).join('<br>') || '–'}</td></tr>`,
    )
    .join('');
  return `${table('steps health', head, body)}${flaggedList(rows)}`;
}

/** every step's flagged samples with their evidence (the grading integrity layers, docs/eval.md) */
function flaggedList(rows: StepRow[]): string {
  const items = rows.flatMap((r) =>
    r.flagged_samples.map(
      (f) =>
        `<li class="flagged"><b>step ${r.step} · ${esc(f.instance_id)} s${f.sample}</b> ${f.proven ? 'proven tampered with' : 'flagged'}${f.rejected ? ', graded 0' : ''}<ul>${f.evidence.map((e) => `<li>${esc(e)}</li>`).join('')}</ul></li>`,
    ),
  );
  return items.length ? `<h3>flagged samples</h3><ul class="flagged">${items.join('')}</ul>` : '';
}

function chartHtml(c: Chart): string {
  return lineChart(c.series, {
    title: c.title,
    xLabel: 'loop step',
    format: c.percent ? (v) => `${Number((v * 100).toFixed(1))}%` : undefined,
    // a rate or a quantity that cannot be negative never gets an axis below 0 (a pass@1 of 0 everywhere
    // drew -100% to 100%)
    ...(c.percent || c.nonNegative ? { yMin: 0 } : {}),
    ...(c.percent ? { yMax: 1 } : {}),
  });
}

/** JSON inside <script>: `<` escaped, so no `</script>` or `<!--` in the data can end the block. */
export function scriptJson(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

export function renderHtml(page: PageData): string {
  const data = {
    max: page.max_tokens_per_trace,
    vocab: page.vocab.entries,
    vid: page.vocab.ids,
    special: page.vocab.special,
    sections: page.sections.map((s) =>
      s.trajectories.map((t) =>
        t.traces.map((tr) => ({
          prompt_len: tr.prompt_len,
          ids: tr.ids,
          mask: tr.mask,
          lp: tr.lp,
          markers: tr.markers,
          regions: tr.regions,
        })),
      ),
    ),
  };
  const run = page.run;
  const last = run
    ? ([...run.steps].reverse().find((r) => r.status === 'done') ?? run.steps[run.steps.length - 1])
    : undefined;
  const runHtml = run
    ? [
        '<h2>run</h2>',
        `<div class="cards">${[
          card('steps', num(run.steps.length), `${run.steps.filter((r) => r.status === 'done').length} done`),
          card('latest reward', fixed(last?.reward_mean ?? null), last ? `step ${last.step}` : undefined),
          card(
            'latest pass@1',
            last?.pass_at_1 == null ? '–' : `${(last.pass_at_1 * 100).toFixed(1)}%`,
            last ? `step ${last.step}` : undefined,
          ),
        ].join('')}</div>`,
        `<div class="charts">${run.charts.map(chartHtml).join('')}</div>`,
        '<h2>steps</h2>',
        stepsTable(run.steps),
        '<h3>rollout health</h3>',
        healthTable(run.steps),
        run.config
          ? `<details><summary class="sub">loop.json</summary><pre class="config">${esc(JSON.stringify(run.config, null, 2))}</pre></details>`
          : '',
        '<h2>trajectories by step (newest first)</h2>',
      ].join('\n')
    : '';
  const single = page.run === null;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(page.title)}</title><style>${CSS}</style></head>
<body><main>
<h1>${esc(page.title)}</h1>
<div class="sub">${esc(page.source)} · generated ${esc(page.generated_at)} · tokenizer ${esc(page.tokenizer)} · up to ${num(page.max_tokens_per_trace)} tokens rendered per trace at a time</div>
${page.warnings.map((w) => `<div class="warn">${esc(w)}</div>`).join('\n')}
${runHtml}
${page.sections.map((s, i) => sectionHtml(s, i, single)).join('\n')}
</main>
<script id="polar-data" type="application/json">${scriptJson(data)}</script>
<script>${CLIENT_JS}</script>
</body></html>
`;
}
