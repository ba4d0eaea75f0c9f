/**
 * Gemini API request shapes (`models/{model}:generateContent`, `:streamGenerateContent?alt=sse`,
 * `:countTokens`), as Gemini CLI sends them through the @google/genai SDK (1.30.0 in @google/gemini-cli
 * 0.61.0: camelCase proto JSON). Minimal and permissive (z.looseObject keeps unknown fields:
 * safetySettings, labels, videoMetadata...). Contents and parts are validated one by one (see
 * convert-request.ts) so an error names the field. Reference: ai.google.dev/api/generate-content and the
 * SDK's `GenerateContentParameters` converters (node_modules/@google/genai/dist/node/index.mjs, bundled in
 * the CLI's bundle/chunk-*.js).
 */
import { z } from 'zod';

const num = z.number().nullish();

/** a Content: `{role, parts}`; the SDK also turns a bare Part or string into one before sending */
export const contentSchema = z.looseObject({
  role: z.string().nullish(),
  parts: z.array(z.looseObject({})).nullish(),
});

export const textPartSchema = z.looseObject({
  text: z.string(),
  thought: z.boolean().nullish(),
  thoughtSignature: z.string().nullish(),
});

export const functionCallPartSchema = z.looseObject({
  functionCall: z.looseObject({
    id: z.string().nullish(),
    name: z.string(),
    args: z.record(z.string(), z.unknown()).nullish(),
  }),
  thoughtSignature: z.string().nullish(),
});

export const functionResponsePartSchema = z.looseObject({
  functionResponse: z.looseObject({
    id: z.string().nullish(),
    name: z.string(),
    response: z.record(z.string(), z.unknown()).nullish(),
    parts: z.array(z.unknown()).nullish(),
  }),
});

export const inlineDataPartSchema = z.looseObject({
  inlineData: z.looseObject({ mimeType: z.string(), data: z.string() }),
});

export const functionDeclarationSchema = z.looseObject({
  name: z.string(),
  description: z.string().nullish(),
  /** the OpenAPI-subset Schema (upper-case type names) */
  parameters: z.record(z.string(), z.unknown()).nullish(),
  /** plain JSON Schema (what Gemini CLI sends) */
  parametersJsonSchema: z.record(z.string(), z.unknown()).nullish(),
});

export const toolSchema = z.looseObject({ functionDeclarations: z.array(z.unknown()).nullish() });

export const toolConfigSchema = z.looseObject({
  functionCallingConfig: z
    .looseObject({
      mode: z.string().nullish(),
      allowedFunctionNames: z.array(z.string()).nullish(),
    })
    .nullish(),
});

export const generationConfigSchema = z.looseObject({
  temperature: num,
  topP: num,
  maxOutputTokens: num,
  candidateCount: num,
  stopSequences: z.array(z.string()).nullish(),
  responseMimeType: z.string().nullish(),
  responseSchema: z.unknown().optional(),
  responseJsonSchema: z.unknown().optional(),
  thinkingConfig: z
    .looseObject({
      includeThoughts: z.boolean().nullish(),
      thinkingBudget: num,
      thinkingLevel: z.string().nullish(),
    })
    .nullish(),
});

export const requestSchema = z.looseObject({
  contents: z.array(z.unknown()),
  systemInstruction: z.union([z.string(), z.looseObject({})]).nullish(),
  tools: z.array(z.unknown()).nullish(),
  toolConfig: toolConfigSchema.nullish(),
  generationConfig: generationConfigSchema.nullish(),
  cachedContent: z.string().nullish(),
});
export type GeminiRequest = z.output<typeof requestSchema>;

/** `:countTokens` takes `{contents}` or a whole `{generateContentRequest}` */
export const countTokensSchema = z.looseObject({
  contents: z.array(z.unknown()).nullish(),
  generateContentRequest: z.looseObject({}).nullish(),
});

/** The Gemini methods polar serves, from the request path: `.../models/{model}:{method}`. */
export const GEMINI_METHODS = ['generateContent', 'streamGenerateContent', 'countTokens'] as const;
export type GeminiMethod = (typeof GEMINI_METHODS)[number];

/** The thoughtSignature Gemini CLI puts on a function call that came without one (geminiChat.ts). */
export const SYNTHETIC_THOUGHT_SIGNATURE = 'skip_thought_signature_validator';
