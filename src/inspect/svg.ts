/** A small hand-written SVG line chart for `polar inspect` (no chart library; inline in the page). */

export interface Series {
  name: string;
  /** [x, y]; y null = no value at x (the line breaks there) */
  points: Array<[number, number | null]>;
  color?: string;
}

export interface ChartOptions {
  title: string;
  xLabel?: string;
  width?: number;
  height?: number;
  /** format of y tick labels */
  format?: (v: number) => string;
  /** the y axis never goes below this (a series that cannot be negative: a rate, a count) */
  yMin?: number;
  /** the y axis never goes above this (a rate: 1) */
  yMax?: number;
}

const PALETTE = ['#2563eb', '#d97706', '#059669', '#db2777', '#7c3aed'];

export const esc = (s: string): string =>
  s.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string,
  );

/**
 * About `count` round tick values covering [lo, hi]; `bounds` keeps the axis within what the series can
 * be (a rate of 0 is drawn on an axis from 0 up, not from -100%).
 */
export function niceTicks(
  lo: number,
  hi: number,
  count = 5,
  bounds: { min?: number; max?: number } = {},
): number[] {
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return [];
  if (lo === hi) {
    const d = Math.abs(lo) > 0 ? Math.abs(lo) * 0.1 : 1;
    lo -= d;
    hi += d;
    // widened away from a bound the value sits on: 0% is drawn on 0% to 100%, not -100% to 100%
    if (bounds.min !== undefined && lo < bounds.min) [lo, hi] = [bounds.min, hi + (bounds.min - lo)];
    if (bounds.max !== undefined && hi > bounds.max) [lo, hi] = [lo - (hi - bounds.max), bounds.max];
    if (bounds.min !== undefined) lo = Math.max(lo, bounds.min);
  }
  const raw = (hi - lo) / Math.max(1, count);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const ticks: number[] = [];
  const first = Math.floor(lo / step + 1e-9) * step;
  for (let k = 0; k < 100; k++) {
    const v = Number((first + k * step).toPrecision(12));
    ticks.push(v);
    if (v >= hi - step * 1e-9) break;
  }
  const clamp = (v: number) =>
    Math.min(bounds.max ?? Number.POSITIVE_INFINITY, Math.max(bounds.min ?? Number.NEGATIVE_INFINITY, v));
  return [...new Set(ticks.map(clamp))];
}

export function defaultFormat(v: number): string {
  const a = Math.abs(v);
  if (a === 0) return '0';
  if (a >= 1e6) return `${(v / 1e6).toFixed(1)}M`;
  if (a >= 1e4) return `${(v / 1e3).toFixed(0)}k`;
  if (a >= 100) return v.toFixed(0);
  if (a >= 1) return String(Number(v.toFixed(2)));
  if (a >= 1e-3) return String(Number(v.toPrecision(3)));
  return v.toExponential(1);
}

/** A text's width in the chart's sans-serif at `size` px, estimated (no layout engine here): generous. */
export function textWidth(text: string, size: number, bold = false): number {
  return text.length * size * (bold ? 0.64 : 0.6);
}

/** Where a chart's legend goes: right-aligned on the title's row when it fits beside the title, else a row of its own. */
export function legendLayout(
  title: string,
  names: readonly string[],
  left: number,
  right: number,
): { x: number[]; row: number; ownRow: boolean } {
  const widths = names.map((n) => 14 + textWidth(n, 11) + 14);
  const total = widths.reduce((a, b) => a + b, 0);
  const titleEnd = left + textWidth(title, 12, true);
  const ownRow = right - total < titleEnd + 12;
  let x = ownRow ? left : right - total;
  const xs = widths.map((w) => {
    const at = x;
    x += w;
    return at;
  });
  return { x: xs, row: ownRow ? 24 : 8, ownRow };
}

export function lineChart(series: Series[], options: ChartOptions): string {
  const W = options.width ?? 420;
  const H = options.height ?? 220;
  const fmt = options.format ?? defaultFormat;
  const m = { l: 52, r: 14, t: 30, b: 36 };
  // the legend (several series) beside the title, or on a row under it (it overlapped the title)
  const legend =
    series.length > 1
      ? legendLayout(
          options.title,
          series.map((s) => s.name),
          m.l,
          W - m.r,
        )
      : null;
  if (legend?.ownRow) m.t += 16;
  const pw = W - m.l - m.r;
  const ph = H - m.t - m.b;
  const all = series.flatMap((s) => s.points.filter((p): p is [number, number] => p[1] !== null));
  const head = `<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(options.title)}">`;
  const title = `<text class="chart-title" x="${m.l}" y="18">${esc(options.title)}</text>`;
  if (all.length === 0) {
    return `${head}${title}<rect x="${m.l}" y="${m.t}" width="${pw}" height="${ph}" class="plot-bg"/><text class="chart-empty" x="${m.l + pw / 2}" y="${m.t + ph / 2}" text-anchor="middle">no data yet</text></svg>`;
  }
  const xs = series.flatMap((s) => s.points.map((p) => p[0]));
  let x0 = Math.min(...xs);
  let x1 = Math.max(...xs);
  if (x0 === x1) {
    x0 -= 1;
    x1 += 1;
  }
  const yt = niceTicks(Math.min(...all.map((p) => p[1])), Math.max(...all.map((p) => p[1])), 4, {
    ...(options.yMin !== undefined ? { min: options.yMin } : {}),
    ...(options.yMax !== undefined ? { max: options.yMax } : {}),
  });
  const y0 = yt[0] as number;
  const y1 = yt[yt.length - 1] as number;
  const sx = (x: number) => m.l + ((x - x0) / (x1 - x0)) * pw;
  const sy = (y: number) => m.t + ph - ((y - y0) / (y1 - y0 || 1)) * ph;
  const parts: string[] = [
    head,
    title,
    `<rect x="${m.l}" y="${m.t}" width="${pw}" height="${ph}" class="plot-bg"/>`,
  ];
  for (const v of yt) {
    const y = sy(v).toFixed(1);
    parts.push(`<line class="grid" x1="${m.l}" x2="${m.l + pw}" y1="${y}" y2="${y}"/>`);
    parts.push(
      `<text class="tick" x="${m.l - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${esc(fmt(v))}</text>`,
    );
  }
  const xvals = [...new Set(xs)].sort((a, b) => a - b);
  const every = Math.max(1, Math.ceil(xvals.length / 10));
  xvals.forEach((x, i) => {
    if (i % every !== 0 && i !== xvals.length - 1) return;
    parts.push(
      `<text class="tick" x="${sx(x).toFixed(1)}" y="${m.t + ph + 14}" text-anchor="middle">${esc(String(x))}</text>`,
    );
  });
  if (options.xLabel) {
    parts.push(
      `<text class="axis-label" x="${m.l + pw / 2}" y="${H - 4}" text-anchor="middle">${esc(options.xLabel)}</text>`,
    );
  }
  series.forEach((s, si) => {
    const color = s.color ?? (PALETTE[si % PALETTE.length] as string);
    const runs: Array<Array<[number, number]>> = [[]];
    for (const [x, y] of s.points) {
      if (y === null) runs.push([]);
      else runs[runs.length - 1]?.push([x, y]);
    }
    for (const run of runs) {
      if (run.length < 2) continue;
      const pts = run.map(([x, y]) => `${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(' ');
      parts.push(
        `<polyline class="series" data-series="${esc(s.name)}" fill="none" stroke="${color}" stroke-width="2" points="${pts}"/>`,
      );
    }
    for (const [x, y] of s.points) {
      if (y === null) continue;
      parts.push(
        `<circle class="point" cx="${sx(x).toFixed(1)}" cy="${sy(y).toFixed(1)}" r="3" fill="${color}"><title>${esc(`${s.name} @ ${x}: ${fmt(y)}`)}</title></circle>`,
      );
    }
    if (legend) {
      const lx = legend.x[si] as number;
      parts.push(`<rect x="${lx.toFixed(1)}" y="${legend.row}" width="10" height="10" fill="${color}"/>`);
      parts.push(
        `<text class="legend" x="${(lx + 14).toFixed(1)}" y="${legend.row + 9}">${esc(s.name)}</text>`,
      );
    }
  });
  parts.push('</svg>');
  return parts.join('');
}
