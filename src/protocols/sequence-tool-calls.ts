/**
 * Makes tool calls in a canonical event stream non-overlapping, for wire formats whose harnesses expect
 * one open block at a time (Anthropic content blocks, Responses output items). While a call is open,
 * every event not belonging to it is queued and replayed, in order, once it ends; at `finish` calls
 * that never ended get a synthetic end. Stateful, never throws.
 */
import type { StreamEvent } from './canonical.ts';

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
