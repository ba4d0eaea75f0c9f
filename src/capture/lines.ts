/**
 * Decoding a capture file's lines (src/util/jsonl.ts reads them): a capture cut at any byte (a killed
 * polar, a copy in progress) reads up to its last whole record, and only an unterminated last line that
 * does not parse is taken for a cut record (anywhere else, bad JSON is bad input).
 */
import { InputError } from '../errors.ts';
import { type JsonlLine, parseJsonLine, readLines } from '../util/jsonl.ts';
import type { CaptureDecoder } from './codec.ts';
import type { CaptureRecord } from './record.ts';

export type CaptureLine = JsonlLine;
/** The lines of a capture file (or `-` for stdin), each knowing whether it ended. */
export const readCaptureLines = readLines;

/** A cut last record: not an error, but worth a warning. */
export class TruncatedRecord extends InputError {}

/**
 * One line through the decoder: the record, or a TruncatedRecord thrown for an unterminated last line
 * that does not parse. Bad JSON elsewhere throws InputError naming file:line.
 */
export function decodeLine(decoder: CaptureDecoder, source: string, line: CaptureLine): CaptureRecord {
  if (line.terminated) return decoder.decode(line.line, parseJsonLine(source, line));
  let value: unknown;
  try {
    value = JSON.parse(line.text);
  } catch {
    throw new TruncatedRecord(
      source,
      line.line,
      undefined,
      `the last record is cut off (${line.text.length} characters, no newline): it was being written when the file was cut; ignored`,
    );
  }
  return decoder.decode(line.line, value);
}
