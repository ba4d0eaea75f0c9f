/**
 * The SSE event sequences of one Responses output item, for the stream writer: each item gets
 * output_item.added (and its part's .added) before its deltas, then .done events and output_item.done
 * after them. Pure: the writer owns the state and the sequence numbers (through `emit`).
 */
import { functionCallItem, messageItem, reasoningItem, textPart } from './output-items.ts';

/** Encodes one event with the next sequence number. */
export type Emit = (type: string, payload: Record<string, unknown>) => string;

/** The open message (text) or reasoning (summary text) item. */
export interface OpenBlock {
  kind: 'reasoning' | 'text';
  id: string;
  outputIndex: number;
  text: string;
}

/** An open function_call item. */
export interface OpenCall {
  id: string;
  outputIndex: number;
  callId: string;
  name: string;
  args: string;
}

/** The events that close an item, and the item as it goes into the response's output. */
export interface ItemDone {
  sse: string;
  item: Record<string, unknown>;
}

const where = (b: { id: string; outputIndex: number }) => ({ item_id: b.id, output_index: b.outputIndex });

export function blockAdded(emit: Emit, b: OpenBlock): string {
  if (b.kind === 'reasoning') {
    return (
      emit('response.output_item.added', {
        output_index: b.outputIndex,
        item: reasoningItem(b.id, '', undefined),
      }) +
      emit('response.reasoning_summary_part.added', {
        ...where(b),
        summary_index: 0,
        part: { type: 'summary_text', text: '' },
      })
    );
  }
  return (
    emit('response.output_item.added', {
      output_index: b.outputIndex,
      item: messageItem(b.id, '', 'in_progress'),
    }) + emit('response.content_part.added', { ...where(b), content_index: 0, part: textPart('') })
  );
}

export function blockDelta(emit: Emit, b: OpenBlock, text: string): string {
  return b.kind === 'reasoning'
    ? emit('response.reasoning_summary_text.delta', { ...where(b), summary_index: 0, delta: text })
    : emit('response.output_text.delta', { ...where(b), content_index: 0, delta: text });
}

export function blockDone(emit: Emit, b: OpenBlock, signature: string | undefined): ItemDone {
  if (b.kind === 'reasoning') {
    const part = { type: 'summary_text', text: b.text };
    const item = reasoningItem(b.id, b.text, signature);
    const sse =
      emit('response.reasoning_summary_text.done', { ...where(b), summary_index: 0, text: b.text }) +
      emit('response.reasoning_summary_part.done', { ...where(b), summary_index: 0, part }) +
      emit('response.output_item.done', { output_index: b.outputIndex, item });
    return { sse, item };
  }
  const item = messageItem(b.id, b.text);
  const sse =
    emit('response.output_text.done', { ...where(b), content_index: 0, text: b.text }) +
    emit('response.content_part.done', { ...where(b), content_index: 0, part: textPart(b.text) }) +
    emit('response.output_item.done', { output_index: b.outputIndex, item });
  return { sse, item };
}

export function callAdded(emit: Emit, c: OpenCall): string {
  const item = functionCallItem(c.id, { id: c.callId, name: c.name, arguments: '' }, 'in_progress');
  return emit('response.output_item.added', { output_index: c.outputIndex, item });
}

export function callDelta(emit: Emit, c: OpenCall, delta: string): string {
  return emit('response.function_call_arguments.delta', { ...where(c), delta });
}

export function callDone(emit: Emit, c: OpenCall): ItemDone {
  const item = functionCallItem(c.id, { id: c.callId, name: c.name, arguments: c.args });
  const sse =
    emit('response.function_call_arguments.done', { ...where(c), arguments: c.args }) +
    emit('response.output_item.done', { output_index: c.outputIndex, item });
  return { sse, item };
}
