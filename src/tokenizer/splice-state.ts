/**
 * What a session keeps for the splice between its calls (src/tokenizer/splice.ts): the assistant turns
 * polar sampled, the renderings of recent calls (incremental rendering, splice-prefix.ts), and the records
 * of each call's splice decisions. Types and the state only: the pieces that decide import it.
 */
import type { ToolCall } from '../protocols/canonical.ts';
import type { Block } from './splice-layout.ts';

/** One assistant turn polar sampled, kept in the session's state for splicing later calls. */
export interface SampledTurn {
  callId: string;
  content: string;
  reasoning: string;
  toolCalls: ToolCall[];
  signature: string;
  /** the ids the splice puts after `<|im_start|>`: the generation prompt's role header, the sampled ids, and `<|im_end|>` when the completion did not end with a stop id */
  turnIds: number[];
  /** the exact prompt ids sent for this call */
  promptIds: number[];
  completionIds: number[];
  /** whether `<|im_end|>` was appended to the sampled ids in turnIds */
  eotAdded: boolean;
}

export class SpliceState {
  readonly turns: SampledTurn[] = [];
  /** renderings of recent calls, most recent last, for incremental rendering of the next call */
  readonly prefixes: RenderedPrefix[] = [];
  private readonly byKey = new Map<string, SampledTurn>();

  add(turn: SampledTurn): void {
    this.turns.push(turn);
    if (turn.signature) this.byKey.set(`sig:${turn.signature}`, turn);
    for (const call of turn.toolCalls) this.byKey.set(`call:${call.id}`, turn);
  }

  byId(kind: 'sig' | 'call', id: string): SampledTurn | undefined {
    return this.byKey.get(`${kind}:${id}`);
  }

  static of(sessionState: Map<string, unknown>, key = 'polar.splice'): SpliceState {
    let state = sessionState.get(key);
    if (!(state instanceof SpliceState)) {
      state = new SpliceState();
      sessionState.set(key, state);
    }
    return state as SpliceState;
  }
}

export interface SpliceRecord {
  /** index of the assistant message in the canonical request */
  turn: number;
  /** ids put in place of the re-rendered turn */
  tokens: number;
  /** how the turn was identified */
  matched_by: 'signature' | 'tool_call_id' | 'content';
  /** the call that sampled it */
  call: string;
  /** tokens the plain re-render of this turn would have had */
  rendered_tokens: number;
}

export interface RenderMismatch {
  turn: number;
  reason: string;
  /** true when polar's sampled ids were spliced in, so the mismatch did not reach the prompt */
  spliced: boolean;
}

/**
 * What a call leaves for the next one of the same conversation: its messages (as JSON, to compare),
 * the rendering and ids up to its generation prompt, and the splice decisions for its assistant turns.
 */
export interface RenderedPrefix {
  fingerprints: string[];
  toolsKey: string;
  kwargsKey: string;
  /** the rendered text before the generation prompt's `<|im_start|>` */
  text: string;
  /** the prompt ids; the first `idsLength` are those of `text` */
  ids: number[];
  idsLength: number;
  /** the blocks of `text` */
  blocks: Block[];
  splices: SpliceRecord[];
  mismatches: RenderMismatch[];
  lastSpliced: SampledTurn | null;
  /** sampled turns in the state when the decisions were made */
  turnCount: number;
  /** assistant turns not identified by a minted key: a later sampled turn could change their match */
  unkeyed: number[];
  warnings: string[];
}
