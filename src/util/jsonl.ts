import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { InputError } from '../errors.ts';

export interface JsonlLine {
  /** 1-based line number in its source */
  line: number;
  /** the raw text of the line */
  text: string;
}

/** Streams the non-empty lines of a file (or `-` for stdin) with their line numbers; memory is one line. */
export async function* readLines(source: string, stdin: Readable = process.stdin): AsyncGenerator<JsonlLine> {
  const input =
    source === '-' ? stdin : createReadStream(source, { encoding: 'utf8', highWaterMark: 1 << 20 });
  const rl = createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY });
  let line = 0;
  try {
    for await (const text of rl) {
      line++;
      if (text.trim() === '') continue;
      yield { line, text };
    }
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new InputError(source, undefined, undefined, 'no such file');
    if (code === 'EISDIR')
      throw new InputError(source, undefined, undefined, 'is a directory, not a JSONL file');
    throw error;
  } finally {
    rl.close();
  }
}

/** Parses one JSONL line, failing with file:line on malformed JSON. */
export function parseJsonLine(source: string, line: JsonlLine): unknown {
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
