/**
 * Canonical stream events -> Anthropic Messages SSE for a harness (Claude Code, Pi). One content block
 * open at a time; a thinking block gets its signature_delta before content_block_stop. Usage is only
 * known at the end: message_start says 0 and message_delta carries the real counts (Claude Code and
 * the Anthropic SDK take input_tokens from message_delta when it is present and non-zero).
 * Stateful; never throws: an internal failure becomes an `error` event.
 */
import { type CanonicalResponse, newId, type ProxyFault, type StreamEvent } from '../canonical.ts';
import { sequencedWriter } from '../sequence-tool-calls.ts';
import { encodeSse } from '../sse.ts';
import { errorBody } from './errors.ts';
import { mapFinishReason } from './map-finish-reason.ts';
import { renderUsage } from './render-response.ts';

type Kind = 'thinking' | 'text' | 'tool';

export function createStreamWriter(_ctx: { created: number }): { write(event: StreamEvent): string } {
  let id = newId('msg');
  let model = '';
  let signature: string | undefined;
  let started = false;
  let pinged = false;
  let blocks = 0;
  let open: { kind: Kind; index: number; toolIndex?: number } | undefined;

  const emit = (type: string, payload: Record<string, unknown> = {}) => encodeSse({ type, ...payload }, type);

  const start = (): string => {
    if (started) return '';
    started = true;
    const message = {
      id,
      type: 'message',
      role: 'assistant',
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: renderUsage({ promptTokens: 0, completionTokens: 0 }),
    };
    return emit('message_start', { message });
  };

  const close = (): string => {
    const b = open;
    if (!b) return '';
    open = undefined;
    let out = '';
    if (b.kind === 'thinking' && signature) {
      out += emit('content_block_delta', { index: b.index, delta: { type: 'signature_delta', signature } });
    }
    return out + emit('content_block_stop', { index: b.index });
  };

  const openBlock = (kind: Kind, contentBlock: Record<string, unknown>, toolIndex?: number): string => {
    let out = close();
    open = { kind, index: blocks++, ...(toolIndex === undefined ? {} : { toolIndex }) };
    out += emit('content_block_start', { index: open.index, content_block: contentBlock });
    if (!pinged) {
      pinged = true;
      out += emit('ping');
    }
    return out;
  };

  const delta = (kind: 'thinking' | 'text', text: string): string => {
    let out = '';
    if (open?.kind !== kind) {
      out += openBlock(
        kind,
        kind === 'text' ? { type: 'text', text: '' } : { type: 'thinking', thinking: '', signature: '' },
      );
    }
    const d = kind === 'text' ? { type: 'text_delta', text } : { type: 'thinking_delta', thinking: text };
    return out + emit('content_block_delta', { index: open!.index, delta: d });
  };

  const finish = (r: CanonicalResponse): string => {
    if (open?.kind === 'thinking') signature ??= r.reasoningSignature;
    let out = close();
    if (blocks === 0) out += delta('text', '') + close();
    const stop = { stop_reason: mapFinishReason(r), stop_sequence: r.stopSequence ?? null };
    out += emit('message_delta', { delta: stop, usage: renderUsage(r.usage) });
    return out + emit('message_stop');
  };

  const failed = (error: ProxyFault): string => emit('error', errorBody(error));

  const one = (event: StreamEvent): string => {
    switch (event.type) {
      case 'start':
        id = event.id;
        model = event.model;
        signature = event.reasoningSignature;
        return start();
      case 'reasoning-delta':
        return start() + delta('thinking', event.text);
      case 'text-delta':
        return start() + delta('text', event.text);
      case 'tool-call-start':
        return (
          start() +
          openBlock('tool', { type: 'tool_use', id: event.id, name: event.name, input: {} }, event.index)
        );
      case 'tool-call-delta': {
        if (open?.kind !== 'tool' || open.toolIndex !== event.index || !event.arguments) return '';
        const d = { type: 'input_json_delta', partial_json: event.arguments };
        return emit('content_block_delta', { index: open.index, delta: d });
      }
      case 'tool-call-end':
        return open?.kind === 'tool' && open.toolIndex === event.index ? close() : '';
      case 'finish':
        return start() + finish(event.response);
      case 'error':
        return start() + failed(event.error);
      default: {
        const never: never = event;
        return never;
      }
    }
  };

  return sequencedWriter({ one, fail: (error) => start() + failed(error) });
}
