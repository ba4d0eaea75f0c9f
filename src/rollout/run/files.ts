/**
 * The layout of an evaluation's output folder (`polar eval --out DIR`, and each loop step's `eval/` and
 * `heldout/`), named once: writers, `--resume`, `--regrade`, `polar build DIR` and `polar inspect` all take
 * the names from here. docs/eval.md, "The output folder", describes each file.
 */
export const EVAL_FILES = {
  /** one graded result per (instance, sample), one complete JSON line at a time */
  results: 'results.jsonl',
  /** the run's figures (pass@1, pass@k, outcome counts), written whole at the end */
  report: 'report.json',
  /** the first sample's predictions in the official harness's format */
  predictions: 'predictions.jsonl',
  /** with --samples > 1: predictions/sample-J.jsonl for each sample */
  predictionsDir: 'predictions',
  /** captures/<instance>__<sample>.jsonl: every model call of a sample, plus its grading record */
  captures: 'captures',
  /** patches/<key>.diff: the agent's patch */
  patches: 'patches',
  /** logs/<key>.test.log and the agent's log */
  logs: 'logs',
  /** the settings that decide the results (src/rollout/run/settings.ts): --resume refuses another */
  run: 'run.json',
  /**
   * a cluster run's bookkeeping (src/rollout/executors/): the Ray driver's spec and log, sample folders on their
   * way in, the Slurm scripts and logs and the shard folders; an otherwise empty --out counts as empty
   */
  cluster: '.cluster',
} as const;

/** The files and folders that make a folder an evaluation's (src/rollout/run/out.ts refuses to mix two runs). */
export const EVAL_RUN_ENTRIES: readonly string[] = [
  EVAL_FILES.results,
  EVAL_FILES.report,
  EVAL_FILES.predictions,
  EVAL_FILES.captures,
  EVAL_FILES.patches,
  EVAL_FILES.logs,
  EVAL_FILES.run,
];

/** predictions/sample-J.jsonl */
export function samplePredictionsFile(j: number): string {
  return `sample-${j}.jsonl`;
}
