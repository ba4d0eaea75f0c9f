/**
 * The model's own tokenizer and chat template (Transformers.js), with an incremental encoder.
 *
 * Tokenizers split text at added tokens (`<|im_start|>`, `<|im_end|>`, `<think>`, `<tool_call>`, ...)
 * before the BPE model sees it, and each piece in between is tokenized on its own. So encoding a
 * text piece by piece at added-token boundaries gives exactly the ids of encoding it whole, and the
 * pieces can be cached by content: a long conversation costs one map lookup per unchanged piece, and
 * only new pieces go through BPE. When a tokenizer's added tokens strip neighbouring whitespace
 * (lstrip/rstrip) the split is no longer exact; the cache is then off and every call encodes the
 * whole text.
 */
import { isAbsolute, resolve } from 'node:path';
import { AutoTokenizer, env, type PreTrainedTokenizer } from '@huggingface/transformers';
import { EnvironmentError, errorMessage, UsageError } from '../errors.ts';
import { TINY_TRIAL_COMMAND } from '../options/defaults.ts';

export interface TemplateToolCall {
  type: 'function';
  id?: string;
  function: { name: string; arguments: unknown };
}

export interface TemplateMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  reasoning_content?: string;
  tool_calls?: TemplateToolCall[];
  tool_call_id?: string;
  name?: string;
}

export interface TemplateTool {
  type: 'function';
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

interface AddedToken {
  id: number;
  content: string;
  lstrip?: boolean;
  rstrip?: boolean;
}

export interface LoadTokenizerOptions {
  /** allow fetching from the hub when `source` is not a local directory (default: env POLAR_OFFLINE unset) */
  allowRemote?: boolean;
  cacheDir?: string;
}

/** true when `source` names a local directory rather than a hub id */
export function isLocalPath(source: string): boolean {
  return isAbsolute(source) || source.startsWith('./') || source.startsWith('../') || source === '.';
}

/** What to do without the hub: a tiny model made offline in one command, a local model, or a server. */
const OFFLINE_HINT = `to try polar offline, make a tiny model in one command: ${TINY_TRIAL_COMMAND}, then --model ./tiny-model; or point at a local model with --model ./dir (tokenizer.json + onnx/model.onnx), or at a server with --backend vllm --backend-url http://HOST:8000/v1 --model NAME`;

export async function loadChatTokenizer(
  source: string,
  options: LoadTokenizerOptions = {},
): Promise<ChatTokenizer> {
  const local = isLocalPath(source);
  const id = local ? resolve(source) : source;
  const allowRemote = options.allowRemote ?? process.env.POLAR_OFFLINE !== '1';
  if (!local && !allowRemote) {
    throw new UsageError(`tokenizer "${source}" is a hub id but remote downloads are off`, OFFLINE_HINT);
  }
  const previous = env.allowRemoteModels;
  env.allowRemoteModels = !local && allowRemote;
  if (options.cacheDir) env.cacheDir = options.cacheDir;
  try {
    const tokenizer = await AutoTokenizer.from_pretrained(id, { local_files_only: local });
    return new ChatTokenizer(tokenizer, id);
  } catch (error) {
    throw new EnvironmentError(
      `could not load the tokenizer from ${local ? `directory ${id}` : `hub id ${id}`}: ${errorMessage(error)}`,
      local
        ? 'the directory needs tokenizer.json and tokenizer_config.json (with a chat_template)'
        : /fetch failed|ENOTFOUND|EAI_AGAIN|ECONNREFUSED|network/i.test(errorMessage(error))
          ? `offline? ${id} downloads on first use. ${OFFLINE_HINT}`
          : 'check the hub id, or pass a local directory',
    );
  } finally {
    env.allowRemoteModels = previous;
  }
}

export interface EncodeStats {
  pieces: number;
  cachedPieces: number;
  encodedChars: number;
}

export class ChatTokenizer {
  readonly source: string;
  readonly tokenizer: PreTrainedTokenizer;
  private readonly added = new Map<string, number>();
  private readonly splitter: RegExp | null;
  private readonly byFirstChar: string[];
  private readonly firstChar: string | null;
  private readonly cache = new Map<string, number[]>();
  private cachedChars = 0;
  /** the piece cache keeps at most this many characters (oldest pieces go first) */
  readonly cacheCharBudget: number;
  readonly exactSplit: boolean;
  lastStats: EncodeStats = { pieces: 0, cachedPieces: 0, encodedChars: 0 };

  constructor(tokenizer: PreTrainedTokenizer, source: string, cacheCharBudget = 64 * 1024 * 1024) {
    this.tokenizer = tokenizer;
    this.source = source;
    this.cacheCharBudget = cacheCharBudget;
    const json = (tokenizer as unknown as { _tokenizerJSON?: { added_tokens?: AddedToken[] } })
      ._tokenizerJSON;
    const addedTokens = json?.added_tokens ?? [];
    for (const token of addedTokens) this.added.set(token.content, token.id);
    this.exactSplit = addedTokens.length > 0 && addedTokens.every((t) => !t.lstrip && !t.rstrip);
    const escaped = [...this.added.keys()]
      .sort((a, b) => b.length - a.length)
      .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
    this.splitter = escaped.length > 0 ? new RegExp(escaped.join('|'), 'g') : null;
    // longest first, so `<|im_start|>` wins over a shorter token it starts with
    this.byFirstChar = [...this.added.keys()].sort((a, b) => b.length - a.length);
    const firsts = new Set(this.byFirstChar.map((t) => t[0]));
    this.firstChar = firsts.size === 1 ? [...firsts][0]! : null;
  }

  get chatTemplate(): string | null {
    const template = (this.tokenizer as unknown as { chat_template?: unknown }).chat_template;
    return typeof template === 'string' ? template : null;
  }

  /** id of an added token such as `<|im_end|>`, or undefined */
  tokenId(content: string): number | undefined {
    return this.added.get(content);
  }

  get eosTokenId(): number | undefined {
    const id = (this.tokenizer as unknown as { eos_token_id?: number }).eos_token_id;
    return typeof id === 'number' ? id : undefined;
  }

  /** ids that end an assistant turn: the tokenizer's eos plus ChatML's `<|im_end|>` and `<|endoftext|>` */
  stopTokenIds(): number[] {
    const ids = new Set<number>();
    if (this.eosTokenId !== undefined) ids.add(this.eosTokenId);
    for (const name of ['<|im_end|>', '<|endoftext|>', '<|eot_id|>', '<|end|>']) {
      const id = this.tokenId(name);
      if (id !== undefined) ids.add(id);
    }
    return [...ids];
  }

  render(
    messages: TemplateMessage[],
    tools: TemplateTool[],
    kwargs: Record<string, unknown>,
    addGenerationPrompt = true,
  ): string {
    const rendered = this.tokenizer.apply_chat_template(
      messages as never,
      {
        ...kwargs,
        tools: tools.length > 0 ? (tools as never) : undefined,
        add_generation_prompt: addGenerationPrompt,
        tokenize: false,
      } as never,
    );
    if (typeof rendered !== 'string') throw new Error('chat template did not render to text');
    return rendered;
  }

  /** plain encoding of the whole text (the baseline the cache is measured against) */
  encodeFull(text: string): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: false });
  }

  /** exact ids of `text`, encoding only the pieces (between added tokens) not seen before */
  encode(text: string): number[] {
    const stats: EncodeStats = { pieces: 0, cachedPieces: 0, encodedChars: 0 };
    this.lastStats = stats;
    if (!this.exactSplit || !this.splitter) {
      stats.pieces = 1;
      stats.encodedChars = text.length;
      return this.encodeFull(text);
    }
    const out: number[] = [];
    let last = 0;
    if (this.firstChar !== null) {
      // every added token starts with the same character (`<` for Qwen): scan with indexOf, which is
      // several times faster than a 26-way regex alternation over a long prompt
      const candidates = this.byFirstChar;
      for (let i = text.indexOf(this.firstChar); i !== -1; ) {
        let hit: string | undefined;
        for (const token of candidates) {
          if (text.startsWith(token, i)) {
            hit = token;
            break;
          }
        }
        if (hit === undefined) {
          i = text.indexOf(this.firstChar, i + 1);
          continue;
        }
        if (i > last) this.encodePiece(text.slice(last, i), out, stats);
        out.push(this.added.get(hit)!);
        last = i + hit.length;
        i = text.indexOf(this.firstChar, last);
      }
    } else {
      const splitter = new RegExp(this.splitter.source, 'g');
      for (let match = splitter.exec(text); match !== null; match = splitter.exec(text)) {
        if (match.index > last) this.encodePiece(text.slice(last, match.index), out, stats);
        out.push(this.added.get(match[0])!);
        last = match.index + match[0].length;
      }
    }
    if (last < text.length) this.encodePiece(text.slice(last), out, stats);
    return out;
  }

  private encodePiece(piece: string, out: number[], stats: EncodeStats): void {
    stats.pieces++;
    let ids = this.cache.get(piece);
    if (ids) {
      stats.cachedPieces++;
      // refresh recency: Map keeps insertion order, the oldest entries are evicted first
      this.cache.delete(piece);
      this.cache.set(piece, ids);
    } else {
      stats.encodedChars += piece.length;
      ids = this.tokenizer.encode(piece, { add_special_tokens: false });
      if (piece.length <= this.cacheCharBudget) {
        this.cache.set(piece, ids);
        this.cachedChars += piece.length;
        while (this.cachedChars > this.cacheCharBudget) {
          const oldest = this.cache.keys().next().value as string;
          this.cache.delete(oldest);
          this.cachedChars -= oldest.length;
        }
      }
    }
    for (let i = 0; i < ids.length; i++) out.push(ids[i]!);
  }

  decode(ids: number[]): string {
    if (ids.length === 0) return '';
    return this.tokenizer.decode(ids, { skip_special_tokens: false });
  }
}

/**
 * Incremental detokenizer: feed sampled ids, get the new text. Holds back text while the last ids
 * end inside a multi-byte character (decoded as U+FFFD), the way streaming servers do.
 */
export class StreamDecoder {
  private readonly ids: number[] = [];
  private prefixOffset = 0;
  private readOffset = 0;

  constructor(private readonly tokenizer: ChatTokenizer) {}

  push(ids: number[]): string {
    for (const id of ids) this.ids.push(id);
    const prefix = this.tokenizer.decode(this.ids.slice(this.prefixOffset, this.readOffset));
    const full = this.tokenizer.decode(this.ids.slice(this.prefixOffset));
    if (full.length > prefix.length && !full.endsWith('\uFFFD')) {
      this.prefixOffset = this.readOffset;
      this.readOffset = this.ids.length;
      return full.slice(prefix.length);
    }
    return '';
  }

  /** whatever is still held back (an incomplete character at the very end) */
  flush(): string {
    const prefix = this.tokenizer.decode(this.ids.slice(this.prefixOffset, this.readOffset));
    const full = this.tokenizer.decode(this.ids.slice(this.prefixOffset));
    this.prefixOffset = this.readOffset = this.ids.length;
    return full.length > prefix.length ? full.slice(prefix.length) : '';
  }
}
