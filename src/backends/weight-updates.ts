/**
 * What `polar loop` tells the proxy about weight updates on a running inference server (src/loop/publish*.ts
 * publishes; src/proxy/model-call.ts reads): the updates so far, how each treated the calls in flight, and
 * whether one is running now. The pause modes are vLLM's (`POST /pause?mode=`, vllm
 * entrypoints/serve/dev/rlhf/api_router.py @0100a21; `AsyncLLM.pause_generation`, vllm/v1/engine/async_llm.py
 * @00080ee1): `wait` lets the calls in flight finish on the old weights first, `keep` freezes them and they go
 * on with the new weights after the update (their early tokens are the old weights', the later ones the new
 * weights'), `abort` ends them at once with `finish_reason: "abort"`. In every mode a request that arrives
 * while the server is paused is not scheduled until it resumes.
 *
 * A call records the version polar had published when it started; a call that a `keep` update crossed
 * records the later versions too, and a call an `abort` update cut is sent again once the update is over
 * (src/proxy/model-call.ts), so that the harness's call is answered, not lost.
 */

import type { PauseMode } from '../options/defaults.ts';

export type { PauseMode } from '../options/defaults.ts';

/** One span of a call's completion sampled by one version (`[start, end)` over completion tokens). */
export type WeightVersionSpan = {
  version: string;
  start: number;
  end: number;
};

/** The versions a server reported for one call (SGLang's `metadata` / `meta_info`). */
export interface ReportedWeightVersions {
  versions: string[];
  spans?: WeightVersionSpan[];
}

interface Update {
  version: number | undefined;
  mode: PauseMode;
  done: boolean;
}

/** Where a call stands against the updates when it starts (WeightUpdates.mark). */
export interface CallMark {
  /** updates begun before the call started */
  index: number;
  /** the update running when it started (the server does not schedule the call before it resumes) */
  during: number | null;
}

/** The weight updates of one backend, in order. */
export class WeightUpdates {
  private readonly updates: Update[] = [];
  private running: { index: number; settled: Promise<void>; resolve: () => void } | null = null;

  /** Where a call starting now stands. */
  mark(): CallMark {
    return { index: this.updates.length, during: this.running?.index ?? null };
  }

  /** An update begins (before the server pauses): calls in flight are treated as `mode` says. */
  begin(mode: PauseMode): void {
    if (this.running) throw new Error('a weight update is already running');
    this.updates.push({ version: undefined, mode, done: false });
    let resolve!: () => void;
    const settled = new Promise<void>((r) => {
      resolve = r;
    });
    this.running = { index: this.updates.length - 1, settled, resolve };
  }

  /** The update ended (the server resumed): with the version it published, or undefined when it failed. */
  end(version: number | undefined): void {
    const running = this.running;
    if (!running) return;
    const update = this.updates[running.index]!;
    update.version = version;
    update.done = true;
    this.running = null;
    running.resolve();
  }

  /** Resolves when no update is running. */
  settled(): Promise<void> {
    return this.running?.settled ?? Promise.resolve();
  }

  /** An update with `abort` began after the call started (or was running when it did). */
  abortedSince(mark: CallMark): boolean {
    const from = mark.during ?? mark.index;
    return this.updates.slice(from).some((u) => u.mode === 'abort');
  }

  /**
   * The versions that sampled a call, as polar knows them, once it is over: the version published when
   * it started (`startVersion`), or the one being published then (the server held the call until it
   * resumed); then each version a `keep` update published while the call was in flight (its later tokens
   * are those weights'). A `wait` update lets the calls in flight finish first, an `abort` one cuts them.
   * A call whose request reached the server only after a pause it did not see is counted on the older
   * version: polar's own record errs on the stale side of the bound.
   */
  versionsOf(mark: CallMark, startVersion: number | undefined): number[] {
    const out: number[] = [];
    const held = mark.during === null ? undefined : this.updates[mark.during];
    const first = held?.done && held.version !== undefined ? held.version : startVersion;
    if (first !== undefined) out.push(first);
    for (const u of this.updates.slice(mark.index))
      if (u.mode === 'keep' && u.done && u.version !== undefined && u.version !== out.at(-1))
        out.push(u.version);
    return out;
  }
}

/**
 * The weight versions an SGLang answer reports, or null: a chat completion's `metadata` (`{weight_version,
 * weight_versions?}`, python/sglang/srt/entrypoints/openai/serving_chat.py @0c078e6f, built by
 * `build_endpoint_weight_version_metadata` of python/sglang/srt/utils/weight_versions.py @460534be), a
 * choice's or a /generate answer's `meta_info` (the same keys). `weight_versions` is a list of spans
 * `{version, start, end}` over the completion tokens (one per label; two for a request that crossed an
 * update); older servers report the single `weight_version` only. vLLM's OpenAI chat and completions
 * answers carry neither (vllm/entrypoints/openai/chat_completion/protocol.py @002032ee; vLLM reports
 * `weight_versions` on /inference/v1/generate only).
 */
export function reportedWeightVersions(answer: unknown): ReportedWeightVersions | null {
  const a = answer as {
    metadata?: unknown;
    meta_info?: unknown;
    choices?: Array<{ meta_info?: unknown }>;
  } | null;
  for (const m of [a?.metadata, a?.choices?.[0]?.meta_info, a?.meta_info]) {
    const meta = m as { weight_version?: unknown; weight_versions?: unknown } | null | undefined;
    if (!meta || typeof meta !== 'object') continue;
    const spans = Array.isArray(meta.weight_versions)
      ? meta.weight_versions.filter(
          (s): s is WeightVersionSpan =>
            typeof s?.version === 'string' &&
            s.version !== '' &&
            Number.isSafeInteger(s.start) &&
            Number.isSafeInteger(s.end) &&
            s.start >= 0 &&
            s.end >= s.start,
        )
      : [];
    if (spans.length > 0) {
      const versions: string[] = [];
      for (const s of spans) if (versions.at(-1) !== s.version) versions.push(s.version);
      return { versions, spans: spans.map(({ version, start, end }) => ({ version, start, end })) };
    }
    if (typeof meta.weight_version === 'string' && meta.weight_version !== '')
      return { versions: [meta.weight_version] };
  }
  return null;
}

/** The backend's weight updates, made on first use (a publisher that updates a running server). */
export function weightUpdatesOf(backend: { weightUpdates?: WeightUpdates }): WeightUpdates {
  if (!backend.weightUpdates) backend.weightUpdates = new WeightUpdates();
  return backend.weightUpdates;
}
