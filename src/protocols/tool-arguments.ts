/**
 * A tool call's arguments as the object a wire API wants (Anthropic `tool_use.input`, Gemini
 * `functionCall.args`). Arguments that are not a JSON object (a model that emitted broken JSON) become
 * `{}`: the harness then reports missing arguments to the model, and the exact sampled text stays in the
 * capture record (canonical `arguments` is the text as sampled).
 */
export function argumentsObject(args: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(args);
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  } catch {
    return {};
  }
}
