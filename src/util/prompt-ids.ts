/**
 * JSON.parse of a text that carries a prompt's token ids as a top-level `prompt_token_ids` array, with the
 * array remembered by its text: a server's answer (vLLM's first stream chunk and its whole completion,
 * ../shared/reference/real-servers.md) and a capture file's call record (format v1 holds each call's whole
 * prompt; the capture readers, src/capture/reader.ts and src/trajectory/collect.ts, parse lines with it).
 * An agent's conversation only grows, so each call's prompt ids are the previous call's, then the previous
 * completion and the new turn: parsing the array again was the largest per-call cost of a long agent run
 * (30k ids, 190 KB of JSON: 1.4 ms here, against 6 us to compare the text with the one remembered and a
 * copy of the array) and most of what `polar build` spent reading a v1 capture.
 *
 * The array's text is found by its key (`"prompt_token_ids":[` cannot occur inside a JSON string: the
 * quote before the colon would be escaped there) and the first `]` after it. Its text equals a remembered
 * one, or starts with one and a comma: then only what follows is parsed. The rest of the answer is
 * parsed with a placeholder in the array's place, and the placeholder must be found as the answer's own
 * `prompt_token_ids` (a key of a nested object, a repeated key, an array of anything but numbers all go
 * to JSON.parse of the whole text). The value equals JSON.parse of the text; a text that does not parse
 * throws what JSON.parse throws for it.
 */
import { randomBytes } from 'node:crypto';
import { PrefixCache } from './prefix-cache.ts';

const KEY = '"prompt_token_ids":[';
/** Arrays shorter than this (ids) are parsed in place each time. */
const MIN_IDS = 256;
/** Ids the remembered arrays hold at most (least recently used go first). */
const MAX_REMEMBERED_IDS = 1 << 20;
/** Characters of an array's text its entry is filed under. */
const PREFIX = 32;

/** The placeholder: a string no server answer holds (a per-process random mark). */
const MARK = `polar-ids-${randomBytes(12).toString('hex')}`;
const MARK_JSON = JSON.stringify(MARK);

interface Remembered {
  /**
   * the array's text between its brackets, in pieces of at most PIECE characters, each its own copy: one
   * string of the whole text (190 KB for 30k ids) would be a large object, which V8 maps fresh from the
   * system and unmaps when it dies, so each call paid the page faults of its size; an extended array
   * keeps its earlier pieces and adds copies of the new text only
   */
  pieces: string[];
  /** the text's length (the pieces' lengths summed) */
  length: number;
  /** never handed out (callers get copies): an array that is extended grows in place */
  ids: number[];
}

/**
 * Characters a piece of remembered text holds at most: a one-byte string of this many stays under V8's
 * large-object size (kMaxRegularHeapObjectSize = 1 << (kPageSizeBits - 1) in v8/src/common/globals.h,
 * kPageSizeBits 18 on x64 in v8/src/base/build_config.h: 128 KB), so it is allocated in pages V8 reuses;
 * a large object's pages never come from V8's pool. On a machine where a page fault costs 9 us (measured
 * on 2026-12-03 here), a 190 KB copy cost 0.6 ms in faults alone.
 */
const PIECE = 1 << 16;

/**
 * Copies of `text` from `from` on, in pieces of at most PIECE characters, onto `pieces`. A slice of a
 * string is a view that keeps its whole parent alive (here a line that is itself a slice of a megabyte
 * chunk of a capture file: `polar build`'s peak RSS was about 80 MB higher with views); slicing a
 * concatenation flattens it into a new string first, so each piece kept is a view of its own copy alone.
 */
function copyPieces(text: string, from: number, pieces: string[]): void {
  for (let at = from; at < text.length; at += PIECE) pieces.push(` ${text.slice(at, at + PIECE)}`.slice(1));
}

/** Whether `text` starts with the remembered pieces (each slice compared with ===: memcmp). */
function startsWithPieces(text: string, pieces: readonly string[]): boolean {
  let at = 0;
  for (const piece of pieces) {
    const end = at + piece.length;
    if (text.slice(at, end) !== piece) return false;
    at = end;
  }
  return true;
}

/** Arrays by the first characters of their text (src/util/prefix-cache.ts). */
class RememberedIds {
  private readonly cache = new PrefixCache<string, Remembered>(
    (entry) => entry.pieces[0]!.slice(0, PREFIX),
    (entry) => entry.ids.length,
    MAX_REMEMBERED_IDS,
  );

  /** The longest remembered array whose text is `text` or starts `text`, followed by a comma. */
  find(text: string): Remembered | undefined {
    const same = this.cache.candidates(text.slice(0, PREFIX));
    if (same === undefined) return undefined;
    let best: Remembered | undefined;
    for (const entry of same) {
      const n = entry.length;
      if (best !== undefined && n <= best.length) continue;
      if (n > text.length || (n < text.length && text.charCodeAt(n) !== 0x2c)) continue;
      // (slices compared with ===: memcmp; startsWith walks the characters one by one)
      if (startsWithPieces(text, entry.pieces)) best = entry;
    }
    if (best !== undefined) this.cache.touch(best);
    return best;
  }

  /**
   * Remembers an array with copies of its text (copyPieces). `grown` is the entry it was extended from
   * (`text` starts with its text and a comma; it was dropped, then its ids grown in place into `ids`):
   * its pieces are kept and only the new text is copied after them.
   */
  add(text: string, ids: number[], grown?: Remembered): void {
    const pieces = grown?.pieces ?? [];
    copyPieces(text, grown?.length ?? 0, pieces);
    this.cache.add({ pieces, length: text.length, ids });
  }

  /** Forgets an array, before it is extended in place (the cache counts its ids as they are now). */
  drop(entry: Remembered): void {
    this.cache.drop(entry);
  }
}

const remembered = new RememberedIds();

/** How often a remembered array was found: the same ids again, or extended (tests read it). */
export const promptIdsReused = { same: 0, extended: 0 };

/** JSON.parse('[' + text + ']') when it is an array of numbers (a JSON number: never NaN), else null. */
function numbers(text: string): number[] | null {
  let value: unknown;
  try {
    value = JSON.parse(`[${text}]`);
  } catch {
    return null;
  }
  const ids = value as unknown[];
  for (let i = 0; i < ids.length; i++) if (typeof ids[i] !== 'number') return null;
  return ids as number[];
}

/**
 * The array's ids: the remembered ones when the text is theirs, then what follows them. What is returned
 * is a copy, the caller's to keep: the remembered array is never handed out.
 */
function idsOf(text: string): number[] | null {
  const known = remembered.find(text);
  if (known === undefined) {
    const ids = numbers(text);
    if (ids === null || ids.length < MIN_IDS) return ids;
    remembered.add(text, ids);
    return ids.slice();
  }
  if (known.length === text.length) {
    promptIdsReused.same++;
    return known.ids.slice();
  }
  // (what follows the comma must hold at least one value: `[1,2,]` is not JSON)
  const rest = numbers(text.slice(known.length + 1));
  if (rest === null || rest.length === 0) return null;
  // the conversation grew: the shorter array is forgotten and grows in place into the longer one (a copy
  // of 30k ids cost more than parsing the new ones), its text keeps its pieces
  remembered.drop(known);
  const ids = known.ids;
  for (let i = 0; i < rest.length; i++) ids.push(rest[i]!);
  promptIdsReused.extended++;
  remembered.add(text, ids, known);
  return ids.slice();
}

/** JSON.parse(text), with a top-level `prompt_token_ids` array parsed as the module header says. */
export function parseWithPromptIds(text: string): unknown {
  const key = text.indexOf(KEY);
  if (key < 0) return JSON.parse(text);
  const open = key + KEY.length;
  const close = text.indexOf(']', open);
  if (close < 0 || close - open < MIN_IDS) return JSON.parse(text);
  const skeleton = `${text.slice(0, open - 1)}${MARK_JSON}${text.slice(close + 1)}`;
  let value: unknown;
  try {
    value = JSON.parse(skeleton);
  } catch {
    return JSON.parse(text);
  }
  if (
    typeof value !== 'object' ||
    value === null ||
    (value as { prompt_token_ids?: unknown }).prompt_token_ids !== MARK
  )
    return JSON.parse(text);
  const ids = idsOf(text.slice(open, close));
  if (ids === null) return JSON.parse(text);
  (value as { prompt_token_ids: number[] }).prompt_token_ids = ids;
  return value;
}
