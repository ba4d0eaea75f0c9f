/**
 * Reading a capture file line by line, knowing whether its last line ended: a capture cut at any byte
 * (a killed polar, a copy in progress) reads up to its last whole record, and only an unterminated last
 * line that does not parse is taken for a cut record (anywhere else, bad JSON is bad input).
 */
import { createReadStream } from 'node:fs';
import type { Readable } from 'node:stream';
import { InputError } from '../errors.ts';
import type { JsonlLine } from '../util/jsonl.ts';
import type { CaptureDecoder } from './codec.ts';
import type { CaptureRecord } from './record.ts';

export interface CaptureLine extends JsonlLine {
  /** false for a last line with no newline after it */
  terminated: boolean;
}

/** Streams the non-empty lines of a file (or `-` for stdin) with their line numbers; memory is one line. */
export async function* readCaptureLines(
  source: string,
  stdin: Readable = process.stdin,
): AsyncGenerator<CaptureLine> {
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

/** A cut last record: not an error, but worth a warning. */
export class TruncatedRecord extends InputError {}

/**
 * One line through the decoder: the record, or a TruncatedRecord thrown for an unterminated last line
 * that does not parse. Bad JSON elsewhere throws InputError naming file:line.
 */
export function decodeLine(decoder: CaptureDecoder, source: string, line: CaptureLine): CaptureRecord {
  let value: unknown;
  try {
    value = JSON.parse(line.text);
  } catch (error) {
    if (!line.terminated) {
      throw new TruncatedRecord(
        source,
        line.line,
        undefined,
        `the last record is cut off (${line.text.length} characters, no newline): it was being written when the file was cut; ignored`,
      );
    }
    throw new InputError(
      source,
      line.line,
      undefined,
      `not valid JSON (${(error as Error).message})`,
      'each line must be one JSON object; use --skip-invalid to skip bad lines',
    );
  }
  return decoder.decode(line.line, value);
}
