/**
 * Test support for the wire-API tests: loads the recorded harness requests kept in
 * fixtures/samples/harness-requests (provenance in fixtures/samples/README.md; tools there are reduced to
 * names, they are expanded back into real tool definitions), checks that a JSON value has every field a
 * recorded one has, and folds SSE back the way a harness does.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { CanonicalResponse, StreamEvent } from '../../../src/protocols/canonical.ts';
import { decodeSse } from '../../../src/protocols/sse.ts';

/** the recorded requests, in the checkout */
export const SAMPLES_DIR = new URL('../../../fixtures/samples/harness-requests/', import.meta.url);

export interface Sample {
  body: Record<string, unknown>;
  /** the body as recorded (tools reduced to `{_note, tools:[{name, params}]}`) */
  rawBody: Record<string, unknown>;
  response: string;
}

const schemaOf = (params: string[]) => ({
  type: 'object',
  properties: Object.fromEntries(params.map((p) => [p, { type: 'string' }])),
});

type Reduced = { type?: string; name: string | null; params?: string[]; tools?: string[] } & Record<
  string,
  unknown
>;

function expandTool(t: Reduced, api: 'responses' | 'anthropic'): unknown {
  const { params, tools, ...rest } = t;
  if (t.type === 'namespace') {
    const sub = (tools ?? []).map((name) => ({
      type: 'function',
      name,
      description: `${name} tool`,
      parameters: schemaOf([]),
    }));
    return { ...rest, description: `${t.name} tools`, tools: sub };
  }
  if (!params) return rest;
  return api === 'responses'
    ? { ...rest, description: `${t.name} tool`, parameters: schemaOf(params) }
    : { ...rest, description: `${t.name} tool`, input_schema: schemaOf(params) };
}

/** a Gemini function declaration, as Gemini CLI sends it (`parametersJsonSchema`) */
function expandGeminiTool(t: Reduced): unknown {
  return { name: t.name, description: `${t.name} tool`, parametersJsonSchema: schemaOf(t.params ?? []) };
}

export function loadSample(name: string): Sample {
  const json = JSON.parse(readFileSync(new URL(name, SAMPLES_DIR), 'utf8')) as {
    body: Record<string, unknown>;
    response: string;
  };
  const api = name.startsWith('claude') || name.startsWith('pi-anthropic') ? 'anthropic' : 'responses';
  const reduced = (json.body.tools as { tools?: Reduced[] } | undefined)?.tools;
  const tools = !reduced
    ? undefined
    : name.startsWith('gemini')
      ? [{ functionDeclarations: reduced.map((t) => expandGeminiTool(t)) }]
      : reduced.map((t) => expandTool(t, api));
  const body = { ...json.body, ...(tools ? { tools } : {}) };
  return { body: structuredClone(body), rawBody: json.body, response: json.response };
}

export interface Event {
  type: string;
  data: Record<string, unknown>;
}

export function events(sse: string): Event[] {
  return decodeSse(sse).map((e) => {
    const data = JSON.parse(e.data) as Record<string, unknown>;
    assert.equal(e.event, data.type, 'SSE event name equals data.type');
    return { type: e.event ?? '', data };
  });
}

/** Asserts `actual` has every field `expected` has, with the same JSON type, recursively. */
export function assertCovers(actual: unknown, expected: unknown, path = '$'): void {
  const kind = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);
  assert.equal(kind(actual), kind(expected), `${path}: type`);
  if (Array.isArray(expected)) {
    const a = actual as unknown[];
    assert.equal(a.length, expected.length, `${path}: length`);
    expected.forEach((e, i) => {
      assertCovers(a[i], e, `${path}[${i}]`);
    });
  } else if (kind(expected) === 'object') {
    for (const [k, v] of Object.entries(expected as Record<string, unknown>)) {
      assert.ok(k in (actual as Record<string, unknown>), `${path}.${k}: missing`);
      assertCovers((actual as Record<string, unknown>)[k], v, `${path}.${k}`);
    }
  }
}

/** A canonical response with test defaults. */
export function cannedResponse(id: string, over: Partial<CanonicalResponse> = {}): CanonicalResponse {
  return {
    id,
    model: 'mock-model',
    content: '',
    reasoning: '',
    toolCalls: [],
    finishReason: 'stop',
    usage: { promptTokens: 10, completionTokens: 1 },
    ...over,
  };
}

/** Canonical events for a response: optional reasoning, text, then tool calls, each with one delta. */
export function eventsFor(r: CanonicalResponse, signatureAtStart = true): StreamEvent[] {
  const out: StreamEvent[] = [
    {
      type: 'start',
      id: r.id,
      model: r.model,
      ...(signatureAtStart && r.reasoningSignature ? { reasoningSignature: r.reasoningSignature } : {}),
    },
  ];
  if (r.reasoning) out.push({ type: 'reasoning-delta', text: r.reasoning });
  if (r.content) out.push({ type: 'text-delta', text: r.content });
  r.toolCalls.forEach((c, index) => {
    out.push({ type: 'tool-call-start', index, id: c.id, name: c.name });
    out.push({ type: 'tool-call-delta', index, arguments: c.arguments });
    out.push({ type: 'tool-call-end', index });
  });
  out.push({ type: 'finish', response: r });
  return out;
}
