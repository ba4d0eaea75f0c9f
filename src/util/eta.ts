/** How long is left of a run of countable steps: `2m05s`, from the time the first `done` steps took. */
export function formatSeconds(s: number): string {
  return s >= 60
    ? `${Math.floor(s / 60)}m${String(Math.round(s % 60)).padStart(2, '0')}s`
    : `${Math.round(s)}s`;
}

/** `ETA 2m05s` after `done` of `total` steps that began at `startedMs` (performance.now()); `ETA ?` before the first. */
export function eta(startedMs: number, done: number, total: number): string {
  if (done <= 0) return 'ETA ?';
  const elapsed = (performance.now() - startedMs) / 1000;
  return `ETA ${formatSeconds((elapsed / done) * Math.max(0, total - done))}`;
}
