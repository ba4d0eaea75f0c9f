/**
 * Canonical stream events -> `:streamGenerateContent?alt=sse` for a harness (Gemini CLI): every event a
 * `data: <GenerateContentResponse>` chunk. Text and thoughts go out as they come; a function call goes
 * out whole when it ends (Gemini streams `functionCall` parts complete, with `args` an object); the last
 * chunk carries `finishReason` and `usageMetadata`. The round-trip key rides as the thoughtSignature of
 * the first part that is not a thought (render-response.ts). The @google/genai SDK reads events as
 * `data: ...` followed by a blank line. Stateful; never throws: a failure becomes a Google error event.
 */
import { newId, type ProxyFault, type StreamEvent } from '../canonical.ts';
import { sequencedWriter } from '../sequence-tool-calls.ts';
import { encodeSse } from '../sse.ts';
import { errorBody } from './errors.ts';
import { chunk, functionCallPart, type GeminiPart } from './render-response.ts';

export function createStreamWriter(_ctx: { created: number }): { write(event: StreamEvent): string } {
  let id = newId('resp');
  let model = '';
  let signature: string | undefined;
  let signed = false;
  const calls = new Map<number, { id: string; name: string; args: string }>();

  const emit = (parts: GeminiPart[]): string => encodeSse(chunk(id, model, parts));

  /** a part the harness keeps in its history: the first one carries the signature */
  const answerPart = (part: GeminiPart): GeminiPart => {
    if (signed || !signature) return part;
    signed = true;
    return { ...part, thoughtSignature: signature };
  };

  const failed = (error: ProxyFault): string => encodeSse(errorBody(error));

  const one = (event: StreamEvent): string => {
    switch (event.type) {
      case 'start':
        id = event.id;
        model = event.model;
        signature = event.reasoningSignature;
        return '';
      case 'reasoning-delta':
        return event.text ? emit([{ text: event.text, thought: true }]) : '';
      case 'text-delta':
        return event.text ? emit([answerPart({ text: event.text })]) : '';
      case 'tool-call-start':
        calls.set(event.index, { id: event.id, name: event.name, args: '' });
        return '';
      case 'tool-call-delta': {
        const call = calls.get(event.index);
        if (call) call.args += event.arguments;
        return '';
      }
      case 'tool-call-end': {
        const call = calls.get(event.index);
        calls.delete(event.index);
        return call ? emit([answerPart(functionCallPart({ ...call, arguments: call.args }))]) : '';
      }
      case 'finish': {
        const r = event.response;
        signature ??= r.reasoningSignature;
        // an answer without text or calls still gets its signature, on an empty text part
        const parts = signature && !signed ? [answerPart({ text: '' })] : [];
        return encodeSse(chunk(id, model || r.model, parts, { response: r }));
      }
      case 'error':
        return failed(event.error);
      default: {
        const never: never = event;
        return never;
      }
    }
  };

  return sequencedWriter({ one, fail: failed });
}
