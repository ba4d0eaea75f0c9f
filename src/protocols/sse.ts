/** Server-sent events: one encoder for every writer, one incremental decoder for every backend stream. */

export interface SseEvent {
  event: string | undefined;
  data: string;
}

export function encodeSse(data: unknown, event?: string): string {
  const payload = typeof data === 'string' ? data : JSON.stringify(data);
  return `${event ? `event: ${event}\n` : ''}data: ${payload}\n\n`;
}

/** One event of a stream grew past the decoder's bound (a broken or hostile server). */
export class SseEventTooLarge extends Error {
  constructor(readonly limit: number) {
    super(`a server-sent event is larger than ${limit} characters`);
    this.name = 'SseEventTooLarge';
  }
}

/** Largest event the decoder buffers (characters): a first vLLM chunk with a long prompt's ids fits. */
export const MAX_SSE_EVENT_CHARS = 32 * 1024 * 1024;

/**
 * Incremental SSE decoder: push text chunks, get complete events. Handles \r\n and multi-line data.
 * An event that grows past maxEventChars throws SseEventTooLarge (the buffer is never unbounded).
 */
export class SseDecoder {
  private buffer = '';
  /** where the search for the next blank line resumes (text before it holds none) */
  private scanned = 0;
  /** a \r was seen: line ends may be \r\n from here on (until then, the plain \n search is exact) */
  private cr = false;

  constructor(private readonly maxEventChars = MAX_SSE_EVENT_CHARS) {}

  push(chunk: string): SseEvent[] {
    if (!this.cr && chunk.includes('\r')) this.cr = true;
    this.buffer += chunk;
    const events: SseEvent[] = [];
    let start = 0;
    if (this.cr) {
      const boundary = /\r?\n\r?\n/g;
      for (;;) {
        // (back up 3 characters: a boundary may straddle two chunks)
        boundary.lastIndex = Math.max(start, this.scanned - 3);
        const match = boundary.exec(this.buffer);
        if (!match) break;
        const event = parseBlock(this.buffer.slice(start, match.index));
        if (event) events.push(event);
        start = match.index + match[0].length;
        this.scanned = start;
      }
    } else {
      // no \r in the stream (every server polar knows): a blank line is "\n\n", found natively
      for (;;) {
        // (back up 1 character: a boundary may straddle two chunks)
        const at = this.buffer.indexOf('\n\n', Math.max(start, this.scanned - 1));
        if (at < 0) break;
        const event = parseBlock(this.buffer.slice(start, at));
        if (event) events.push(event);
        start = at + 2;
        this.scanned = start;
      }
    }
    this.buffer = this.buffer.slice(start);
    this.scanned = this.buffer.length;
    if (this.buffer.length > this.maxEventChars) {
      this.buffer = '';
      this.scanned = 0;
      throw new SseEventTooLarge(this.maxEventChars);
    }
    return events;
  }

  /** what is left when the stream ends (an unterminated final event is still returned) */
  flush(): SseEvent[] {
    const rest = this.buffer;
    this.buffer = '';
    this.scanned = 0;
    const event = rest.trim() ? parseBlock(rest) : undefined;
    return event ? [event] : [];
  }
}

function parseBlock(block: string): SseEvent | undefined {
  // the common event, one `data: ` line: its value as it is
  if (block.startsWith('data: ') && !block.includes('\n')) return { event: undefined, data: block.slice(6) };
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
