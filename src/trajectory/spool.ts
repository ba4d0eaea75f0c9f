/**
 * The temporary file of `polar build`: each built trajectory's token data is appended as serialised
 * "tails" while pass 1 runs; pass 2 streams them to the output, each line's head (reward, group)
 * prepended, reading each tail back by its byte length without parsing it again.
 */
import { once } from 'node:events';
import { createWriteStream, type WriteStream } from 'node:fs';
import { open as openFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Writable } from 'node:stream';
import { PolarError } from '../errors.ts';
import { ownedTempDir } from '../util/owned-temp.ts';
import { encodeHead, type OutputFormat, type TrajectoryHead } from './formats.ts';

/** Writes strings to a stream, waiting when it asks to. */
export async function write(stream: Writable, text: string | Buffer): Promise<void> {
  const closed = (error: unknown): PolarError => {
    const code = (error as NodeJS.ErrnoException | null)?.code;
    return new PolarError(`the output closed before the build finished${code ? ` (${code})` : ''}`);
  };
  if (stream.errored || stream.destroyed) throw closed(stream.errored);
  if (stream.write(text)) return;
  try {
    await once(stream, 'drain');
  } catch (error) {
    throw closed(error);
  }
}

async function closeStream(stream: WriteStream): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    stream.once('error', reject);
    stream.end(() => resolve());
  });
}

/** Reads exactly length bytes at position. */
async function readExactly(
  fh: Awaited<ReturnType<typeof openFile>>,
  length: number,
  position: number,
): Promise<Buffer> {
  const buffer = Buffer.allocUnsafe(length);
  let got = 0;
  while (got < length) {
    const { bytesRead } = await fh.read(buffer, got, length - got, position + got);
    if (bytesRead === 0) throw new Error('temporary trajectory file ended early');
    got += bytesRead;
  }
  return buffer;
}

export class Spool {
  private sink: WriteStream | null;

  private constructor(
    private readonly dir: string,
    private readonly format: OutputFormat,
  ) {
    this.sink = createWriteStream(this.path, { encoding: 'utf8' });
  }

  /** A new spool in a fresh temporary directory under tmpDir (default: the OS temp dir). */
  static async open(format: OutputFormat, tmpDir?: string): Promise<Spool> {
    // (named for polar's pid and start: a build killed outright leaves it to the next polar's sweep)
    return new Spool(await ownedTempDir(tmpDir ?? tmpdir(), 'build'), format);
  }

  private get path(): string {
    return join(this.dir, 'tails.jsonl');
  }

  /** Appends the tails of one trajectory; returns the byte length of each. */
  async append(tails: Iterable<string>): Promise<number[]> {
    const rowBytes: number[] = [];
    for (const tail of tails) {
      const bytes = Buffer.from(tail, 'utf8');
      rowBytes.push(bytes.length);
      await write(this.sink!, bytes);
    }
    return rowBytes;
  }

  /** Ends appending: the file is complete on disk. */
  async finish(): Promise<void> {
    const sink = this.sink;
    this.sink = null;
    if (sink !== null) await closeStream(sink);
  }

  /**
   * Streams the tails to the output in the order they were appended, each with its head; the rows of
   * a trajectory whose head is null are skipped. rows[i] are the byte lengths append returned.
   */
  async replay(
    output: Writable,
    rows: readonly (readonly number[])[],
    heads: readonly (TrajectoryHead | null)[],
  ): Promise<void> {
    const fh = await openFile(this.path, 'r');
    try {
      let position = 0;
      for (let i = 0; i < rows.length; i++) {
        const head = heads[i];
        const lengths = rows[i]!;
        for (let row = 0; row < lengths.length; row++) {
          const length = lengths[row]!;
          if (head) {
            const buffer = await readExactly(fh, length, position);
            await write(output, encodeHead(this.format, head, row));
            await write(output, buffer);
          }
          position += length;
        }
      }
    } finally {
      await fh.close();
    }
  }

  /** Removes the temporary directory (after an error too). */
  async dispose(): Promise<void> {
    if (this.sink !== null) await closeStream(this.sink).catch(() => undefined);
    this.sink = null;
    await rm(this.dir, { recursive: true, force: true });
  }
}
