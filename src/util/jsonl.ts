/**
 * JSONL input, the one reader of every JSONL file polar reads (captures, trajectories, rewards, results,
 * metrics, datasets, predictions): the non-empty lines of a file, stdin or a string with their line
 * numbers, knowing whether the last line ended (a file cut at any byte, by a killed writer or a copy in
 * progress, ends in an unterminated line), and one JSON parse that names file:line and tells a cut last
 * line (TruncatedLine) from bad JSON.
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
        const l = lineOf(text, line, true);
        if (l) yield l;
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
  const last = lineOf(pending.join(''), line + 1, false);
  if (last) yield last;
}

function lineOf(raw: string, line: number, terminated: boolean): JsonlLine | null {
  const text = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
  return text.trim() === '' ? null : { line, text, terminated };
}

/** The non-empty lines of a text already in memory (a small file read whole), as readLines gives them. */
export function splitLines(text: string): JsonlLine[] {
  const out: JsonlLine[] = [];
  let from = 0;
  let line = 0;
  for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', from)) {
    const l = lineOf(text.slice(from, nl), ++line, true);
    if (l) out.push(l);
    from = nl + 1;
  }
  const last = lineOf(text.slice(from), line + 1, false);
  if (last) out.push(last);
  return out;
}

/** A cut last line: the writer was stopped (or the copy made) mid-line. Not bad input, but worth a warning. */
export class TruncatedLine extends InputError {}

const NOT_JSON_HINT = 'each line must be one JSON object; use --skip-invalid to skip bad lines';

/**
 * Parses one JSONL line. Malformed JSON throws InputError naming file:line, except on an unterminated last
 * line, which throws TruncatedLine: the last record of a file cut while it was being written. `parse` is
 * JSON.parse or one that gives the same value and throws the same errors (the capture readers pass
 * src/util/prompt-ids.ts's).
 */
export function parseJsonLine(
  source: string,
  line: Pick<JsonlLine, 'line' | 'text'> & { terminated?: boolean },
  hint: string | undefined = NOT_JSON_HINT,
  parse: (text: string) => unknown = JSON.parse,
): unknown {
  try {
    return parse(line.text);
  } catch (error) {
    if (line.terminated === false) {
      throw new TruncatedLine(
        source,
        line.line,
        undefined,
        `the last line is cut off (${line.text.length} characters, no newline): it was being written when the file was cut`,
      );
    }
    throw new InputError(source, line.line, undefined, `not valid JSON (${(error as Error).message})`, hint);
  }
}
