/**
 * Honest results (issue 18): an infrastructure failure is an error with no reward, never a graded 0;
 * one run per --out; an interrupted sample leaves no ghost session; a predictions file is validated;
 * flag errors name the flags given and come before the runtime's warnings.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import type { HarnessAgent, RunCapture } from '../../../../src/rollout/agents.ts';
import { loadDataset, type SweInstance } from '../../../../src/rollout/dataset.ts';
import { infraFailure } from '../../../../src/rollout/outcome.ts';
import { type EvalOptions, runEval } from '../../../../src/rollout/run/run.ts';
import { standInAgent } from '../../../support/stand-in-agent.ts';
import { tempDir } from '../../../support/temp.ts';
import { fixtures, localEval, localEvalOptions, MINI, polar } from './helpers.ts';

const tmp = tempDir('polar-honest-');
const ID = 'polar-fixtures__jsutil-5';
const readJsonl = (p: string) =>
  readFileSync(p, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));

let instance: SweInstance;
before(async () => {
  fixtures();
  [instance] = (await loadDataset(MINI)).filter((i) => i.instance_id === ID) as [SweInstance];
});

/** stands in for src/capture/run.ts: appends a session record (as runCapture does) and reports the calls */
function fakeCapture(
  result: { calls: number; errors: number; status: 'completed' | 'error' },
  work?: (cwd: string) => void,
): RunCapture {
  let n = 0;
  return async (o) => {
    const session = `sess-${++n}`;
    writeFileSync(o.output, `${JSON.stringify({ v: 1, type: 'session', id: session })}\n`, { flag: 'a' });
    work?.(o.cwd);
    return {
      sessionId: session,
      exitCode: result.status === 'completed' ? 0 : 1,
      signal: null,
      clientClosed: 0,
      cut: 0,
      lost: 0,
      ...result,
      output: o.output,
    };
  };
}

const evalOptions = (out: string, agent: HarnessAgent, extra: Partial<EvalOptions> = {}) =>
  localEvalOptions([instance], agent, out, extra);

const applyGold = (cwd: string) =>
  execFileSync('git', ['apply', '-'], { cwd, input: String(instance.patch) });

test('infraFailure: every call failed, or no call and no completion; a harness that got an answer is graded', () => {
  assert.match(
    String(infraFailure({ status: 'error', calls: 12, failedCalls: 12, error: 'x' })),
    /all 12 calls/,
  );
  assert.match(String(infraFailure({ status: 'error', calls: 0, error: 'spawn ENOENT' })), /no model call/);
  assert.equal(infraFailure({ status: 'error', calls: 3, failedCalls: 2, error: 'exit 1' }), null);
  assert.equal(infraFailure({ status: 'completed', calls: 0, error: null }), null);
  // (issue 22, item 6) calls the harness hung up on are not backend failures, but no answer either
  const hungUp = String(
    infraFailure({ status: 'timeout', calls: 3, failedCalls: 1, hungUpCalls: 2, error: 'x' }),
  );
  assert.match(hungUp, /of 3 calls, 1 failed and 2 ended before an answer/);
  assert.doesNotMatch(hungUp, /to the backend failed/);
  assert.equal(
    infraFailure({ status: 'timeout', calls: 3, failedCalls: 0, hungUpCalls: 2, error: 'x' }),
    null,
  );
});

test("infraFailure: an answer a weight update cut mid-stream makes the run polar's doing, however many calls got answers", () => {
  const facts = { status: 'completed', calls: 9, failedCalls: 1, error: null } as const;
  assert.equal(infraFailure({ ...facts, weightUpdateCutCalls: 0 }), null);
  assert.match(
    String(infraFailure({ ...facts, weightUpdateCutCalls: 1 })),
    /weight update cut 1 model answer/,
  );
});

test('a harness whose calls all failed is an error: no reward, no grading record, run again by --resume', async () => {
  const out = join(tmp, 'down');
  const down = await runEval(
    evalOptions(out, standInAgent(fakeCapture({ calls: 12, errors: 12, status: 'error' }))),
  );
  const [line] = down.results;
  assert.equal(line!.status, 'error');
  assert.equal(line!.reward, null);
  assert.match(String(line!.reason), /no model answer: all 12 calls/);
  assert.equal(down.report.counts.error, 1);
  // the capture is set aside (not *.jsonl, so polar build skips it) and got no grading record
  assert.match(String(line!.capture), /\.jsonl\.error$/);
  assert.ok(!readJsonl(String(line!.capture)).some((r) => r.type === 'grading'));
  assert.deepEqual(
    readdirSync(join(out, 'captures')).filter((f) => f.endsWith('.jsonl')),
    [],
  );
  // --resume runs it again, into a fresh capture with one session
  const again = await runEval(
    evalOptions(out, standInAgent(fakeCapture({ calls: 2, errors: 0, status: 'completed' }, applyGold)), {
      resume: true,
    }),
  );
  assert.equal(again.results[0]!.status, 'resolved');
  const records = readJsonl(String(again.results[0]!.capture));
  assert.equal(records.filter((r) => r.type === 'session').length, 1);
  assert.equal(records.at(-1).reward, 1);
});

test('an interrupted sample is neither graded nor recorded, and --resume leaves one session for it', async () => {
  const out = join(tmp, 'interrupt');
  const controller = new AbortController();
  const interrupted = await runEval(
    evalOptions(
      out,
      standInAgent(
        fakeCapture({ calls: 2, errors: 0, status: 'completed' }, (cwd) => {
          applyGold(cwd);
          controller.abort();
        }),
      ),
      { signal: controller.signal },
    ),
  );
  assert.equal(interrupted.interrupted, true);
  assert.equal(interrupted.results.length, 0);
  assert.equal(readFileSync(join(out, 'results.jsonl'), 'utf8'), '');
  const capture = join(out, 'captures', `${ID}__s0.jsonl`);
  assert.ok(!existsSync(capture), 'the partial capture is set aside');
  assert.ok(!readJsonl(`${capture}.interrupted`).some((r) => r.type === 'grading'));
  const resumed = await runEval(
    evalOptions(out, standInAgent(fakeCapture({ calls: 2, errors: 0, status: 'completed' }, applyGold)), {
      resume: true,
    }),
  );
  assert.equal(resumed.results[0]!.status, 'resolved');
  const records = readJsonl(capture);
  assert.equal(records.filter((r) => r.type === 'session').length, 1);
  assert.equal(records.filter((r) => r.type === 'grading').length, 1);
});

test('a capture left by a crash (no result line) is set aside before the sample runs again', async () => {
  const out = join(tmp, 'crash');
  mkdirSync(join(out, 'captures'), { recursive: true });
  writeFileSync(join(out, 'results.jsonl'), '');
  writeFileSync(
    join(out, 'captures', `${ID}__s0.jsonl`),
    `${JSON.stringify({ v: 1, type: 'session', id: 'ghost' })}\n`,
  );
  const r = await runEval(
    evalOptions(out, standInAgent(fakeCapture({ calls: 1, errors: 0, status: 'completed' }, applyGold)), {
      resume: true,
    }),
  );
  const records = readJsonl(String(r.results[0]!.capture));
  assert.deepEqual(
    records.filter((x) => x.type === 'session').map((x) => x.id),
    ['sess-1'],
  );
});

const gold = (out: string, ...extra: string[]) => localEval('gold', out, ['--instances', ID, '-q', ...extra]);

test('a non-empty --out is refused without --resume or --overwrite; --overwrite clears it', () => {
  const out = join(tmp, 'twice');
  assert.equal(gold(out).code, 0);
  writeFileSync(join(out, 'captures', 'old-run.jsonl'), '{}\n');
  const again = gold(out);
  assert.equal(again.code, 2, again.stderr);
  assert.match(again.stderr, /polar: error: --out .* is not empty/);
  assert.match(again.stderr, /--resume .* --overwrite/);
  const over = gold(out, '--overwrite');
  assert.equal(over.code, 0, over.stderr);
  assert.ok(!existsSync(join(out, 'captures', 'old-run.jsonl')));
  assert.equal(readJsonl(join(out, 'results.jsonl')).length, 1);
  // a folder that holds no run is never cleared
  const other = join(tmp, 'not-a-run');
  mkdirSync(other);
  writeFileSync(join(other, 'notes.txt'), 'mine');
  const refused = gold(other, '--overwrite');
  assert.equal(refused.code, 2);
  assert.match(refused.stderr, /holds files but no evaluation run/);
  assert.ok(existsSync(join(other, 'notes.txt')));
});

test('--agent predictions: a file without model_patch, or naming unknown instances, is bad input', () => {
  const out = join(tmp, 'gold-for-preds');
  assert.equal(gold(out).code, 0);
  const predicted = (file: string) =>
    localEval('predictions', join(tmp, `p-${Math.random()}`), ['--predictions', file, '--instances', ID]);
  const fromResults = predicted(join(out, 'results.jsonl'));
  assert.equal(fromResults.code, 3, fromResults.stderr);
  assert.match(fromResults.stderr, /results\.jsonl:1: model_patch: missing/);
  const unknown = join(tmp, 'unknown.jsonl');
  writeFileSync(
    unknown,
    `${JSON.stringify({ instance_id: 'nope__x-1', model_name_or_path: 'm', model_patch: '' })}\n`,
  );
  const r = predicted(unknown);
  assert.equal(r.code, 3, r.stderr);
  assert.match(r.stderr, /instance_id: 1 instance not in the dataset: nope__x-1/);
  // the predictions polar eval wrote are a valid file
  const ok = predicted(join(out, 'predictions.jsonl'));
  assert.equal(ok.code, 0, ok.stderr);
});

test('eval flag errors: two agents, an empty dataset, and errors before the runtime warning', () => {
  const both = polar(['eval', '--dataset', MINI, '--agent', 'gold', '--harness', 'pi', '--runtime', 'local']);
  assert.equal(both.code, 2);
  assert.match(both.stderr, /--agent gold and --harness pi name two different agents/);
  const empty = join(tmp, 'empty.jsonl');
  writeFileSync(empty, '');
  const none = polar([
    'eval',
    '--dataset',
    empty,
    '--agent',
    'gold',
    '--runtime',
    'local',
    '--out',
    join(tmp, 'e1'),
  ]);
  assert.equal(none.code, 3, none.stderr);
  assert.match(none.stderr, /empty\.jsonl: holds no instances/);
  assert.doesNotMatch(none.stderr, /--instances|--shard|--limit/);
  const generic = polar([
    'eval',
    '--dataset',
    MINI,
    '--harness',
    'generic',
    '--model',
    'm',
    '--runtime',
    'local',
    '--allow-unsandboxed',
    '--out',
    join(tmp, 'e2'),
  ]);
  assert.equal(generic.code, 2);
  assert.match(generic.stderr, /--harness generic needs --agent-cmd/);
  assert.doesNotMatch(generic.stderr, /unsandboxed, with your rights/);
});
