/** Folds a harness-side SSE stream back into what the harness keeps, checking the ordering rules on the way. */
import assert from 'node:assert/strict';
import type { Event } from './harness-samples.ts';

type Obj = Record<string, unknown>;

/** Responses (Codex/Pi): items keyed by id; deltas only between output_item.added and .done. */
export function foldResponses(evts: Event[]) {
  const open = new Map<string, { text: string; args: string }>();
  const done: Obj[] = [];
  let final: Obj | undefined;
  let finalType: string | undefined;
  evts.forEach((e, i) => {
    assert.equal(e.data.sequence_number, i, `sequence_number of event ${i}`);
    assert.equal(finalType, undefined, `no event after ${finalType}`);
    const itemId = e.data.item_id as string | undefined;
    if (itemId !== undefined)
      assert.ok(open.has(itemId), `${e.type} for ${itemId} comes after output_item.added`);
    switch (e.type) {
      case 'response.output_item.added': {
        const item = e.data.item as Obj;
        assert.ok(!open.has(item.id as string), 'item added once');
        open.set(item.id as string, { text: '', args: '' });
        break;
      }
      case 'response.output_text.delta':
      case 'response.reasoning_summary_text.delta':
        open.get(itemId!)!.text += e.data.delta as string;
        break;
      case 'response.function_call_arguments.delta':
        open.get(itemId!)!.args += e.data.delta as string;
        break;
      case 'response.output_text.done':
      case 'response.reasoning_summary_text.done':
        assert.equal(e.data.text, open.get(itemId!)!.text, 'done text equals the deltas');
        break;
      case 'response.function_call_arguments.done':
        assert.equal(e.data.arguments, open.get(itemId!)!.args, 'done arguments equal the deltas');
        break;
      case 'response.output_item.done': {
        const item = e.data.item as Obj;
        const acc = open.get(item.id as string);
        assert.ok(acc, 'output_item.done after added');
        assert.equal(e.data.output_index, done.length, 'items finish in output order');
        if (item.type === 'function_call') assert.equal(item.arguments, acc.args);
        if (item.type === 'message') assert.equal(((item.content as Obj[])[0] as Obj).text, acc.text);
        if (item.type === 'reasoning')
          assert.equal(((item.summary as Obj[])[0] as Obj | undefined)?.text ?? '', acc.text);
        open.delete(item.id as string);
        done.push(item);
        break;
      }
      case 'response.completed':
      case 'response.incomplete':
      case 'response.failed':
        finalType = e.type;
        final = e.data.response as Obj;
        break;
    }
  });
  assert.ok(final, 'stream ends with a final response event');
  assert.equal(open.size, 0, 'every item was closed');
  return { done, final, finalType: finalType! };
}

/** Anthropic (Claude Code/Pi): the Anthropic SDK's accumulation of a Message from its events. */
export function foldAnthropic(evts: Event[]): { message: Obj; error: Obj | undefined } {
  let message: Obj | undefined;
  const json = new Map<number, string>();
  let openIndex: number | undefined;
  let stopped = false;
  for (const e of evts) {
    assert.ok(!stopped, 'nothing after message_stop');
    if (e.type === 'ping') continue;
    if (e.type === 'error') return { message: message ?? {}, error: e.data.error as Obj };
    if (e.type === 'message_start') {
      assert.equal(message, undefined, 'one message_start');
      message = structuredClone(e.data.message as Obj);
      continue;
    }
    assert.ok(message, `${e.type} after message_start`);
    const content = message.content as Obj[];
    const index = e.data.index as number;
    switch (e.type) {
      case 'content_block_start':
        assert.equal(openIndex, undefined, 'one content block open at a time');
        assert.equal(index, content.length, 'blocks are numbered in order');
        content.push(structuredClone(e.data.content_block as Obj));
        openIndex = index;
        break;
      case 'content_block_delta': {
        assert.equal(index, openIndex, 'delta for the open block');
        const block = content[index]!;
        const d = e.data.delta as Obj;
        if (d.type === 'text_delta') block.text = (block.text as string) + (d.text as string);
        else if (d.type === 'thinking_delta')
          block.thinking = (block.thinking as string) + (d.thinking as string);
        else if (d.type === 'signature_delta') block.signature = d.signature;
        else if (d.type === 'input_json_delta')
          json.set(index, (json.get(index) ?? '') + (d.partial_json as string));
        else assert.fail(`unknown delta ${String(d.type)}`);
        break;
      }
      case 'content_block_stop': {
        assert.equal(index, openIndex, 'stop for the open block');
        const block = content[index]!;
        if (block.type === 'tool_use') block.input = JSON.parse(json.get(index) || '{}');
        openIndex = undefined;
        break;
      }
      case 'message_delta':
        assert.equal(openIndex, undefined, 'blocks closed before message_delta');
        Object.assign(message, e.data.delta as Obj);
        Object.assign(message.usage as Obj, e.data.usage as Obj);
        break;
      case 'message_stop':
        stopped = true;
        break;
      default:
        assert.fail(`unexpected event ${e.type}`);
    }
  }
  assert.ok(stopped, 'stream ends with message_stop');
  return { message: message!, error: undefined };
}
