/**
 * JSONL input: the non-empty lines of a file or stdin with their line numbers, knowing whether the last
 * line ended (a file cut at any byte, by a killed writer or a copy in progress, ends in an unterminated
 * line), and one JSON parse that names file:line.
 */
import { createReadStream } from 'node:fs';
import type { Readable } from 'node:stream';
import { InputError } from '../errors.ts';

export interface JsonlLine {
  /** 1-based line number in its source */
  line: number;
  /** the raw text of the line (a trailing \r removed) */
  text: string;
  /** false for a last line with no newline after it */
  terminated: boolean;
}

/** Streams the non-empty lines of a file (or `-` for stdin) with their line numbers; memory is one line. */
export async function* readLines(source: string, stdin: Readable = process.stdin): AsyncGenerator<JsonlLine> {
  const input =
    source === '-' ? stdin : createReadStream(source, { encoding: 'utf8', highWaterMark: 1 << 20 });
  if (source === '-') stdin.setEncoding('utf8');
  let pending: string[] = [];
  let line = 0;
  try {
    for await (const chunk of input as AsyncIterable<string>) {
      let from = 0;
      for (let nl = chunk.indexOf('\n'); nl >= 0; nl = chunk.indexOf('\n', from)) {
        let text = chunk.slice(from, nl);
        if (pending.length > 0) {
          pending.push(text);
          text = pending.join('');
          pending = [];
        }
        from = nl + 1;
        line++;
        if (text.endsWith('\r')) text = text.slice(0, -1);
        if (text.trim() !== '') yield { line, text, terminated: true };
      }
      if (from < chunk.length) pending.push(chunk.slice(from));
    }
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new InputError(source, undefined, undefined, 'no such file');
    if (code === 'EISDIR')
      throw new InputError(source, undefined, undefined, 'is a directory, not a JSONL file');
    throw error;
  }
  const rest = pending.join('');
  if (rest.trim() !== '') yield { line: line + 1, text: rest, terminated: false };
}

/** Parses one JSONL line, failing with file:line on malformed JSON. */
export function parseJsonLine(source: string, line: Pick<JsonlLine, 'line' | 'text'>): unknown {
  try {
    return JSON.parse(line.text);
  } catch (error) {
    throw new InputError(
      source,
      line.line,
      undefined,
      `not valid JSON (${(error as Error).message})`,
      'each line must be one JSON object; use --skip-invalid to skip bad lines',
    );
  }
}
