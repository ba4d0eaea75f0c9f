/**
 * Makes tool calls in a canonical event stream non-overlapping, for wire formats whose harnesses expect
 * one open block at a time (Anthropic content blocks, Responses output items). While a call is open,
 * every event not belonging to it is queued and replayed, in order, once it ends; at `finish` calls
 * that never ended get a synthetic end. Stateful, never throws.
 */
import { fault, type ProxyFault, type StreamEvent } from './canonical.ts';

export function createToolCallSequencer(): (event: StreamEvent) => StreamEvent[] {
  let active: number | undefined;
  let queue: StreamEvent[] = [];

  const step = (event: StreamEvent, out: StreamEvent[]): void => {
    if (active === undefined) {
      if (event.type === 'tool-call-start') active = event.index;
      out.push(event);
      return;
    }
    const ownsEvent =
      (event.type === 'tool-call-delta' || event.type === 'tool-call-end') && event.index === active;
    if (ownsEvent) {
      out.push(event);
      if (event.type === 'tool-call-end') drain(out);
      return;
    }
    if (event.type === 'finish') {
      out.push({ type: 'tool-call-end', index: active });
      drain(out);
      step(event, out);
      return;
    }
    if (event.type === 'error') {
      out.push(event);
      return;
    }
    queue.push(event);
  };

  const drain = (out: StreamEvent[]): void => {
    active = undefined;
    const pending = queue;
    queue = [];
    for (const event of pending) step(event, out);
  };

  return (event) => {
    const out: StreamEvent[] = [];
    step(event, out);
    return out;
  };
}

/**
 * The shell the SSE writers share: events go through the tool-call sequencer, nothing is written after
 * the stream ended (a `finish` or `error` went out), and a writer bug becomes an error event in the
 * harness's format instead of a throw.
 */
export function sequencedWriter(parts: {
  one(event: StreamEvent): string;
  fail(error: ProxyFault): string;
}): { write(event: StreamEvent): string } {
  const sequence = createToolCallSequencer();
  let ended = false;
  return {
    write(event: StreamEvent): string {
      if (ended) return '';
      let out = '';
      try {
        for (const e of sequence(event)) {
          if (ended) break;
          out += parts.one(e);
          if (e.type === 'finish' || e.type === 'error') ended = true;
        }
        return out;
      } catch (error) {
        ended = true;
        return out + parts.fail(fault('internal', `stream writer failed: ${String(error)}`));
      }
    },
  };
}
