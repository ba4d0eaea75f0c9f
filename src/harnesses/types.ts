/** A harness profile: how to point one agent CLI at polar's proxy and run it non-interactively. */
export const HARNESS_NAMES = ['codex', 'claude', 'pi', 'qwen', 'gemini', 'opencode', 'generic'] as const;
export type HarnessName = (typeof HARNESS_NAMES)[number];

export interface PrepareContext {
  /** proxy base URL without /v1, e.g. http://127.0.0.1:41234 */
  proxyUrl: string;
  /** the per-run API key the harness must present */
  key: string;
  /** the served model */
  model: string;
  /** a private directory for this run's harness config (never the user's own) */
  runDir: string;
  /** the harness command line as the user gave it */
  argv: string[];
  /** options of a profile (e.g. { api: 'openai-responses' } for Pi) */
  options: Record<string, string>;
}

export interface Prepared {
  /** environment variables to set (a value of null removes the variable) */
  env: Record<string, string | null>;
  /** the command line to run (the user's, possibly with polar's defaults added before user flags) */
  argv: string[];
  /** files written, for the session record */
  files: string[];
}

export interface HarnessProfile {
  name: HarnessName;
  /** executable basenames that select this profile */
  binaries: string[];
  prepare(context: PrepareContext): Promise<Prepared>;
  /** per-call facts from the harness's headers and body (request kind, thread id, ...) */
  callMeta(headers: Record<string, string>, body: unknown): Record<string, unknown>;
  /** the package's entry (polar eval runs it on the host or mounts it in a container) */
  entry?: string;
  /** how the entry runs: a script under node (the default), or an executable of its own (a native binary) */
  entryRuns?: 'node' | 'exec';
  /** every environment variable prepare() may set: what a container must be passed */
  envNames: readonly string[];
  /** the arguments after the executable that run the harness on one prompt non-interactively (polar eval) */
  promptArgs(prompt: string): string[];
}
