/**
 * The verifier grader (issue 14 part 3): `polar eval --grader 'CMD'` or a row's `grader` runs a command
 * that reads the rollout as JSON on stdin and prints a reward in [0, 1]; a failing, hanging or
 * nonsensical verifier is an infrastructure error (no reward), never 0.
 */
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { regradeCommand } from '../../../src/eval/regrade.ts';
import { gymVerifier } from '../../../src/gym/command.ts';
import { type LoopFlags, loopOptions } from '../../../src/loop/command.ts';
import { type BackendFlags, backendOptions } from '../../../src/options/backend.ts';
import { grader } from '../../../src/options/parsers.ts';
import { GoldAgent } from '../../../src/rollout/agents.ts';
import { loadDataset, parseRow, type SweInstance } from '../../../src/rollout/dataset.ts';
import { runEval } from '../../../src/rollout/run/run.ts';
import {
  finalMessage,
  type Grader,
  parseReward,
  runVerifier,
  type VerifierInput,
} from '../../../src/rollout/verifier.ts';
import { parseArgv } from '../../support/argv.ts';
import { endsWithin } from '../../support/processes.ts';
import { tempDir } from '../../support/temp.ts';
import { call, jsonl, session } from '../trajectory/builder.ts';
import { fixtures, localEvalOptions, MINI, miniRows, ROOT } from './run/helpers.ts';

const VERIFIER = `node ${join(ROOT, 'fixtures/verifier/reward.mjs')}`;
const tmp = tempDir('polar-verifier-');
const input = (row: Record<string, unknown>, over: Partial<VerifierInput> = {}): VerifierInput => ({
  row: { instance_id: 't-1', ...row },
  sample: 0,
  final_message: null,
  patch: '',
  capture: null,
  ...over,
});

test('parseReward: the last non-empty line, a number in [0, 1]', () => {
  assert.equal(parseReward('checking\n0.25\n\n'), 0.25);
  assert.equal(parseReward('1'), 1);
  assert.equal(parseReward('0'), 0);
  assert.match(String(parseReward('')), /printed nothing/);
  assert.match(String(parseReward('0.5\nok')), /"ok", not a number/);
  assert.match(String(parseReward('NaN')), /not a number/);
  assert.match(String(parseReward('2')), /outside \[0, 1\]/);
  assert.match(String(parseReward('-0.1')), /outside \[0, 1\]/);
});

test('runVerifier: the reward the command prints, or an error naming the command', async () => {
  const opts = { timeoutMs: 30_000 };
  const word = await runVerifier(VERIFIER, input({ answer: 'blue' }, { final_message: 'It is blue.' }), opts);
  assert.deepEqual('reward' in word ? word.reward : word, 1);
  assert.match(word.output, /verifier: t-1 sample 0 mode word/);
  const miss = await runVerifier(VERIFIER, input({ answer: 'blue' }, { final_message: 'red' }), opts);
  assert.equal('reward' in miss ? miss.reward : miss.error, 0);
  const errorOf = async (mode: string, timeoutMs = 30_000) => {
    const r = await runVerifier(VERIFIER, input({ mode }), { timeoutMs });
    assert.ok('error' in r, `${mode}: expected an error, got ${JSON.stringify(r)}`);
    assert.ok(r.error.includes('verifier grader `node '), r.error);
    return r.error;
  };
  assert.match(await errorOf('fail'), /exited 2: cannot reach the checker/);
  assert.match(await errorOf('text'), /"looks good", not a number/);
  assert.match(await errorOf('range'), /printed 1\.5, outside \[0, 1\]/);
  assert.match(await errorOf('sleep', 1_000), /timed out after 1000 ms/);
});

test('runVerifier: a timeout or a cancel ends what the shell started too, not only the shell', async () => {
  // the shell starts a worker (as `bash run_tests.sh` starts pytest) and waits for it
  const worker = (pidFile: string) => `sleep 60 & echo $! > ${pidFile}; wait`;
  const pidOf = (file: string) => Number(readFileSync(file, 'utf8').trim());
  const timedOut = await runVerifier(worker(join(tmp, 'w1.pid')), input({}), { timeoutMs: 500 });
  assert.ok('error' in timedOut && /timed out after 500 ms/.test(timedOut.error));
  const first = pidOf(join(tmp, 'w1.pid'));
  // (a moment for the group's SIGKILL to land; a killed worker left unreaped is not running)
  assert.ok(await endsWithin(first, 2000), `worker ${first} outlived the verifier's timeout`);

  const cancel = new AbortController();
  setTimeout(() => cancel.abort(), 300);
  const cancelled = await runVerifier(worker(join(tmp, 'w2.pid')), input({}), {
    timeoutMs: 30_000,
    signal: cancel.signal,
  });
  assert.ok('error' in cancelled && /was stopped: the sample was cancelled/.test(cancelled.error));
  const second = pidOf(join(tmp, 'w2.pid'));
  assert.ok(await endsWithin(second, 2000), `worker ${second} outlived the cancel`);
  // killed by a signal of its own: said so, no reward
  const killed = await runVerifier('kill -9 $$', input({}), { timeoutMs: 30_000 });
  assert.ok('error' in killed && /was killed by SIGKILL/.test(killed.error), JSON.stringify(killed));
});

test('--grader: polar, swebench or a command, classified once into a tagged value; a bare word is refused', () => {
  assert.deepEqual(grader('polar'), { kind: 'polar' });
  assert.deepEqual(grader('swebench'), { kind: 'swebench' });
  assert.deepEqual(grader('python3 verify.py'), { kind: 'verifier', command: 'python3 verify.py' });
  assert.deepEqual(grader('./verify.sh'), { kind: 'verifier', command: './verify.sh' });
  assert.throws(() => grader('swebnch'), /not polar, swebench, judge or a verifier command/);
});

test("a row's own grader: a command is kept, polar leaves the run's, swebench is refused naming the field", () => {
  const row = { ...miniRows().find((r) => r.instance_id === 'polar-fixtures__jsutil-5')! };
  assert.equal(parseRow('d.jsonl', 1, { ...row, grader: 'node v.mjs' }).grader, 'node v.mjs');
  assert.equal(parseRow('d.jsonl', 1, { ...row, grader: 'polar' }).grader, undefined);
  assert.equal(parseRow('d.jsonl', 1, { ...row, grader: ' ' }).grader, undefined);
  assert.throws(
    () => parseRow('d.jsonl', 1, { ...row, grader: 'swebench' }),
    /d\.jsonl:1: grader: .*swebench grades a whole run/,
  );
});

test('finalMessage: the content of the last call with an answer', async () => {
  const path = join(tmp, 'capture.jsonl');
  const withContent = (content: string) => ({
    ...call('s1', { prompt: [1], completion: [2] }),
    canonical_response: { content },
  });
  writeFileSync(
    path,
    jsonl([
      session('s1'),
      withContent('first'),
      withContent('the answer is blue'),
      call('s1', { prompt: [1], completion: null, error: true }),
    ]),
  );
  assert.equal(await finalMessage(path), 'the answer is blue');
  assert.equal(await finalMessage(null), null);
});

test('a row may carry its own grader and needs no FAIL_TO_PASS then', () => {
  const row = {
    instance_id: 'q-1',
    repo: 'r/r',
    base_commit: 'a'.repeat(40),
    patch: '',
    test_patch: '',
    problem_statement: 'say blue',
    FAIL_TO_PASS: [],
    PASS_TO_PASS: [],
  };
  assert.throws(() => parseRow('d.jsonl', 1, row), /FAIL_TO_PASS/);
  assert.equal(parseRow('d.jsonl', 1, { ...row, grader: VERIFIER }).grader, VERIFIER);
});

let instance: SweInstance;
before(async () => {
  fixtures();
  [instance] = (await loadDataset(MINI)).filter((i) => i.instance_id === 'polar-fixtures__jsutil-5') as [
    SweInstance,
  ];
});

test('runEval with a verifier: its reward is the sample reward; a failing verifier is an error, not 0', async () => {
  const run = (instances: SweInstance[], name: string, verifier?: string) =>
    runEval(localEvalOptions(instances, new GoldAgent(), join(tmp, name), verifier ? { verifier } : {}));
  // the run's grader: the gold patch is non-empty, the verifier gives 0.75
  const patchRow = { ...instance, mode: 'patch' } as SweInstance;
  const graded = await run([patchRow], 'run-grader', VERIFIER);
  assert.equal(graded.results[0]!.status, 'unresolved');
  assert.equal(graded.results[0]!.reward, 0.75);
  assert.equal(graded.results[0]!.test_exit_code, null, 'the SWE tests did not run');
  assert.equal(graded.results[0]!.grader, 'verifier', 'regrade leaves it alone');
  const log = readFileSync(
    join(tmp, 'run-grader', 'logs', 'polar-fixtures__jsutil-5__s0.verifier.log'),
    'utf8',
  );
  assert.match(log, /mode patch/);
  // the row's grader wins over the run's (here: none given, polar would run the tests)
  const own = await run([{ ...instance, grader: VERIFIER, mode: 'capture' } as SweInstance], 'row-grader');
  assert.equal(own.results[0]!.reward, 0, 'the gold agent writes no capture');
  // a verifier that fails: error, no reward
  const failed = await run([{ ...instance, mode: 'fail' } as SweInstance], 'failing', VERIFIER);
  assert.equal(failed.results[0]!.status, 'error');
  assert.equal(failed.results[0]!.reward, null);
  assert.match(String(failed.results[0]!.reason), /exited 2/);
  assert.equal(failed.report.counts.error, 1);
});

test('polar loop takes the same --grader: a command becomes the loop verifier; swebench is refused', () => {
  const flags = (grader: string[]) =>
    parseArgv(['loop', '--train-set', MINI, '--out', 'run', '--harness', 'pi', ...grader])
      .flags as unknown as LoopFlags;
  assert.equal(loopOptions(flags(['--grader', VERIFIER])).verifier, VERIFIER);
  assert.equal(loopOptions(flags([])).verifier, undefined);
  assert.throws(() => loopOptions(flags(['--grader', 'swebench'])), /polar loop grades each rollout itself/);
  const evalFlags = parseArgv(['eval', '--dataset', MINI, '--grader', VERIFIER]).flags;
  assert.deepEqual(evalFlags.grader, { kind: 'verifier', command: VERIFIER });
  // and polar gym
  const gymFlags = parseArgv(['gym', '--grader', VERIFIER]).flags as { grader: Grader };
  assert.equal(gymVerifier(gymFlags.grader), VERIFIER);
  assert.equal(gymVerifier((parseArgv(['gym']).flags as { grader: Grader }).grader), undefined);
  assert.throws(() => gymVerifier({ kind: 'swebench' }), /polar gym grades each rollout as it answers/);
});

test("a verifier-graded dataset needs no FAIL_TO_PASS, and the row's own fields reach the verifier", async () => {
  const raw = miniRows().find((r) => r.instance_id === 'polar-fixtures__jsutil-5')!;
  const { FAIL_TO_PASS: _f, PASS_TO_PASS: _p, ...rest } = raw;
  const path = join(tmp, 'verifier-rows.jsonl');
  writeFileSync(path, `${JSON.stringify({ ...rest, mode: 'patch', answer: { word: 'blue' } })}\n`);
  // graded by the tests, such a row could never show a fix: refused, naming the way out
  await assert.rejects(loadDataset(path), (e: Error & { hint?: string }) => {
    assert.match(e.message, /verifier-rows\.jsonl:1: FAIL_TO_PASS: .*empty/);
    assert.match(String(e.hint), /--grader CMD/);
    return true;
  });
  const [row] = (await loadDataset(path, { verifier: true })) as [SweInstance];
  assert.deepEqual(row.FAIL_TO_PASS, []);
  assert.deepEqual(
    row.extra,
    { mode: 'patch', answer: { word: 'blue' } },
    'fields polar does not read are kept',
  );
  const outcome = await runEval(
    localEvalOptions([row], new GoldAgent(), join(tmp, 'row-fields'), { dataset: path, verifier: VERIFIER }),
  );
  assert.equal(outcome.results[0]!.reward, 0.75, "the verifier read the row's mode");
  // --regrade of that run reads the dataset as the run did: with its --grader, no FAIL_TO_PASS needed
  const out = join(tmp, 'row-fields');
  await assert.rejects(regradeCommand({ out, dataset: path, json: true }), /FAIL_TO_PASS/);
  // the report it prints is taken through its writer: process.stdout, the test runner's channel, is left alone
  const printed: string[] = [];
  assert.equal(
    await regradeCommand(
      { out, dataset: path, grader: { kind: 'verifier', command: VERIFIER }, json: true },
      (text) => printed.push(text),
    ),
    0,
  );
  assert.equal(JSON.parse(printed.join('')).total, 1, 'the report of its one sample, as JSON');
  const [kept] = readFileSync(join(out, 'results.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  assert.equal(kept.reward, 0.75, 'a verifier-graded sample is kept as it was');
});

test('polar loop: --prompt-template and --seed reach the rollouts; --model may be a checkpoint to export', () => {
  const checkpoint = join(tmp, 'ckpt');
  mkdirSync(checkpoint, { recursive: true });
  writeFileSync(join(checkpoint, 'model.safetensors'), '');
  const argv = ['--train-set', MINI, '--out', 'run', '--harness', 'pi', '--model', checkpoint];
  const o = loopOptions(
    parseArgv(['loop', ...argv, '--prompt-template', 'p.txt', '--seed', '7']).flags as unknown as LoopFlags,
  );
  assert.equal(o.agent.promptTemplate, 'p.txt');
  assert.equal(o.backend.seed, 7);
  // the loop exports the checkpoint for the embedded engine itself; eval, which does not, refuses it
  assert.equal(o.backend.model, checkpoint);
  assert.equal(o.trainModel, checkpoint);
  const evalFlags = parseArgv(['eval', '--dataset', MINI, '--model', checkpoint]).flags;
  assert.throws(() => backendOptions(evalFlags as BackendFlags), /a training checkpoint without onnx/);
});
