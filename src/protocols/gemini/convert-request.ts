/**
 * Gemini API request (Gemini CLI) -> canonical request. The model and whether to stream come from the
 * path (target.ts). Contents map to messages: a `model` content is one assistant turn (text parts its
 * content, `thought` parts its reasoning, `functionCall` parts its tool calls, the first thoughtSignature
 * its round-trip key); a `user` content is the user's text and images, its `functionResponse` parts tool
 * results (before the text, as they answer the previous turn). Gemini CLI drops thought parts from the
 * history it resends but keeps the thoughtSignature and the functionCall id (geminiChat.ts of
 * @google/gemini-cli 0.61.0).
 */

import { issuePath } from '../../util/zod.ts';
import type {
  AssistantMessage,
  CanonicalMessage,
  CanonicalRequest,
  Converted,
  ToolMessage,
  UserPart,
} from '../canonical.ts';
import { parseOrThrow } from '../validate.ts';
import { convertToolChoice, convertTools } from './convert-tools.ts';
import {
  contentSchema,
  countTokensSchema,
  functionCallPartSchema,
  functionResponsePartSchema,
  inlineDataPartSchema,
  requestSchema,
  SYNTHETIC_THOUGHT_SIGNATURE,
  textPartSchema,
} from './gemini-api.ts';
import { parseTarget } from './target.ts';

type Part = Record<string, unknown>;
type Path = PropertyKey[];

/** the kind of a part, by its one data field */
function kindOf(part: Part): string {
  for (const k of ['functionCall', 'functionResponse', 'inlineData', 'fileData', 'text'])
    if (part[k] !== undefined) return k;
  return Object.keys(part).join('+') || 'empty';
}

/**
 * A function response as tool-result text: Gemini CLI sends `{output: text}` and `{error: text}`; those
 * give their text, anything else its JSON.
 */
function resultText(response: Record<string, unknown> | null | undefined): {
  text: string;
  isError?: boolean;
} {
  const keys = Object.keys(response ?? {});
  if (keys.length === 1 && typeof response?.output === 'string') return { text: response.output };
  if (keys.length === 1 && typeof response?.error === 'string')
    return { text: response.error, isError: true };
  return { text: response ? JSON.stringify(response) : '' };
}

function modelContent(parts: Part[], path: Path, warnings: string[]): AssistantMessage {
  const m: AssistantMessage = { role: 'assistant', content: '', toolCalls: [] };
  parts.forEach((part, j) => {
    const at = [...path, 'parts', j];
    const signature = typeof part.thoughtSignature === 'string' ? part.thoughtSignature : undefined;
    if (signature && signature !== SYNTHETIC_THOUGHT_SIGNATURE) m.reasoningSignature ??= signature;
    const kind = kindOf(part);
    if (kind === 'functionCall') {
      const { functionCall: call } = parseOrThrow(functionCallPartSchema, part, at);
      // (a call without an id gets one that its response, matched by name, gets too)
      const id = call.id ?? `${call.name}_${String(path[1])}_${j}`;
      m.toolCalls.push({ id, name: call.name, arguments: JSON.stringify(call.args ?? {}) });
    } else if (kind === 'text') {
      const t = parseOrThrow(textPartSchema, part, at);
      if (t.thought) m.reasoning = (m.reasoning ?? '') + t.text;
      else m.content += t.text;
    } else warnings.push(`${issuePath(at)}: dropped ${kind} part of a model turn`);
  });
  return m;
}

function userContent(
  parts: Part[],
  path: Path,
  pending: Array<{ id: string; name: string }>,
  out: CanonicalMessage[],
  warnings: string[],
): void {
  const texts: UserPart[] = [];
  const results: ToolMessage[] = [];
  parts.forEach((part, j) => {
    const at = [...path, 'parts', j];
    const kind = kindOf(part);
    if (kind === 'text') texts.push({ type: 'text', text: parseOrThrow(textPartSchema, part, at).text });
    else if (kind === 'inlineData' && String((part.inlineData as Part).mimeType).startsWith('image/')) {
      const { inlineData } = parseOrThrow(inlineDataPartSchema, part, at);
      texts.push({ type: 'image', url: `data:${inlineData.mimeType};base64,${inlineData.data}` });
    } else if (kind === 'functionResponse') {
      const { functionResponse: r } = parseOrThrow(functionResponsePartSchema, part, at);
      const k = r.id ? -1 : pending.findIndex((c) => c.name === r.name);
      const id = r.id ?? (k >= 0 ? pending.splice(k, 1)[0]!.id : `${r.name}_${String(path[1])}_${j}`);
      const { text, isError } = resultText(r.response);
      if (r.parts?.length) warnings.push(`${issuePath(at)}: dropped the parts of a function response`);
      results.push({
        role: 'tool',
        toolCallId: id,
        name: r.name,
        content: text,
        ...(isError ? { isError } : {}),
      });
    } else warnings.push(`${issuePath(at)}: dropped ${kind} part of a user turn`);
  });
  out.push(...results);
  if (texts.length > 0 || results.length === 0) out.push({ role: 'user', content: texts });
}

function convertContents(raw: readonly unknown[], warnings: string[]): CanonicalMessage[] {
  const out: CanonicalMessage[] = [];
  let pending: Array<{ id: string; name: string }> = [];
  raw.forEach((item, i) => {
    const path = ['contents', i];
    const content = parseOrThrow(contentSchema, item, path);
    const parts = (content.parts ?? []) as Part[];
    if (content.role === 'model') {
      const turn = modelContent(parts, path, warnings);
      pending = turn.toolCalls.map((c) => ({ id: c.id, name: c.name }));
      out.push(turn);
    } else userContent(parts, path, pending, out, warnings);
  });
  return out;
}

/** systemInstruction: a Content (what the SDK sends), a bare Part or a string */
function systemText(system: string | Record<string, unknown>): string {
  if (typeof system === 'string') return system;
  const parts = Array.isArray(system.parts) ? (system.parts as Part[]) : [system];
  return parts
    .map((p) => (typeof p.text === 'string' ? p.text : ''))
    .filter(Boolean)
    .join('\n');
}

function convert(body: unknown, model: string, stream: boolean): Converted<CanonicalRequest> {
  const req = parseOrThrow(requestSchema, body);
  const warnings: string[] = [];
  const messages = convertContents(req.contents, warnings);
  const system = req.systemInstruction == null ? '' : systemText(req.systemInstruction);
  if (system) messages.unshift({ role: 'system', content: system });
  if (req.cachedContent)
    warnings.push(`cachedContent ${req.cachedContent} ignored: polar keeps no server cache`);
  const value: CanonicalRequest = { model, messages, tools: convertTools(req.tools ?? [], warnings), stream };
  const toolChoice = convertToolChoice(req.toolConfig, warnings);
  if (toolChoice !== undefined) value.toolChoice = toolChoice;
  const g = req.generationConfig;
  if (g?.maxOutputTokens != null) value.maxTokens = g.maxOutputTokens;
  if (g?.temperature != null) value.temperature = g.temperature;
  if (g?.topP != null) value.topP = g.topP;
  if (g?.stopSequences?.length) value.stop = g.stopSequences;
  if ((g?.candidateCount ?? 1) > 1) warnings.push(`candidateCount ${g?.candidateCount}: polar samples one`);
  if (g?.responseSchema !== undefined || g?.responseJsonSchema !== undefined) {
    warnings.push('responseSchema not enforced: polar does not constrain decoding');
  }
  const thinking = g?.thinkingConfig;
  const budget = thinking?.thinkingBudget;
  const level = thinking?.thinkingLevel?.toLowerCase();
  if (budget != null || level) {
    value.reasoning = {
      ...(budget != null ? { enabled: budget !== 0 } : {}),
      ...(level ? { effort: level } : {}),
    };
  }
  return { value, warnings };
}

/** `:generateContent` / `:streamGenerateContent?alt=sse` */
export function parseRequest(body: unknown, target: { path: string }): Converted<CanonicalRequest> {
  const { model, method } = parseTarget(target.path);
  return convert(body, model, method === 'streamGenerateContent');
}

/** `:countTokens`: `{contents}` or `{generateContentRequest: {...}}` */
export function parseCountTokensRequest(
  body: unknown,
  target: { path: string },
): Converted<CanonicalRequest> {
  const { model } = parseTarget(target.path);
  const req = parseOrThrow(countTokensSchema, body);
  return convert(req.generateContentRequest ?? { contents: req.contents ?? [] }, model, false);
}

export function renderCountTokens(tokens: number): { totalTokens: number } {
  return { totalTokens: tokens };
}
