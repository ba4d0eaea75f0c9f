/** `polar capture` flags, typed, and what they resolve to (the run's options). */
import type { HarnessName } from '../harnesses/types.ts';
import type { BackendFlags } from '../options/backend.ts';

/** `polar capture` flags after parsing (commands/capture.ts). */
export interface CaptureFlags extends BackendFlags {
  harness?: HarnessName;
  piApi?: string;
  output?: string;
  /** capture format version (--format v1 | v2) */
  format?: 1 | 2;
  taskId?: string;
  sample?: number;
  /** --meta key=value, repeatable */
  meta?: Record<string, string>;
  host: string;
  port?: number;
  /** bytes */
  maxBody: number;
  /** milliseconds */
  timeout?: number;
  keepRunDir?: boolean;
  quiet?: boolean;
  /** --json: a summary of the capture as one JSON line on stdout, after the harness's output */
  json?: boolean;
  /** --pass-env NAME, repeatable */
  passEnv?: string[];
  /** --harness-node PATH */
  harnessNode?: string;
}

/** The capture file when -o is not given: polar-captures/<time>-<harness>.jsonl */
export function defaultOutput(harness: string, now = new Date()): string {
  const stamp = now.toISOString().replace(/[:.]/g, '-');
  return `polar-captures/${stamp}-${harness}.jsonl`;
}
