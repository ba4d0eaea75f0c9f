/**
 * `polar loop --max-staleness 1 --overdue drop` end to end (issue 27): real Pi against the vLLM stand-in,
 * the tiny Llama trained on the CPU, 3 steps of one task each. The stand-in's policy has Pi run the shell
 * command a task's statement names; the first task's command holds: the first two samples to run it (its
 * first group's) take a gate folder each, write their pids and sleep, so that group never completes. The
 * second task's command waits for both to hold, so step 1 trains it only once they do; step 2 trains the
 * third task, the held group is then overdue (step 3 may not train a version-0 sample) and is cancelled,
 * its task launched again, and the relaunch (its samples find the gates taken and go on) is step 3's.
 * No sleep decides the order: each event waits for the one before it.
 *
 * What must hold: the journal's `dropped` (reason `overdue`) and the relaunch's `group` with `replaces`;
 * no result line and no step for the cut samples (their captures set aside); every harness process of
 * the cancelled group (Pi, and its bash tool, which Pi runs in a session of its own) is gone once the drop
 * is journalled; each task is trained exactly once; the loop exits 0.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { ensureFixtureRepos } from '../../scripts/swe-fixtures.ts';
import { findPython } from '../../src/train/env.ts';
import { privateDirs } from '../support/capture-run.ts';
import { ROOT, startPolar } from '../support/cli.ts';
import { loopEnv, servedPolicy, standinTrainConfig } from '../support/coin-loop.ts';
import { running as alive, membersOf, procStat } from '../support/processes.ts';
import { type ChatBody, type Policy, startStandin } from '../support/vllm-standin.ts';

const python = await findPython(process.env.POLAR_PYTHON).catch(() => null);
const SKIP = python?.transformers ? false : 'no Python with torch and transformers (npm run setup:python)';

const VERIFIER = `node ${join(ROOT, 'fixtures/verifier/reward.mjs')}`;
const MARK = 'POLAR_TEST_RUN: ';

/** The stand-in's policy: Pi's bash tool runs the command after MARK in the task; after its result, an answer. */
const runPolicy: Policy = (body: ChatBody) => {
  const last = body.messages.at(-1);
  if (last?.role === 'tool') return { content: 'Done.' };
  const user = [...body.messages].reverse().find((m) => m.role === 'user');
  const text = typeof user?.content === 'string' ? user.content : JSON.stringify(user?.content ?? '');
  const at = text.indexOf(MARK);
  if (at < 0 || !body.tools?.some((t) => t.function?.name === 'bash')) return { content: 'Hello.' };
  const command = text.slice(at + MARK.length).split('\n')[0]!;
  return { toolCalls: [{ name: 'bash', arguments: { command } }] };
};

/** What this test reads of a step.json. */
interface Step {
  tasks: string[];
  groups: Array<{ group: number }>;
  staleness: { dropped: number };
  rollouts: { samples: number };
}

const jsonl = (path: string): Array<Record<string, unknown>> =>
  existsSync(path)
    ? readFileSync(path, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>)
    : [];

/** Polls `ready` every 100 ms until it holds, `gaveUp` (polar exited) says stop, or `limitMs` passes. */
async function until(ready: () => boolean, gaveUp: () => boolean, limitMs: number): Promise<boolean> {
  const t0 = Date.now();
  while (!ready()) {
    if (gaveUp() || Date.now() - t0 > limitMs) return ready();
    await new Promise((r) => setTimeout(r, 100));
  }
  return true;
}

describe('polar loop --max-staleness 1 --overdue drop, through Pi', { skip: SKIP }, () => {
  // the held samples' processes, killed here if the test fails before polar ends them
  const seen = new Set<number>();
  after(() => {
    for (const pid of seen)
      if (alive(pid))
        try {
          process.kill(pid, 'SIGKILL');
        } catch {}
  });

  test('an overdue group is cancelled, its harnesses ended, its task trained once by the relaunch', async () => {
    ensureFixtureRepos();
    const { home, workdir } = await privateDirs();
    const gate = join(workdir, 'gate');
    await mkdir(gate);
    const base = JSON.parse(readFileSync(join(ROOT, 'fixtures/loop/coin.jsonl'), 'utf8').split('\n')[0]!);
    const held = [0, 1].map((i) => join(gate, `held-${i}`, 'pids'));
    const commands = {
      // the first two samples to get here take a gate each, say who they are (the shell, and Pi its
      // parent) and sleep; the bound is the test's own backstop, far beyond the drop
      hold:
        `for i in 0 1; do if mkdir ${gate}/held-$i 2>/dev/null; then echo "$$ $PPID" > ${gate}/held-$i/tmp ` +
        `&& mv ${gate}/held-$i/tmp ${gate}/held-$i/pids && exec sleep 300; fi; done; echo free`,
      // done only once both holders hold (bounded: 120 s)
      wait: `n=0; until [ -e ${held[0]} ] && [ -e ${held[1]} ] || [ $n -ge 1200 ]; do sleep 0.1; n=$((n+1)); done; echo ready`,
      plain: 'echo plain',
    };
    const tasks = Object.entries(commands).map(([name, command]) => ({
      instance_id: `polar-fixtures__jsutil-overdue-${name}`,
      repo: base.repo,
      base_commit: base.base_commit,
      patch: '',
      test_patch: '',
      problem_statement: `${MARK}${command}\n`,
      FAIL_TO_PASS: [],
      PASS_TO_PASS: [],
      answer: 'Done',
    }));
    const trainSet = join(workdir, 'train.jsonl');
    await writeFile(trainSet, tasks.map((t) => `${JSON.stringify(t)}\n`).join(''));
    await writeFile(join(workdir, 'prompt.txt'), '{{problem_statement}}');

    const standin = await startStandin({ policy: runPolicy });
    try {
      const run = join(workdir, 'run');
      const polar = startPolar(
        [
          'loop',
          '--train-set',
          trainSet,
          '--harness',
          'pi',
          ...servedPolicy(standin.url, await standinTrainConfig(workdir)),
          '--prompt-template',
          join(workdir, 'prompt.txt'),
          '--grader',
          VERIFIER,
          '--group-size',
          '2',
          '--tasks-per-step',
          '1',
          '--steps',
          '3',
          '--max-staleness',
          '1',
          '--overdue',
          'drop',
          // both held samples and the other group's two at once
          '--concurrency',
          '4',
          '--runtime',
          'local',
          '--allow-unsandboxed',
          '--repos',
          join(ROOT, 'fixtures/swe/repos'),
          '--device',
          'cpu',
          '--lr',
          '0.001',
          '--agent-timeout',
          '240',
          '--test-timeout',
          '60',
          '--out',
          run,
        ],
        { cwd: workdir, env: loopEnv(home, python!.executable), extendEnv: false, timeoutMs: 400_000 },
      );
      let exited = false;
      const done = polar.then((r) => {
        exited = true;
        return r;
      });
      const stderr = async () => String((await done).stderr);

      // 1. both samples of the first group hold: their processes, and everything in their process groups
      const holding = await until(
        () => held.every((f) => existsSync(f)),
        () => exited,
        300_000,
      );
      assert.ok(holding, `the first group's samples hold\n${exited ? await stderr() : ''}`);
      const groups = new Set<number>();
      for (const f of held) {
        const [shell, pi] = readFileSync(f, 'utf8').trim().split(' ').map(Number) as [number, number];
        for (const pid of [shell, pi]) {
          seen.add(pid);
          const s = procStat(pid);
          if (s) groups.add(s.pgrp);
        }
        // Pi runs its bash tool in a session (and process group) of its own
        assert.notEqual(procStat(shell)?.pgrp, procStat(pi)?.pgrp, 'the tool has a group of its own');
      }
      for (const pid of membersOf(groups)) seen.add(pid);
      assert.ok(seen.size >= 4, `two Pis and two tool shells at least: ${[...seen].join(' ')}`);

      // 2. step 2 trains without that group: it is dropped as overdue, its task launched again
      const journal = join(run, 'schedule.jsonl');
      const isDrop = (r: Record<string, unknown>) => r.type === 'dropped' && r.group === 0;
      const dropped = await until(
        () => jsonl(journal).some(isDrop),
        () => exited,
        300_000,
      );
      assert.ok(dropped, `group 0 was dropped\n${exited ? await stderr() : ''}`);

      // 3. every process of the cancelled group's harnesses ends (SIGTERM, SIGKILL 5 s later)
      const gone = await until(
        () => [...seen].every((p) => !alive(p)),
        () => false,
        60_000,
      );
      assert.ok(gone, `alive after the drop: ${[...seen].filter(alive).join(' ')}`);
      assert.deepEqual(membersOf(groups), [], 'nothing is left in their process groups');

      const r = await done;
      assert.equal(r.exitCode, 0, String(r.stderr));

      // the journal: the drop, then the relaunch of the same task naming the group it replaces
      const records = jsonl(journal);
      const drop = records.findIndex(isDrop);
      assert.deepEqual(records[drop], { v: 1, type: 'dropped', group: 0, step: 2, reason: 'overdue' });
      const relaunch = records.findIndex((x) => x.type === 'group' && x.replaces === 0);
      assert.ok(relaunch > drop, 'the relaunch is journalled after the drop');
      const launched = (g: unknown) => records.find((x) => x.type === 'group' && x.group === g)!;
      assert.equal(records[relaunch]!.task, launched(0).task);
      assert.equal(launched(0).task, tasks[0]!.instance_id);
      assert.equal(records.filter((x) => x.type === 'dropped').length, 1, 'one group dropped');
      assert.ok(!records.some((x) => x.type === 'complete' && x.group === 0));

      // the cut samples: no result line, no grading, their captures set aside
      const g0 = join(run, 'groups', 'g-000000');
      assert.deepEqual(jsonl(join(g0, 'results.jsonl')), [], 'no result of the cancelled group');
      const captures = readdirSync(join(g0, 'captures')).sort();
      assert.equal(captures.length, 2, captures.join(' '));
      for (const c of captures) assert.match(c, /\.jsonl\.interrupted$/);

      // each task trained exactly once, in three steps; the two cut samples counted as dropped at step 2
      const steps = [1, 2, 3].map(
        (n) => JSON.parse(readFileSync(join(run, `step-${n}`, 'step.json'), 'utf8')) as Step,
      );
      const trained = steps.flatMap((s) => s.tasks).sort();
      assert.deepEqual(trained, tasks.map((t) => t.instance_id).sort());
      const batches = steps.flatMap((s) => s.groups.map((g) => g.group));
      assert.ok(!batches.includes(0), `group 0 is in no batch: ${batches}`);
      assert.equal(new Set(batches).size, 3);
      assert.deepEqual(
        steps.map((s) => s.staleness.dropped),
        [0, 2, 0],
      );
      assert.equal(steps[2]!.tasks[0], tasks[0]!.instance_id, 'step 3 trains the relaunched task');
      for (const s of steps) assert.equal(s.rollouts.samples, 2);
      // the relaunch's samples went on past the gate, and were graded
      const relaunched = jsonl(
        join(run, 'groups', `g-${String(records[relaunch]!.group).padStart(6, '0')}`, 'results.jsonl'),
      );
      assert.equal(relaunched.length, 2);
      for (const l of relaunched) assert.notEqual(l.status, 'error', JSON.stringify(l));
    } finally {
      await standin.close();
    }
  });
});
