/** Responses `tools` / `tool_choice` -> canonical. Non-function tools are dropped with a warning. */
import type { CanonicalTool, ToolChoice } from '../canonical.ts';
import { parseOrThrow } from '../validate.ts';
import {
  functionToolSchema,
  namespaceToolSchema,
  toolChoiceSchema,
  toolHeadSchema,
} from './responses-api.ts';
import { flatToolName } from './tool-names.ts';

const EMPTY_PARAMETERS = { type: 'object', properties: {} };

function functionTool(raw: unknown, path: PropertyKey[], namespace?: string): CanonicalTool {
  const tool = parseOrThrow(functionToolSchema, raw, path);
  return {
    name: flatToolName(tool.name, namespace),
    description: tool.description ?? '',
    parameters: tool.parameters ?? EMPTY_PARAMETERS,
  };
}

export function convertTools(tools: readonly unknown[], warnings: string[]): CanonicalTool[] {
  const out: CanonicalTool[] = [];
  tools.forEach((raw, i) => {
    const path = ['tools', i];
    const head = parseOrThrow(toolHeadSchema, raw, path);
    if (head.type === 'function') {
      out.push(functionTool(raw, path));
    } else if (head.type === 'namespace') {
      // flattened to `namespace.name`: see tool-names.ts for why and how the writers map it back
      const ns = parseOrThrow(namespaceToolSchema, raw, path);
      ns.tools.forEach((sub, j) => {
        const subPath = [...path, 'tools', j];
        const subType = parseOrThrow(toolHeadSchema.partial(), sub, subPath).type ?? 'function';
        if (subType === 'function')
          out.push(functionTool({ type: 'function', ...(sub as object) }, subPath, ns.name));
        else warnings.push(`dropped tool type ${subType} (${ns.name}.tools[${j}])`);
      });
    } else {
      warnings.push(`dropped tool type ${head.type}`);
    }
  });
  return out;
}

export function convertToolChoice(raw: unknown, warnings: string[]): ToolChoice | undefined {
  if (raw === undefined || raw === null) return undefined;
  const choice = parseOrThrow(toolChoiceSchema, raw, ['tool_choice']);
  if (typeof choice === 'string') return choice;
  if (choice.type === 'function' && choice.name) return { name: choice.name };
  warnings.push(`tool_choice of type ${choice.type} not represented; backend default used`);
  return undefined;
}
