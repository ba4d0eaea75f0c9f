/** Reading capture files (format v1 or v2) as full, validated records. */
import type { Readable } from 'node:stream';
import { InputError } from '../errors.ts';
import { parseJsonLine, readLines, TruncatedLine } from '../util/jsonl.ts';
import { log } from '../util/log.ts';
import { parseWithPromptIds } from '../util/prompt-ids.ts';
import { CaptureDecoder } from './codec.ts';
import type { CaptureRecord } from './record.ts';

export { validateCaptureRecord } from './validate.ts';

export interface ReadOptions {
  /** skip invalid lines (reporting each through onInvalid) instead of failing */
  skipInvalid?: boolean;
  onInvalid?: (error: InputError) => void;
  stdin?: Readable;
}

export interface LocatedRecord {
  record: CaptureRecord;
  source: string;
  line: number;
}

/**
 * Streams validated capture records from a file or `-` (stdin); v2 records come out whole. A cut last
 * record (no newline, not JSON) ends the file with a warning (through onInvalid when given).
 */
export async function* readCapture(source: string, options: ReadOptions = {}): AsyncGenerator<LocatedRecord> {
  const decoder = new CaptureDecoder(source);
  for await (const line of readLines(source, options.stdin)) {
    try {
      yield {
        record: decoder.decode(line.line, parseJsonLine(source, line, undefined, parseWithPromptIds)),
        source,
        line: line.line,
      };
    } catch (error) {
      if (error instanceof TruncatedLine) {
        if (options.onInvalid) options.onInvalid(error);
        else log.warn(`${error.message}; ignored`);
        continue;
      }
      if (options.skipInvalid && error instanceof InputError) {
        options.onInvalid?.(error);
        continue;
      }
      throw error;
    }
  }
}
