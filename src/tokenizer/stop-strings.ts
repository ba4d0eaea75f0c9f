/**
 * Stop strings over a text stream: text that could still become a stop string is held back; when a stop
 * string completes, the text before it is released and the stream is over (the stop string itself is not
 * output, as OpenAI-compatible servers do). Used by the token path for engines without stop-string
 * support (the embedded engine); servers that stop by themselves never trigger it.
 */
export class StopStrings {
  private held = '';
  /** the stop string that ended the stream, once one did */
  hit: string | null = null;

  constructor(private readonly stops: string[]) {}

  /** Feeds decoded text; returns what can be emitted now. */
  push(text: string): string {
    if (this.hit !== null) return '';
    const all = this.held + text;
    let first = -1;
    let which: string | null = null;
    for (const stop of this.stops) {
      if (!stop) continue;
      const at = all.indexOf(stop);
      if (at >= 0 && (first < 0 || at < first)) {
        first = at;
        which = stop;
      }
    }
    if (which !== null) {
      this.hit = which;
      this.held = '';
      return all.slice(0, first);
    }
    // hold back the longest suffix that is a prefix of some stop string
    let keep = 0;
    for (const stop of this.stops) {
      for (let n = Math.min(stop.length - 1, all.length); n > keep; n--) {
        if (all.endsWith(stop.slice(0, n))) {
          keep = n;
          break;
        }
      }
    }
    this.held = all.slice(all.length - keep);
    return all.slice(0, all.length - keep);
  }

  /** The held-back text, at the end of a stream no stop string ended. */
  flush(): string {
    const out = this.hit === null ? this.held : '';
    this.held = '';
    return out;
  }
}
