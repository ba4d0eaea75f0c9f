/**
 * Tool calls the server did not parse (issue 30, part 2): the model wrote a `<tool_call>` in its own
 * format, the server returned none, the harness saw text. Flagged per call in the capture
 * (`tool_call_unparsed`), per trace in the trajectory, counted by polar build, and handled by
 * --unparsed-tool-calls zero|mask|keep. The server is the vLLM stand-in with a tool-call parser that
 * does not read the model's format (`skipToolParser`).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { CallRecord } from '../../../src/capture/record.ts';
import { hasUnparsedToolCall } from '../../../src/tokenizer/unparsed.ts';
import { formatStats, statsWarnings } from '../../../src/trajectory/stats.ts';
import { post, startProxy, type TestProxy } from '../../support/proxy-harness.ts';
import { type Standin, startStandin } from '../../support/vllm-standin.ts';
import { buildFrom, grading, session, sessionEnd } from './builder.ts';

const call = (name: string, args: string) => ({ id: 'c1', name, arguments: args });

test('hasUnparsedToolCall: a <tool_call> in the text with none returned, in either Qwen format, well-formed or not', () => {
  const none = { toolCalls: [] };
  const json = 'Let me look.\n<tool_call>\n{"name": "shell", "arguments": {"command": "ls"}}\n</tool_call>';
  const xml =
    '<tool_call>\n<function=shell>\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>';
  assert.equal(hasUnparsedToolCall({ ...none, content: json }), true);
  assert.equal(hasUnparsedToolCall({ ...none, content: xml }), true);
  assert.equal(hasUnparsedToolCall({ ...none, content: '<tool_call>\n{"name": "shell", "argu' }), true);
  assert.equal(hasUnparsedToolCall({ toolCalls: [call('shell', '{}')] as never, content: json }), false);
  assert.equal(hasUnparsedToolCall({ ...none, content: 'I would call a tool here.' }), false);
  assert.equal(hasUnparsedToolCall(null), false);
});

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'shell',
      parameters: { type: 'object', properties: { command: { type: 'string' } } },
    },
  },
];
const ask = { model: 'x', messages: [{ role: 'user', content: 'list the files' }], tools: TOOLS };

describe('a server whose tool-call parser does not read the model', () => {
  let parsing: Standin;
  let skipping: Standin;
  let good: TestProxy;
  let bad: TestProxy;
  before(async () => {
    const policy = () => ({ toolCalls: [{ name: 'shell', arguments: { command: 'ls' } }] });
    parsing = await startStandin({ policy });
    skipping = await startStandin({ policy, skipToolParser: true });
    good = await startProxy({ url: parsing.url });
    bad = await startProxy({ url: skipping.url });
  });
  after(async () => {
    await good.close();
    await bad.close();
    await parsing.close();
    await skipping.close();
  });
  const send = async (p: TestProxy, stream: boolean) => {
    const r = await post(
      p.url,
      '/v1/chat/completions',
      { ...ask, stream },
      { authorization: `Bearer ${p.key}` },
    );
    assert.equal(r.status, 200);
    await r.text();
  };

  test('each call is flagged tool_call_unparsed in the capture, streamed or not; a parsed call is not', async () => {
    await send(bad, false);
    await send(bad, true);
    await send(good, false);
    await send(good, true);
    const unparsed = await bad.records();
    assert.equal(unparsed.length, 2);
    for (const rec of unparsed) {
      assert.equal(rec.tool_call_unparsed, true);
      assert.match(String((rec.canonical_response as { content: string }).content), /<tool_call>/);
      assert.equal(rec.finish_reason, 'stop');
    }
    const parsed = await good.records();
    assert.equal(parsed.length, 2);
    for (const rec of parsed) assert.equal(rec.tool_call_unparsed, undefined);
  });

  test('polar build counts them; zero (default) gives reward 0 with the tokens kept, mask and keep', async () => {
    const [unparsed] = await bad.records();
    const [parsed] = await good.records();
    const as = (rec: CallRecord, s: string): CallRecord => ({ ...rec, session: s, id: `${s}-call`, seq: 0 });
    const records = [
      session('s-bad'),
      as(unparsed!, 's-bad'),
      sessionEnd('s-bad', 'completed', 1),
      grading('s-bad', 1),
      session('s-good', { sample: 1 }),
      as(parsed!, 's-good'),
      sessionEnd('s-good', 'completed', 1),
      grading('s-good', 1, { sample: 1 }),
    ];
    const sampled = unparsed!.completion_token_ids!.length;
    const byId = (out: Record<string, unknown>[]) =>
      new Map(
        out.map((t) => [
          t.session as string,
          t as { reward: number; traces: Array<Record<string, unknown>> },
        ]),
      );

    const zero = await buildFrom(records);
    const z = byId(zero.out);
    assert.equal(z.get('s-bad')!.reward, 0, 'reward 0');
    assert.equal(z.get('s-good')!.reward, 1);
    const trace = z.get('s-bad')!.traces[0]!;
    assert.equal(trace.tool_call_unparsed, 1);
    assert.equal((trace.loss_mask as number[]).filter((m) => m === 1).length, sampled, 'tokens kept');
    assert.equal(z.get('s-good')!.traces[0]!.tool_call_unparsed, undefined);
    assert.equal(zero.stats.calls_tool_unparsed, 1);
    assert.equal(zero.stats.trajectories_tool_unparsed, 1);
    assert.equal(zero.stats.rewards_zeroed_unparsed, 1);
    assert.match(
      formatStats(zero.stats),
      /tool calls not parsed\s+1 calls in 1 trajectories \(reward set to 0: 1\)/,
    );
    assert.match(statsWarnings(zero.stats).join('\n'), /did not parse \(tool_call_unparsed\)/);

    const mask = byId((await buildFrom(records, { unparsedToolCalls: 'mask' })).out);
    assert.equal(mask.get('s-bad')!.reward, 1);
    assert.ok(
      (mask.get('s-bad')!.traces[0]!.loss_mask as number[]).every((m) => m === 0),
      'not trained',
    );
    assert.ok((mask.get('s-good')!.traces[0]!.loss_mask as number[]).some((m) => m === 1));

    const keep = await buildFrom(records, { unparsedToolCalls: 'keep' });
    const k = byId(keep.out);
    assert.equal(k.get('s-bad')!.reward, 1);
    assert.equal((k.get('s-bad')!.traces[0]!.loss_mask as number[]).filter((m) => m === 1).length, sampled);
    assert.equal(keep.stats.calls_tool_unparsed, 1, 'still counted');
    assert.equal(keep.stats.rewards_zeroed_unparsed, 0);
  });
});
