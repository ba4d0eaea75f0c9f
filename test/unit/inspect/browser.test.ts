/**
 * Loads rendered reports in a real browser (Debian's headless Chromium) and checks what the page's
 * script rendered: the decoded token stream, mask 1 vs mask 0 spans, markers, regions, the reward, the
 * run's SVG charts. Screenshots go to test-artifacts/inspect/ (ignored by git). Skipped, saying why, when
 * chromium is not installed (`apt-get install chromium`; POLAR_CHROMIUM names another binary).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { inspectToHtml } from '../../../src/inspect/command.ts';
import { tempDir } from '../../support/temp.ts';
import { CALL1, CALL2, GLUE, makeRunDir, PROMPT, sampleRecords, writeJsonl } from './helpers.ts';

const CHROMIUM = process.env.POLAR_CHROMIUM ?? '/usr/bin/chromium';
const skip = existsSync(CHROMIUM)
  ? false
  : `${CHROMIUM} not found: install Debian's chromium (apt-get install chromium) to run the browser test`;
const ARTIFACTS = resolve(import.meta.dirname, '../../../test-artifacts/inspect');
const root = tempDir('polar-inspect-browser-');
after(() => rmSync(root, { recursive: true, force: true }));
const run = promisify(execFile);

async function chromium(args: string[]): Promise<string> {
  const profile = mkdtempSync(join(root, 'profile-'));
  const { stdout } = await run(
    CHROMIUM,
    [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-quic',
      '--disable-extensions',
      '--disable-dev-shm-usage',
      `--user-data-dir=${profile}`,
      ...args,
    ],
    { timeout: 60_000, maxBuffer: 64 << 20 },
  );
  return stdout;
}

const dumpDom = (file: string, hash = '', width?: number) =>
  chromium([
    ...(width ? [`--window-size=${width},2000`] : []),
    '--dump-dom',
    `${pathToFileURL(file).href}${hash}`,
  ]);

async function screenshot(file: string, name: string, hash = ''): Promise<string> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const png = join(ARTIFACTS, name);
  rmSync(png, { force: true });
  await chromium([
    `--screenshot=${png}`,
    '--window-size=1280,2000',
    '--hide-scrollbars',
    `${pathToFileURL(file).href}${hash}`,
  ]);
  return png;
}

const unescapeHtml = (s: string) =>
  s
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&nbsp;/g, '\u00a0')
    .replace(/&amp;/g, '&');

interface Rendered {
  /** text of the mask-1 and mask-0 spans, in order */
  m1: string;
  m0: string;
  all: string;
  markers: string[];
  tokens: number;
  classes: Array<[string, string]>;
}

/** Parses one rendered token container (only spans inside). */
function parseTokens(inner: string): Rendered {
  const markers: string[] = [];
  const noMarks = inner.replace(/<span class="mark [^"]*"[^>]*>([^<]*)<\/span>/g, (_, label: string) => {
    markers.push(unescapeHtml(label));
    return '';
  });
  const r: Rendered = { m1: '', m0: '', all: '', markers, tokens: 0, classes: [] };
  for (const m of noMarks.matchAll(/<span class="(t[^"]*)" data-i="\d+">([^<]*)<\/span>/g)) {
    r.tokens++;
    r.classes.push([m[1] as string, unescapeHtml(m[2] as string)]);
  }
  for (const piece of noMarks.split('<span class="seg ').slice(1)) {
    const cls = piece.slice(0, piece.indexOf('"'));
    const text = unescapeHtml(piece.replace(/^[^>]*>/, '').replace(/<[^>]+>/g, ''));
    if (cls.startsWith('m1')) r.m1 += text;
    else r.m0 += text;
    r.all += text;
  }
  return r;
}

function containers(dom: string, cls: string): Rendered[] {
  return [...dom.matchAll(new RegExp(`<div class="${cls}">([\\s\\S]*?)</div>`, 'g'))].map((m) =>
    parseTokens(m[1] as string),
  );
}

describe('the report in headless Chromium', { skip }, () => {
  test('a trajectory file renders its decoded token stream, masks, marks and rewards', async () => {
    const traj = join(root, 'traj.jsonl');
    writeJsonl(traj, await sampleRecords());
    const page = join(root, 'file.html');
    writeFileSync(page, await inspectToHtml(traj, {}));
    const dom = await dumpDom(page, '#open-all');
    assert.match(dom, /<body data-rendered="1">/);
    const responses = containers(dom, 'tokens response');
    assert.equal(responses.length, 3);
    const [first, parent, branch] = responses;
    assert.ok(first && parent && branch);
    // decoded in the browser from the compact ids: exactly the text that was tokenized (emoji, accents, </script>)
    assert.equal(first.m1, CALL1 + CALL2);
    assert.equal(first.m0, GLUE);
    assert.deepEqual(first.markers, ['call 1/2', 'call 2/2']);
    assert.deepEqual(parent.markers, ['call 1/2', 'call 2/2', 'chain cut: a later call diverged from it']);
    assert.deepEqual(branch.markers, [
      'diverged from trace 1 here',
      'call 1/2',
      'call 2/2',
      'truncated (--max-trace-tokens)',
    ]);
    // regions, special tokens and the one improbable sampled token (logprob -3.2)
    const withClass = (r: Rendered, c: string) =>
      r.classes
        .filter(([k]) => k.split(' ').includes(c))
        .map(([, t]) => t)
        .join('');
    assert.ok(withClass(first, 'r-tool_call').startsWith('<tool_call>'));
    assert.ok(withClass(first, 'r-tool_call').endsWith('</tool_call>'));
    assert.ok(withClass(first, 'r-tool_response').includes('print("hi") </script><b>x</b>'));
    assert.ok(withClass(first, 'r-think').startsWith('<think>'));
    assert.equal(first.classes.filter(([k]) => k.includes('low')).length, 1);
    assert.ok(withClass(first, 'sp').includes('<|im_end|>'));
    // prompts opened by #open-all
    const prompts = containers(dom, 'tokens');
    assert.ok(prompts.some((p) => p.all === PROMPT && p.m1 === ''));
    assert.match(dom, /<span class="pill reward good" data-reward="1">reward 1<\/span>/);
    assert.match(dom, /<span class="pill reward bad" data-reward="0">reward 0<\/span>/);
    const png = await screenshot(page, 'file.png', '#open-all');
    assert.deepEqual([...readFileSync(png).subarray(0, 8)], [137, 80, 78, 71, 13, 10, 26, 10]);
  });

  test('a capped trace renders only its first tokens and offers the rest', async () => {
    const traj = join(root, 'capped.jsonl');
    writeJsonl(traj, await sampleRecords());
    const page = join(root, 'capped.html');
    writeFileSync(page, await inspectToHtml(traj, { maxTokensPerTrace: 10 }));
    const dom = await dumpDom(page);
    const responses = containers(dom, 'tokens response');
    // only the first trajectory is open; its trace shows 10 tokens, the closed ones nothing yet
    assert.deepEqual(
      responses.map((r) => r.tokens),
      [10, 0, 0],
    );
    const more =
      /<div class="more response-more"><span class="left">([\d,]+) more tokens not shown<\/span>/.exec(dom);
    assert.ok(more, 'the show-more bar is visible');
    assert.ok(Number(more[1]?.replace(/,/g, '')) > 0);
    assert.equal(containers(dom, 'tokens')[0]?.tokens, 0, 'the prompt stays collapsed and unrendered');
  });

  test('a run directory renders its charts, steps and newest step', async () => {
    const dir = join(root, 'run');
    await makeRunDir(dir, { running: true });
    const page = join(root, 'run.html');
    writeFileSync(page, await inspectToHtml(dir, {}));
    const dom = await dumpDom(page);
    assert.match(dom, /<body data-rendered="1">/);
    assert.equal(dom.match(/<svg class="chart"/g)?.length, 7); // the charts over steps, rollout health among them
    assert.ok((dom.match(/<polyline class="series"/g)?.length ?? 0) >= 5);
    assert.equal(dom.match(/<tr data-step=/g)?.length, 3);
    const responses = containers(dom, 'tokens response');
    assert.equal(responses[0]?.m1, CALL1 + CALL2);
    const png = await screenshot(page, 'run.png');
    assert.ok(readFileSync(png).length > 10_000);
  });

  test('at 1280 px the steps tables fit the page; narrower, the page marks the one that scrolls', async () => {
    const dir = join(root, 'run-width');
    await makeRunDir(dir);
    const page = join(root, 'run-width.html');
    writeFileSync(page, await inspectToHtml(dir, {}));
    const wide = await dumpDom(page, '', 1280);
    assert.equal(wide.match(/<table class="steps/g)?.length, 2);
    assert.doesNotMatch(
      wide,
      /class="scroll overflows"><table class="steps/,
      'no steps table scrolls sideways',
    );
    // the check can fail: at 500 px the training table is wider than the page
    const narrow = await dumpDom(page, '', 500);
    assert.match(narrow, /class="scroll overflows"><table class="steps/);
  });
});
