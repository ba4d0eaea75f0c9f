/** `polar doctor --backend ... --backend-url ...`: the probe's report on stdout, exit 0 only when ready. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { polarInProcess } from '../../support/cli.ts';
import { startStandin } from '../../support/vllm-standin.ts';

async function doctor(args: string[]): Promise<{ code: number; out: string }> {
  const { code, stdout } = await polarInProcess(['doctor', ...args]);
  return { code, out: stdout };
}

test('polar doctor: a ready vLLM exits 0; one without tool calling exits 4 naming the flags', async () => {
  const good = await startStandin();
  const bad = await startStandin({ toolParser: false });
  try {
    const ok = await doctor(['--backend', 'vllm', '--backend-url', good.url, '--model', 'Qwen/Qwen3-4B']);
    assert.equal(ok.code, 0);
    assert.match(ok.out, /^backend vllm at .*: ready$/m);
    const no = await doctor([
      '--backend',
      'vllm',
      '--backend-url',
      bad.url,
      '--model',
      'Qwen/Qwen3-4B',
      '--json',
    ]);
    assert.equal(no.code, 4);
    const report = JSON.parse(no.out) as { ok: boolean; checks: { name: string; fix?: string }[] };
    assert.equal(report.ok, false);
    assert.match(report.checks.find((c) => c.name === 'tool_calling')!.fix!, /--enable-auto-tool-choice/);
  } finally {
    await good.close();
    await bad.close();
  }
});
