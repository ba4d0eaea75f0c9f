/**
 * node's built-in test runner, TAP reporter (`node --test --test-reporter=tap`, the default when stdout
 * is not a terminal on Node 20) and spec reporter (`✔ name (1ms)`). Nested tests are named
 * `suite > test`. `# SKIP` and `# TODO` directives map to SKIPPED and XFAIL.
 */
import { lines, type StatusMap, type TestStatus } from './types.ts';

function unescapeTap(name: string): string {
  return name.replace(/\\#/g, '#').replace(/\\\\/g, '\\');
}

export function parseNodeTest(log: string): StatusMap {
  const map: StatusMap = new Map();
  const all = lines(log);
  const isTap = all.some((l) => /^TAP version \d+/.test(l.trim()) || /^\s*(not )?ok \d+ - /.test(l));
  if (isTap) {
    const stack: string[] = [];
    for (const raw of all) {
      const indent = (/^ */.exec(raw)?.[0].length ?? 0) / 4;
      const line = raw.trim();
      const subtest = /^# Subtest: (.*)$/.exec(line);
      if (subtest) {
        stack.length = indent;
        stack[indent] = unescapeTap(subtest[1]!);
        continue;
      }
      const result = /^(not ok|ok) \d+ - (.*?)(?: # (SKIP|TODO)\b.*)?$/.exec(line);
      if (!result) continue;
      const name = unescapeTap(result[2]!);
      const parents = stack.slice(0, indent);
      const id = [...parents, name].join(' > ');
      let status: TestStatus = result[1] === 'ok' ? 'PASSED' : 'FAILED';
      if (result[3] === 'SKIP') status = 'SKIPPED';
      else if (result[3] === 'TODO') status = result[1] === 'ok' ? 'PASSED' : 'XFAIL';
      map.set(id, status);
      stack.length = indent;
    }
    return map;
  }
  // spec reporter: two spaces of indent per level; suites print their name as a line without a mark
  const stack: string[] = [];
  for (const raw of all) {
    const indent = Math.floor((/^ */.exec(raw)?.[0].length ?? 0) / 2);
    const line = raw.trim();
    const mark = /^([✔✖﹣]) (.*?)(?: \([\d.]+m?s\))?(?: # (SKIP|TODO)\b.*)?$/u.exec(line);
    if (mark) {
      const name = mark[2]!;
      const id = [...stack.slice(0, indent), name].join(' > ');
      let status: TestStatus = mark[1] === '✔' ? 'PASSED' : mark[1] === '✖' ? 'FAILED' : 'SKIPPED';
      if (mark[3] === 'SKIP') status = 'SKIPPED';
      if (!map.has(id) || status !== 'PASSED') map.set(id, status);
      stack.length = indent;
      continue;
    }
    const suite = /^▶ (.*)$/u.exec(line);
    if (suite) {
      stack.length = indent;
      stack[indent] = suite[1]!;
    }
  }
  return map;
}
