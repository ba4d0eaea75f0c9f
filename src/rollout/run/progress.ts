/** The progress line of an evaluation: a bar on a terminal, one line per sample otherwise. */

import { eta } from '../../util/eta.ts';
import { log } from '../../util/log.ts';
import type { ResultLine } from './report.ts';

export class Progress {
  private done = 0;
  private resolved = 0;
  private readonly started = performance.now();
  private readonly tty = Boolean(process.stderr.isTTY);

  constructor(
    private readonly total: number,
    private readonly enabled: boolean,
  ) {}

  tick(line: ResultLine): void {
    this.done++;
    if (line.resolved) this.resolved++;
    if (!this.enabled) return;
    const summary = `${this.done}/${this.total} done, ${this.resolved} resolved, ${eta(this.started, this.done, this.total)}`;
    if (this.tty) {
      const width = 24;
      const filled = Math.round((this.done / Math.max(1, this.total)) * width);
      process.stderr.write(`\r\x1b[K[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${summary}`);
      if (this.done === this.total) process.stderr.write('\n');
    } else {
      log.info(
        `[${summary}] ${line.instance_id} s${line.sample}: ${line.status}${line.reason ? ` (${line.reason})` : ''}`,
      );
    }
  }
}
