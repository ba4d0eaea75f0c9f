/**
 * Gemini `tools` / `toolConfig` -> canonical. Function declarations become tools (`parametersJsonSchema`
 * as is; the OpenAPI-subset `parameters` with its type names lower-cased into JSON Schema); Google's own
 * tools (googleSearch, urlContext, codeExecution, ...) run on Google's servers and are dropped with a
 * warning.
 */
import type { CanonicalTool, ToolChoice } from '../canonical.ts';
import { parseOrThrow } from '../validate.ts';
import { functionDeclarationSchema, type GeminiRequest, toolSchema } from './gemini-api.ts';

/** Gemini's Schema (`type: "OBJECT"`, `"STRING"`...) as JSON Schema: type names lower-cased, the rest kept. */
export function jsonSchemaOf(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(jsonSchemaOf);
  if (!schema || typeof schema !== 'object') return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'type' && typeof value === 'string') out[key] = value.toLowerCase();
    else if (key === 'properties' && value && typeof value === 'object' && !Array.isArray(value)) {
      out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, jsonSchemaOf(v)]));
    } else if (key === 'items' || key === 'anyOf') out[key] = jsonSchemaOf(value);
    else out[key] = value;
  }
  return out;
}

export function convertTools(tools: readonly unknown[], warnings: string[]): CanonicalTool[] {
  const out: CanonicalTool[] = [];
  tools.forEach((raw, i) => {
    const tool = parseOrThrow(toolSchema, raw, ['tools', i]);
    for (const key of Object.keys(tool)) {
      if (key !== 'functionDeclarations') warnings.push(`dropped tool ${key} (runs on Google's servers)`);
    }
    (tool.functionDeclarations ?? []).forEach((d, j) => {
      const decl = parseOrThrow(functionDeclarationSchema, d, ['tools', i, 'functionDeclarations', j]);
      const parameters =
        decl.parametersJsonSchema ??
        (decl.parameters ? (jsonSchemaOf(decl.parameters) as Record<string, unknown>) : undefined);
      out.push({
        name: decl.name,
        description: decl.description ?? '',
        parameters: parameters ?? { type: 'object', properties: {} },
      });
    });
  });
  return out;
}

export function convertToolChoice(
  config: GeminiRequest['toolConfig'],
  warnings: string[],
): ToolChoice | undefined {
  const calling = config?.functionCallingConfig;
  const names = calling?.allowedFunctionNames ?? [];
  const mode = calling?.mode?.toUpperCase();
  if (names.length > 1 || (names.length === 1 && mode !== 'ANY')) {
    warnings.push(`toolConfig allowedFunctionNames ${names.join(', ')} not enforced (mode ${mode})`);
  }
  switch (mode) {
    case undefined:
      return undefined;
    case 'NONE':
      return 'none';
    case 'ANY':
      return names.length === 1 ? { name: names[0]! } : 'required';
    default:
      // AUTO, VALIDATED (auto with checked calls), MODE_UNSPECIFIED
      return 'auto';
  }
}
