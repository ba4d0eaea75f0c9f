/**
 * Append-only capture file writer: each record is one line, written with a synchronous write as soon as
 * it is complete, so a crash or kill loses at most the call in flight and the file stays valid JSONL.
 */
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import type { CaptureRecord } from './record.ts';

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

  /** Appends one already serialised record (no newline inside). */
  writeLine(json: string): void {
    if (this.fd === null) throw new Error(`capture file ${this.path} is closed`);
    const buffer = Buffer.from(`${json}\n`, 'utf8');
    let offset = 0;
    while (offset < buffer.length) offset += writeSync(this.fd, buffer, offset);
    this.records++;
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}
