/**
 * `polar loop --agent` (issue 47 item 6): the loop names its harness as `polar eval` does, with --agent;
 * --harness, the old name, still works for a release with the warning eval gives for its own. The loop's
 * --agent takes harnesses only (it trains on their calls): gold, empty and predictions are refused.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { program } from '../../../src/cli.ts';
import type { EvalFlags } from '../../../src/eval/flags.ts';
import { evaluationSetup } from '../../../src/eval/job.ts';
import { type LoopFlags, loopOptions } from '../../../src/loop/command.ts';
import { parseArgv, usageError } from '../../support/argv.ts';

const base = ['loop', '--train-set', 't.jsonl', '--out', 'run'];
const vllm = ['--backend', 'vllm', '--backend-url', 'http://127.0.0.1:8000/v1', '--model', 'm'];

/** The loop's options from argv, and the warnings said on the way. */
function loop(extra: string[]): { agent: string; warnings: string[] } {
  const warnings: string[] = [];
  const o = loopOptions(parseArgv([...base, ...vllm, ...extra]).flags as unknown as LoopFlags, (m) =>
    warnings.push(m),
  );
  return { agent: o.agent.agent, warnings };
}

describe('polar loop --agent', () => {
  test('--agent names the harness, without a warning', () => {
    assert.deepEqual(loop(['--agent', 'pi']), { agent: 'pi', warnings: [] });
    assert.deepEqual(loop(['--agent', 'codex', '--harness', 'codex']).agent, 'codex');
  });

  test("--harness still works, with eval's warning in the loop's name", () => {
    assert.deepEqual(loop(['--harness', 'pi']), {
      agent: 'pi',
      warnings: ['--harness of polar loop is now --agent (the old name goes in the next release)'],
    });
    const evalWarnings: string[] = [];
    evaluationSetup({ dataset: 'd', harness: 'pi', ...vllm } as unknown as EvalFlags, (m) =>
      evalWarnings.push(m),
    );
    assert.deepEqual(evalWarnings, [
      '--harness of polar eval is now --agent (the old name goes in the next release)',
    ]);
  });

  test('no agent, two agents, or an agent that runs no harness: usage errors naming the flag', () => {
    assert.throws(() => loop([]), /give --agent: the harness the rollouts run \(codex\|claude\|pi/);
    assert.throws(
      () => loop(['--agent', 'pi', '--harness', 'codex']),
      /--agent pi and --harness codex name two different agents/,
    );
    assert.match(
      usageError([...base, '--agent', 'gold']) ?? '',
      /^--agent gold is not one of codex, claude, pi/,
    );
    assert.match(usageError([...base, '--agent', 'pii']) ?? '', /^--agent pii is not one of/);
  });

  test('--help shows --agent, not the old name, and the example uses --agent', () => {
    const help = loopHelp().replace(/\s+/g, ' ');
    assert.match(help, /--agent <name>\s+the harness the rollouts run under polar capture/);
    assert.doesNotMatch(help, /--harness/);
    assert.match(help, /polar loop --train-set train\.jsonl --eval-set heldout\.jsonl --agent pi/);
  });
});

/** polar loop --help's text, as a user sees it. */
function loopHelp(): string {
  const cmd = program().commands.find((c) => c.name() === 'loop');
  let text = '';
  cmd?.configureOutput({
    writeOut: (s) => {
      text += s;
    },
  });
  cmd?.outputHelp();
  return text;
}
