/**
 * Canonical stream events -> Responses API SSE for a harness (Codex CLI, Pi). Every item gets
 * output_item.added before its deltas (Pi silently does nothing without it) and output_item.done
 * after them; Codex builds its history from the done items, so they are emitted in output order.
 * The event sequences of each item kind are in stream-items.ts; this file keeps the state (the open
 * item, the open calls, the output so far) and the response's lifecycle.
 * Stateful; never throws: an internal failure becomes `response.failed`.
 */
import { type CanonicalResponse, fault, newId, type ProxyFault, type StreamEvent } from '../canonical.ts';
import { sequencedWriter } from '../sequence-tool-calls.ts';
import { encodeSse } from '../sse.ts';
import { mapFinishReason } from './map-finish-reason.ts';
import { responseObject } from './output-items.ts';
import {
  blockAdded,
  blockDelta,
  blockDone,
  callAdded,
  callDelta,
  callDone,
  type ItemDone,
  type OpenBlock,
  type OpenCall,
} from './stream-items.ts';

/** Items closed before the signature was known still carry it in the final response object. */
function withSignature(output: readonly Record<string, unknown>[], signature: string | undefined) {
  return output.map((item) =>
    item.type === 'reasoning' && item.encrypted_content === null
      ? { ...item, encrypted_content: signature ?? null }
      : item,
  );
}

class ResponsesStream {
  private seq = 0;
  private id = newId('resp');
  private model = '';
  private signature: string | undefined;
  private started = false;
  private block: OpenBlock | undefined;
  private readonly calls = new Map<number, OpenCall>();
  private readonly output: Record<string, unknown>[] = [];

  constructor(private readonly created: number) {}

  private readonly emit = (type: string, payload: Record<string, unknown>): string =>
    encodeSse({ type, sequence_number: this.seq++, ...payload }, type);

  one(event: StreamEvent): string {
    switch (event.type) {
      case 'start':
        this.id = event.id;
        this.model = event.model;
        this.signature = event.reasoningSignature;
        return this.start();
      case 'reasoning-delta':
        return this.start() + this.delta('reasoning', event.text);
      case 'text-delta':
        return this.start() + this.delta('text', event.text);
      case 'tool-call-start':
        return this.start() + this.closeBlock() + this.startCall(event.index, event.id, event.name);
      case 'tool-call-delta':
        return this.callDelta(event.index, event.arguments);
      case 'tool-call-end':
        return this.endCall(event.index);
      case 'finish':
        return this.start() + this.finish(event.response);
      case 'error':
        return this.start() + this.failed(event.error);
      default: {
        const never: never = event;
        return never;
      }
    }
  }

  /** An internal failure: the response so far, failed. */
  fail(error: ProxyFault): string {
    return this.start() + this.failed(error);
  }

  private response(state: Parameters<typeof responseObject>[0]['state'], rest = {}) {
    return responseObject({
      id: this.id,
      created: this.created,
      model: this.model,
      state,
      output: [],
      ...rest,
    });
  }

  private start(): string {
    if (this.started) return '';
    this.started = true;
    const inProgress = () => this.response({ status: 'in_progress' });
    return (
      this.emit('response.created', { response: inProgress() }) +
      this.emit('response.in_progress', { response: inProgress() })
    );
  }

  private done({ sse, item }: ItemDone): string {
    this.output.push(item);
    return sse;
  }

  private closeBlock(): string {
    const b = this.block;
    if (!b) return '';
    this.block = undefined;
    return this.done(blockDone(this.emit, b, this.signature));
  }

  private delta(kind: OpenBlock['kind'], text: string): string {
    let out = '';
    if (this.block?.kind !== kind) {
      out += this.closeBlock();
      const id = newId(kind === 'text' ? 'msg' : 'rs');
      this.block = { kind, id, outputIndex: this.output.length, text: '' };
      out += blockAdded(this.emit, this.block);
    }
    const b = this.block!;
    b.text += text;
    return out + blockDelta(this.emit, b, text);
  }

  private startCall(index: number, callId: string, name: string): string {
    const c: OpenCall = { id: newId('fc'), outputIndex: this.output.length, callId, name, args: '' };
    this.calls.set(index, c);
    return callAdded(this.emit, c);
  }

  private callDelta(index: number, args: string): string {
    const c = this.calls.get(index);
    if (!c) return '';
    c.args += args;
    return callDelta(this.emit, c, args);
  }

  private endCall(index: number): string {
    const c = this.calls.get(index);
    if (!c) return '';
    this.calls.delete(index);
    return this.done(callDone(this.emit, c));
  }

  private finish(r: CanonicalResponse): string {
    if (this.block?.kind === 'reasoning') this.signature ??= r.reasoningSignature;
    let out = this.closeBlock();
    for (const index of [...this.calls.keys()]) out += this.endCall(index);
    if (this.output.length === 0) out += this.delta('text', '') + this.closeBlock();
    const state = mapFinishReason(r.finishReason);
    const error =
      state.status === 'failed' ? fault('backend_error', 'the backend reported an error') : undefined;
    const output = withSignature(this.output, r.reasoningSignature);
    const response = this.response(state, { output, usage: r.usage, error });
    return out + this.emit(`response.${state.status}`, { response });
  }

  private failed(error: ProxyFault): string {
    const response = this.response({ status: 'failed' }, { output: this.output, error });
    return this.emit('response.failed', { response });
  }
}

export function createStreamWriter(ctx: { created: number }): { write(event: StreamEvent): string } {
  const stream = new ResponsesStream(ctx.created);
  return sequencedWriter({ one: (event) => stream.one(event), fail: (error) => stream.fail(error) });
}
