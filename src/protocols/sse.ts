/** Server-sent events: one encoder for every writer, one incremental decoder for every backend stream. */

export interface SseEvent {
  event: string | undefined;
  data: string;
}

export function encodeSse(data: unknown, event?: string): string {
  const payload = typeof data === 'string' ? data : JSON.stringify(data);
  return `${event ? `event: ${event}\n` : ''}data: ${payload}\n\n`;
}

/** Incremental SSE decoder: push text chunks, get complete events. Handles \r\n and multi-line data. */
export class SseDecoder {
  private buffer = '';

  push(chunk: string): SseEvent[] {
    this.buffer += chunk;
    const events: SseEvent[] = [];
    for (;;) {
      const match = /\r?\n\r?\n/.exec(this.buffer);
      if (!match) break;
      const block = this.buffer.slice(0, match.index);
      this.buffer = this.buffer.slice(match.index + match[0].length);
      const event = parseBlock(block);
      if (event) events.push(event);
    }
    return events;
  }

  /** what is left when the stream ends (an unterminated final event is still returned) */
  flush(): SseEvent[] {
    const rest = this.buffer;
    this.buffer = '';
    const event = rest.trim() ? parseBlock(rest) : undefined;
    return event ? [event] : [];
  }
}

function parseBlock(block: string): SseEvent | undefined {
  let event: string | undefined;
  const data: string[] = [];
  for (const raw of block.split(/\r?\n/)) {
    if (raw === '' || raw.startsWith(':')) continue;
    const colon = raw.indexOf(':');
    const field = colon === -1 ? raw : raw.slice(0, colon);
    let value = colon === -1 ? '' : raw.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  }
  if (event === undefined && data.length === 0) return undefined;
  return { event, data: data.join('\n') };
}

/** Decodes a whole SSE text (tests, recorded fixtures). */
export function decodeSse(text: string): SseEvent[] {
  const decoder = new SseDecoder();
  return [...decoder.push(text), ...decoder.flush()];
}
