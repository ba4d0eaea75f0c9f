/**
 * Append-only capture file writer: each record is one line, written with a synchronous write as soon as
 * it is complete, so a crash or kill loses at most the call in flight and the file stays valid JSONL.
 * A write that fails (disk full, a file-size limit) is cut back to the last whole record, so the next
 * record never lands on a partial line; the failure is kept and reported (`failure`). Files are created
 * 0600 and folders 0700: a capture holds prompts, code and tool output.
 */
import { closeSync, fstatSync, ftruncateSync, openSync, writeSync, writevSync } from 'node:fs';
import { dirname } from 'node:path';
import { EnvironmentError } from '../errors.ts';
import { mkdirPrivateSync, PRIVATE_FILE } from '../util/private-files.ts';
import { CallEncoder, type EncodedCall } from './codec.ts';
import type { CallRecord, CaptureRecord } from './record.ts';

const NEWLINE = Buffer.from('\n');

/**
 * Capture format versions polar writes (docs/capture-format.md); 3 is the default. 1 and 2 are written for
 * tools that read those versions: their call records leave out `weight_versions` (format 3's).
 */
export type CaptureFormat = 1 | 2 | 3;

/** A record could not be appended; the file was cut back to its last whole record. */
export class CaptureWriteError extends EnvironmentError {
  constructor(
    readonly path: string,
    readonly code: string | undefined,
    detail: string,
    readonly records: number,
  ) {
    super(
      `could not write to the capture ${path}: ${detail}; the file was cut back to its last whole record (${records} records written by this run, the file is valid JSONL)`,
      code === 'ENOSPC' || code === 'EDQUOT'
        ? 'free disk space, or write the capture elsewhere with -o'
        : code === 'EFBIG'
          ? 'the file reached a file-size limit (ulimit -f): raise it, or write the capture elsewhere with -o'
          : undefined,
    );
  }
}

let fileSizeSignalIgnored = false;
/**
 * A write past a file-size limit (ulimit -f) raises SIGXFSZ, whose default action kills the process
 * before the write can even fail: handled, the write fails with EFBIG instead and is reported.
 */
function ignoreFileSizeSignal(): void {
  if (fileSizeSignalIgnored || process.platform === 'win32') return;
  fileSizeSignalIgnored = true;
  process.on('SIGXFSZ', () => {});
}

export class CaptureWriter {
  private fd: number | null;
  readonly path: string;
  readonly format: CaptureFormat;
  records = 0;
  /** the first write that failed (later records are still tried) */
  failure: CaptureWriteError | null = null;
  private readonly encoder: CallEncoder | null;

  constructor(path: string, options: { format?: CaptureFormat } = {}) {
    this.path = path;
    this.format = options.format ?? 3;
    this.encoder = this.format === 1 ? null : new CallEncoder(undefined, this.format);
    ignoreFileSizeSignal();
    mkdirPrivateSync(dirname(path));
    this.fd = openSync(path, 'a', PRIVATE_FILE);
  }

  /** Writes a session, session_end or grading record (in this file's format version). */
  write(record: CaptureRecord | Record<string, unknown>): void {
    const line = this.format === 1 ? record : { ...record, v: this.format };
    this.writeLine(JSON.stringify(line));
    if ((record as { type?: unknown }).type === 'session_end') {
      this.encoder?.end(String((record as { session?: unknown }).session));
    }
  }

  /**
   * A call record as the object to write: v1 as is, v2 and v3 with their deltas against an earlier call. Pass it
   * to writeLine with its line: only a call whose line was written becomes a base for later deltas.
   */
  encodeCall(record: CallRecord): EncodedCall {
    let written = record;
    if (this.format < 3 && record.weight_versions !== undefined) {
      const { weight_versions: _, ...older } = record;
      written = older;
    }
    return this.encoder ? this.encoder.encode(written) : { value: written, commit: () => {} };
  }

  /**
   * Appends one already serialised record (no newline inside): a string, or the pieces of one line
   * (written with one writev, so a record is still one write). Throws CaptureWriteError when the write
   * fails, after cutting the file back to where the record started. `call`: the encoded call this line
   * holds, committed (a base for later deltas) once the line is written, never when the write failed.
   */
  writeLine(json: string | Buffer[], call?: EncodedCall): void {
    if (this.fd === null) throw new Error(`capture file ${this.path} is closed`);
    const pieces = typeof json === 'string' ? [Buffer.from(json, 'utf8'), NEWLINE] : [...json, NEWLINE];
    const total = pieces.reduce((n, b) => n + b.length, 0);
    const start = fstatSync(this.fd).size;
    try {
      let written = writevSync(this.fd, pieces);
      // a short write (a regular file does this only at a size limit) is finished from one buffer; the
      // next write then fails with the reason
      if (written < total) {
        const all = Buffer.concat(pieces);
        while (written < all.length) written += writeSync(this.fd, all, written);
      }
    } catch (error) {
      throw this.fail(error as NodeJS.ErrnoException, start);
    }
    this.records++;
    call?.commit();
  }

  private fail(error: NodeJS.ErrnoException, start: number): CaptureWriteError {
    // (node's message already starts with the code: "ENOSPC: no space left on device, write")
    let detail = error.message.startsWith(`${error.code}:`)
      ? error.message
      : `${error.code ?? 'error'}: ${error.message}`;
    try {
      if (this.fd !== null) ftruncateSync(this.fd, start);
    } catch (cut) {
      detail += `; cutting the partial record back also failed (${(cut as Error).message})`;
    }
    const failure = new CaptureWriteError(this.path, error.code, detail, this.records);
    this.failure ??= failure;
    return failure;
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}
