import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { main } from '../../../src/cli.ts';
import { inspectToHtml } from '../../../src/inspect/command.ts';
import { buildStatsTable, renderHtml, scriptJson } from '../../../src/inspect/html.ts';
import { reportForFile, reportForRun } from '../../../src/inspect/report.ts';
import { legendLayout, lineChart, niceTicks, textWidth } from '../../../src/inspect/svg.ts';
import { loadTokenDecoder, type TokenDecoder } from '../../../src/inspect/tokens.ts';
import { decodeVarints } from '../../../src/inspect/view.ts';
import { tempDir } from '../../support/temp.ts';
import {
  buildStatsFixture,
  makeRecord,
  makeRunDir,
  makeTrace,
  sampleRecords,
  writeJsonl,
} from './helpers.ts';

const root = tempDir('polar-inspect-html-');
after(() => rmSync(root, { recursive: true, force: true }));
let decoder: TokenDecoder;
before(async () => {
  decoder = await loadTokenDecoder();
});

/** The page's embedded data block. */
function pageData(html: string): {
  max: number;
  vocab: Array<string | number[]>;
  vid: number[];
  sections: Array<Array<Array<{ prompt_len: number; ids: string; mask: number[] }>>>;
} {
  const m = /<script id="polar-data" type="application\/json">([\s\S]*?)<\/script>/.exec(html);
  assert.ok(m, 'data block present');
  return JSON.parse(m[1] as string);
}

const OPTS = { maxTokensPerTrace: 2000, maxTrajectories: null };

describe('svg charts', () => {
  test('ticks cover the data range', () => {
    for (const [lo, hi] of [
      [0, 0.5],
      [0.01, 0.02],
      [1000, 1500],
      [-3, 7],
      [5, 5],
    ] as Array<[number, number]>) {
      const t = niceTicks(lo, hi, 4);
      assert.ok((t[0] as number) <= lo && (t.at(-1) as number) >= hi, `${lo}..${hi}: ${t}`);
      assert.ok(t.length >= 2 && t.length <= 8, `${t}`);
    }
  });

  test('one polyline per unbroken run, one circle per value, an empty chart says so', () => {
    const svg = lineChart(
      [
        {
          name: 'a',
          points: [
            [1, 1],
            [2, 2],
            [3, null],
            [4, 3],
            [5, 4],
          ],
        },
        { name: 'b', points: [[1, 0.5]] },
      ],
      { title: 'T <x>' },
    );
    assert.equal(svg.match(/<polyline /g)?.length, 2);
    assert.equal(svg.match(/<circle /g)?.length, 5);
    assert.ok(svg.includes('T &lt;x&gt;'));
    assert.ok(lineChart([{ name: 'a', points: [[1, null]] }], { title: 'e' }).includes('no data yet'));
  });
});

describe('the page', () => {
  test('a trajectory file: self-contained, with the data to rebuild every trace', async () => {
    const records = await sampleRecords();
    const path = join(root, 'traj.jsonl');
    writeJsonl(path, records);
    writeFileSync(join(root, 'build-stats.json'), JSON.stringify(buildStatsFixture()));
    const page = await reportForFile(path, decoder, OPTS);
    const html = renderHtml(page);
    // no network: no external scripts, styles, fonts or images
    assert.doesNotMatch(html, /<link\b|<img\b|\bsrc=|@import|url\(/i);
    assert.doesNotMatch(html.replace(/xmlns="http:\/\/www\.w3\.org\/2000\/svg"/g, ''), /https?:\/\//);
    // the tool response holds `</script>`: it must not appear raw inside the data block
    const block = html.slice(html.indexOf('<script id="polar-data"'), html.lastIndexOf('<script>'));
    assert.equal(block.match(/<\/script/gi)?.length, 1);
    const data = pageData(html);
    assert.equal(data.sections.length, 1);
    assert.equal(data.sections[0]?.length, 2);
    const rebuilt = data.sections[0]?.[1]?.[1];
    const branch = records[1]?.traces[1];
    assert.ok(rebuilt && branch);
    assert.deepEqual(
      decodeVarints(rebuilt.ids).map((i) => data.vid[i]),
      [...branch.prompt_ids, ...branch.response_ids],
    );
    assert.equal(rebuilt.prompt_len, branch.prompt_ids.length);
    // the static part: cards, the build stats, trace heads with badges
    assert.ok(html.includes('data-reward="1"'));
    assert.ok(html.includes('data-reward="0"'));
    assert.ok(html.includes('diverged at token'));
    assert.ok(html.includes('spliced turns: 1'));
    assert.ok(html.includes('cut: divergence'));
    assert.ok(html.includes('<table class="kv build-stats">'));
    assert.ok(html.includes('2 of 5 used (40.0%)'));
    // a count with its noun in the right number (issue 31 item 16: "1 groups")
    assert.match(html, /\b1 group\b/);
    assert.doesNotMatch(html, /\b1 groups\b/);
    assert.equal(html.match(/<details class="traj"/g)?.length, 2);
    assert.equal(html.match(/<details class="traj" open/g)?.length, 1);
  });

  test('a 32k-token trace stays compact: no token markup in the page, data well under 1 MB', async () => {
    const t = await makeTrace();
    let x = 12345;
    const ids: number[] = [];
    for (let i = 0; i < 32000; i++) {
      x = (x * 1103515245 + 12345) % 2147483648;
      ids.push(1000 + (x % 4000));
    }
    const big = {
      ...t,
      response_ids: ids,
      loss_mask: ids.map((_, i) => (i % 50 < 40 ? 1 : 0)) as Array<0 | 1>,
      response_logprobs: ids.map(() => -0.5),
    };
    const path = join(root, 'big.jsonl');
    writeJsonl(path, [makeRecord('big', [big])]);
    const html = renderHtml(await reportForFile(path, decoder, OPTS));
    assert.ok(html.length < 1_000_000, `page is ${html.length} bytes`);
    assert.doesNotMatch(html.slice(0, html.indexOf('<script id="polar-data"')), /class="t /);
    assert.ok(html.includes('32,000'));
  });

  test('a run directory: charts, the steps table and one section per step with trajectories', async () => {
    const dir = join(root, 'run');
    await makeRunDir(dir, { running: true });
    const html = renderHtml(await reportForRun(dir, decoder, { ...OPTS, maxTrajectories: 1 }));
    assert.equal(html.match(/<svg class="chart"/g)?.length, 7);
    assert.equal(html.match(/<tr data-step=/g)?.length, 3);
    // step 1's rollout health (step.json): its shares and its warning in words
    assert.ok(
      html.includes('<td>75.0%</td><td>0.0%</td><td>12.5%</td><td>2</td><td>1</td><td>0</td><td>1</td>'),
    );
    // its flagged sample, with the evidence (the grading integrity layers, docs/eval.md)
    assert.ok(html.includes('<b>step 1 · repo__x-1 s2</b> proven tampered with, graded 0'));
    assert.ok(
      html.includes(
        '<li>proof: a canary test polar added was reported wrongly (tests/test_c.py::test_f: PASSED)</li>',
      ),
    );
    assert.ok(
      html.includes(
        '75% of groups have equal rewards (3 all solved, 0 all failed): raise --group-size or pick harder tasks',
      ),
    );
    assert.ok(html.includes('<tr data-step="3"><td>3</td><td class="l">running</td>'));
    assert.ok(html.includes('<td>25.0%</td>') && html.includes('<td>40.0%</td>'));
    // sections newest first, the newest open, one trajectory each (the cap), noted
    const sections = [...html.matchAll(/<details class="section"( open)?><summary>(step \d+)/g)].map((m) => [
      m[2],
      Boolean(m[1]),
    ]);
    assert.deepEqual(sections, [
      ['step 2', true],
      ['step 1', false],
    ]);
    assert.ok(html.includes('showing 1 of 2 trajectories'));
    assert.equal(
      pageData(html).sections.every((s) => s.length === 1),
      true,
    );
    assert.ok(html.includes('step-3/build-stats.json: not readable as JSON'));
  });

  test('a run page: no chart legend over its title; the steps in two tables of at most 12 columns', async () => {
    const dir = join(root, 'run-layout');
    await makeRunDir(dir);
    const html = renderHtml(await reportForRun(dir, decoder, OPTS));
    const charts = [...html.matchAll(/<svg class="chart"[\s\S]*?<\/svg>/g)].map((m) => m[0]);
    let withLegend = 0;
    for (const svg of charts) {
      const title = /<text class="chart-title" x="([\d.]+)" y="18">([^<]*)<\/text>/.exec(svg)!;
      const legends = [...svg.matchAll(/<rect x="([\d.]+)" y="(\d+)" width="10" height="10"/g)];
      if (legends.length === 0) continue;
      withLegend++;
      const titleEnd = Number(title[1]) + textWidth(title[2]!, 12, true);
      for (const [, x, y] of legends)
        assert.ok(
          Number(y) >= 24 || Number(x) >= titleEnd + 12,
          `${title[2]}: a legend at x ${x} on the title's row, which ends at ${titleEnd.toFixed(0)}`,
        );
    }
    assert.ok(withLegend >= 2, 'pass@1 and rollout health have legends');
    // rollout health's three names do not fit beside its title: a row of their own (they overlapped it)
    const health = charts.find((c) => c.includes('>rollout health<'))!;
    assert.match(health, /<rect x="52\.0" y="24" width="10" height="10"/);
    assert.equal(legendLayout('pass@1', ['rollouts', 'held-out'], 52, 406).ownRow, false);
    const tables = [...html.matchAll(/<table class="steps[^"]*"><tr>([\s\S]*?)<\/tr>/g)];
    assert.deepEqual(
      tables.map((t) => t[1]!.match(/<th/g)?.length),
      [12, 10],
    );
  });

  test('build stats from an older or partial JSON render without throwing', () => {
    const html = buildStatsTable({ sessions: 3 });
    assert.ok(html.includes('<td>sessions</td><td>3 → – trajectories, – traces</td>'));
  });

  test('scriptJson escapes what could end a script block', () => {
    const s = scriptJson({ a: '</script><!-- \u2028' });
    assert.ok(!s.includes('<'));
    assert.deepEqual(JSON.parse(s), { a: '</script><!-- \u2028' });
  });
});

describe('the command', () => {
  test('polar inspect writes the page; bad input and flags give exit codes 3 and 2', async () => {
    const path = join(root, 'cmd.jsonl');
    writeJsonl(path, await sampleRecords());
    const out = join(root, 'cmd.html');
    const prev = process.exitCode;
    assert.equal(
      await main(['node', 'polar', 'inspect', path, '-o', out, '--max-tokens-per-trace', '50']),
      0,
    );
    process.exitCode = prev;
    assert.ok(existsSync(out) && !existsSync(`${out}.partial`));
    assert.equal(pageData(readFileSync(out, 'utf8')).max, 50);
    assert.equal(await main(['node', 'polar', 'inspect', join(root, 'missing.jsonl'), '-o', out]), 3);
    assert.equal(await main(['node', 'polar', 'inspect', root, '-o', out]), 3);
    assert.equal(await main(['node', 'polar', 'inspect', path, '-o', out, '--max-tokens-per-trace', '0']), 2);
    assert.equal(
      await main(['node', 'polar', 'inspect', path, '-o', out, '--tokenizer', join(root, 'nope')]),
      4,
    );
  });

  test('inspectToHtml picks the run reader for a run directory', async () => {
    const dir = join(root, 'run2');
    await makeRunDir(dir);
    const html = await inspectToHtml(dir, {});
    assert.ok(html.includes('<h2>steps</h2>'));
  });
});
