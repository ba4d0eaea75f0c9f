/**
 * Append-only capture file writer: each record is one line, written with a synchronous write as soon as
 * it is complete, so a crash or kill loses at most the call in flight and the file stays valid JSONL.
 */
import { closeSync, mkdirSync, openSync, writeSync, writevSync } from 'node:fs';
import { dirname } from 'node:path';
import type { CaptureRecord } from './record.ts';

const NEWLINE = Buffer.from('\n');

export class CaptureWriter {
  private fd: number | null;
  readonly path: string;
  records = 0;

  constructor(path: string) {
    this.path = path;
    mkdirSync(dirname(path), { recursive: true });
    this.fd = openSync(path, 'a');
  }

  write(record: CaptureRecord | Record<string, unknown>): void {
    this.writeLine(JSON.stringify(record));
  }

  /**
   * Appends one already serialised record (no newline inside): a string, or the pieces of one line
   * (written with one writev, so a record is still one write).
   */
  writeLine(json: string | Buffer[]): void {
    if (this.fd === null) throw new Error(`capture file ${this.path} is closed`);
    const pieces = typeof json === 'string' ? [Buffer.from(json, 'utf8'), NEWLINE] : [...json, NEWLINE];
    const total = pieces.reduce((n, b) => n + b.length, 0);
    let written = writevSync(this.fd, pieces);
    // a short write, which regular files do not do in practice, is finished from one joined buffer
    if (written < total) {
      const all = Buffer.concat(pieces);
      while (written < all.length) written += writeSync(this.fd, all, written);
    }
    this.records++;
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}
