/**
 * Canonical stream events -> Responses API SSE for a harness (Codex CLI, Pi). Every item gets
 * output_item.added before its deltas (Pi silently does nothing without it) and output_item.done
 * after them; Codex builds its history from the done items, so they are emitted in output order.
 * Stateful; never throws: an internal failure becomes `response.failed`.
 */
import { type CanonicalResponse, fault, newId, type ProxyFault, type StreamEvent } from '../canonical.ts';
import { sequencedWriter } from '../sequence-tool-calls.ts';
import { encodeSse } from '../sse.ts';
import { mapFinishReason } from './map-finish-reason.ts';
import { functionCallItem, messageItem, reasoningItem, responseObject, textPart } from './output-items.ts';

interface OpenBlock {
  kind: 'reasoning' | 'text';
  id: string;
  outputIndex: number;
  text: string;
}
interface OpenCall {
  id: string;
  outputIndex: number;
  callId: string;
  name: string;
  args: string;
}

export function createStreamWriter(ctx: { created: number }): { write(event: StreamEvent): string } {
  let seq = 0;
  let id = newId('resp');
  let model = '';
  let signature: string | undefined;
  let started = false;
  let ended = false;
  let block: OpenBlock | undefined;
  const calls = new Map<number, OpenCall>();
  const output: Record<string, unknown>[] = [];

  const emit = (type: string, payload: Record<string, unknown>) =>
    encodeSse({ type, sequence_number: seq++, ...payload }, type);
  const inProgress = () =>
    responseObject({ id, created: ctx.created, model, state: { status: 'in_progress' }, output: [] });

  const start = (): string => {
    if (started) return '';
    started = true;
    return (
      emit('response.created', { response: inProgress() }) +
      emit('response.in_progress', { response: inProgress() })
    );
  };

  const closeBlock = (): string => {
    const b = block;
    if (!b) return '';
    block = undefined;
    const at = { item_id: b.id, output_index: b.outputIndex };
    if (b.kind === 'reasoning') {
      const part = { type: 'summary_text', text: b.text };
      const item = reasoningItem(b.id, b.text, signature);
      output.push(item);
      return (
        emit('response.reasoning_summary_text.done', { ...at, summary_index: 0, text: b.text }) +
        emit('response.reasoning_summary_part.done', { ...at, summary_index: 0, part }) +
        emit('response.output_item.done', { output_index: b.outputIndex, item })
      );
    }
    const item = messageItem(b.id, b.text);
    output.push(item);
    return (
      emit('response.output_text.done', { ...at, content_index: 0, text: b.text }) +
      emit('response.content_part.done', { ...at, content_index: 0, part: textPart(b.text) }) +
      emit('response.output_item.done', { output_index: b.outputIndex, item })
    );
  };

  const delta = (kind: OpenBlock['kind'], text: string): string => {
    let out = '';
    if (block?.kind !== kind) {
      out += closeBlock();
      const b: OpenBlock = {
        kind,
        id: newId(kind === 'text' ? 'msg' : 'rs'),
        outputIndex: output.length,
        text: '',
      };
      block = b;
      const at = { item_id: b.id, output_index: b.outputIndex };
      if (kind === 'reasoning') {
        out += emit('response.output_item.added', {
          output_index: b.outputIndex,
          item: reasoningItem(b.id, '', undefined),
        });
        out += emit('response.reasoning_summary_part.added', {
          ...at,
          summary_index: 0,
          part: { type: 'summary_text', text: '' },
        });
      } else {
        out += emit('response.output_item.added', {
          output_index: b.outputIndex,
          item: messageItem(b.id, '', 'in_progress'),
        });
        out += emit('response.content_part.added', { ...at, content_index: 0, part: textPart('') });
      }
    }
    const b = block!;
    b.text += text;
    const at = { item_id: b.id, output_index: b.outputIndex };
    return kind === 'reasoning'
      ? out + emit('response.reasoning_summary_text.delta', { ...at, summary_index: 0, delta: text })
      : out + emit('response.output_text.delta', { ...at, content_index: 0, delta: text });
  };

  const endCall = (index: number): string => {
    const c = calls.get(index);
    if (!c) return '';
    calls.delete(index);
    const item = functionCallItem(c.id, { id: c.callId, name: c.name, arguments: c.args });
    output.push(item);
    return (
      emit('response.function_call_arguments.done', {
        item_id: c.id,
        output_index: c.outputIndex,
        arguments: c.args,
      }) + emit('response.output_item.done', { output_index: c.outputIndex, item })
    );
  };

  const finish = (r: CanonicalResponse): string => {
    let out = '';
    if (block?.kind === 'reasoning') signature ??= r.reasoningSignature;
    out += closeBlock();
    for (const index of [...calls.keys()]) out += endCall(index);
    if (output.length === 0) out += delta('text', '') + closeBlock();
    // items closed before the signature was known still carry it in the final response object
    const final = output.map((item) =>
      item.type === 'reasoning' && item.encrypted_content === null
        ? { ...item, encrypted_content: r.reasoningSignature ?? null }
        : item,
    );
    const state = mapFinishReason(r.finishReason);
    const error =
      state.status === 'failed' ? fault('backend_error', 'the backend reported an error') : undefined;
    const response = responseObject({
      id,
      created: ctx.created,
      model,
      state,
      output: final,
      usage: r.usage,
      error,
    });
    const type = `response.${state.status}`;
    return out + emit(type, { response });
  };

  const failed = (error: ProxyFault): string => {
    const state = { status: 'failed' } as const;
    return emit('response.failed', {
      response: responseObject({ id, created: ctx.created, model, state, output, error }),
    });
  };

  const one = (event: StreamEvent): string => {
    switch (event.type) {
      case 'start':
        id = event.id;
        model = event.model;
        signature = event.reasoningSignature;
        return start();
      case 'reasoning-delta':
        return start() + delta('reasoning', event.text);
      case 'text-delta':
        return start() + delta('text', event.text);
      case 'tool-call-start': {
        const c: OpenCall = { id: newId('fc'), outputIndex: 0, callId: event.id, name: event.name, args: '' };
        const out = start() + closeBlock();
        c.outputIndex = output.length;
        calls.set(event.index, c);
        const item = functionCallItem(c.id, { id: c.callId, name: c.name, arguments: '' }, 'in_progress');
        return out + emit('response.output_item.added', { output_index: c.outputIndex, item });
      }
      case 'tool-call-delta': {
        const c = calls.get(event.index);
        if (!c) return '';
        c.args += event.arguments;
        const payload = { item_id: c.id, output_index: c.outputIndex, delta: event.arguments };
        return emit('response.function_call_arguments.delta', payload);
      }
      case 'tool-call-end':
        return endCall(event.index);
      case 'finish':
        ended = true;
        return start() + finish(event.response);
      case 'error':
        ended = true;
        return start() + failed(event.error);
      default: {
        const never: never = event;
        return never;
      }
    }
  };

  return sequencedWriter({
    ended: () => ended,
    markEnded: () => {
      ended = true;
    },
    one,
    fail: (error) => start() + failed(error),
  });
}
