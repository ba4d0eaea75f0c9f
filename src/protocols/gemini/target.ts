/**
 * The model and method of a Gemini API call come from its path, not its body:
 * `/{version}/models/{model}:{method}` (the @google/genai SDK builds `${baseUrl}/${apiVersion}/models/
 * ${model}:streamGenerateContent?alt=sse`, apiVersion v1beta unless GOOGLE_GENAI_API_VERSION says
 * otherwise). A model name may hold slashes (`models/Qwen/Qwen3-4B:generateContent`).
 */
import { ProtocolError } from '../errors.ts';
import { GEMINI_METHODS, type GeminiMethod } from './gemini-api.ts';

export interface GeminiTarget {
  model: string;
  method: GeminiMethod;
  /** `alt=sse`: server-sent events (the only streaming form polar writes) */
  sse: boolean;
}

/** `/v1beta/models/x:generateContent`, `/v1/models/x:...`, `/models/x:...` (also `tunedModels/x`) */
export const GEMINI_PATH = /^(?:\/v1(?:beta|alpha)?\d*)?\/(?:models|tunedModels)\/(.+):([A-Za-z]+)$/;

export function parseTarget(url: string): GeminiTarget {
  const q = url.indexOf('?');
  const path = (q < 0 ? url : url.slice(0, q)).replace(/\/+$/, '');
  const query = new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
  const match = GEMINI_PATH.exec(decodeURIComponent(path));
  const method = match?.[2];
  if (!match || !(GEMINI_METHODS as readonly string[]).includes(method ?? '')) {
    throw new ProtocolError(
      `${path}: not a Gemini model call (expected /v1beta/models/{model}:${GEMINI_METHODS.join('|')})`,
    );
  }
  const target: GeminiTarget = {
    model: match[1]!,
    method: method as GeminiMethod,
    sse: query.get('alt') === 'sse',
  };
  if (target.method === 'streamGenerateContent' && !target.sse) {
    throw new ProtocolError(
      'streamGenerateContent: polar streams server-sent events only; add ?alt=sse (the SDKs do)',
    );
  }
  return target;
}
