/**
 * Codex sends tool groups as `{type:"namespace", name:"multi_agent_v1", tools:[...function tools]}` and
 * expects a call to one of them back as `{type:"function_call", namespace:"multi_agent_v1",
 * name:"spawn_agent"}`: its router rebuilds the tool identity from the two SEPARATE fields, so a joined
 * name in `name` is refused as "unsupported call" (codex-rs core/src/tools/router.rs, build_tool_call;
 * the `namespace` field is documented on Responses function_call items). Canonical tools are flat, so a
 * namespaced tool is named `namespace.name` there. Responses function and namespace names are limited
 * to [a-zA-Z0-9_-], so the dot cannot clash with a real name and the writers split it back.
 */
export const NAMESPACE_SEPARATOR = '.';

export function flatToolName(name: string, namespace?: string | null): string {
  return namespace ? `${namespace}${NAMESPACE_SEPARATOR}${name}` : name;
}

/** The wire fields for a canonical tool name: `{name}` or `{name, namespace}`. */
export function wireToolName(flat: string): { name: string; namespace?: string } {
  const at = flat.indexOf(NAMESPACE_SEPARATOR);
  if (at <= 0 || at === flat.length - 1) return { name: flat };
  return { name: flat.slice(at + 1), namespace: flat.slice(0, at) };
}
