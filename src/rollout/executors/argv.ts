/**
 * The command line a cluster node runs for its share of a run: the user's own `polar eval` words, less
 * the flags that belong to the driver (where the run folder is, which samples, how the cluster is
 * reached, how the report is printed). What is left (dataset, agent, runtime and its flags, backend,
 * timeouts, grader) reaches every node as the user typed it, so a runtime flag added later (the sandbox
 * runtime's) passes through without this file knowing it.
 */

/** Driver-only flags: true = takes a value, false = a switch. */
const DRIVER_ONLY: Record<string, boolean> = {
  '--cluster': true,
  '--cluster-cpus': true,
  '--cluster-memory': true,
  '--cluster-shared': true,
  '--cluster-retries': true,
  '--cluster-polar': true,
  '--cluster-shards': true,
  '--sbatch-arg': true,
  '--out': true,
  '--resume': false,
  '--overwrite': false,
  '--concurrency': true,
  '--instances': true,
  '--limit': true,
  '--shard': true,
  '--sample-index': true,
  '--cluster-tag': true,
  '--json': false,
  '--quiet': false,
  '-q': false,
  '--fail-under': true,
  '--backend-url': true,
  '--skip-backend-check': false,
  '--debug': false,
};

/** `words`: what followed `polar eval` on the driver's command line. */
export function nodeArgv(words: readonly string[]): string[] {
  const kept: string[] = [];
  for (let i = 0; i < words.length; i++) {
    const word = words[i]!;
    if (word === '--') {
      kept.push(...words.slice(i));
      break;
    }
    const eq = word.startsWith('--') ? word.indexOf('=') : -1;
    const name = eq > 0 ? word.slice(0, eq) : word;
    const takesValue = DRIVER_ONLY[name];
    if (takesValue === undefined) {
      kept.push(word);
      continue;
    }
    if (takesValue && eq < 0) i++; // its value is the next word
  }
  return kept;
}

/** The words after `eval` in a full argv (node, script, ..., eval, words...). */
export function wordsAfter(argv: readonly string[], command: string): string[] {
  const at = argv.indexOf(command, 2);
  return at < 0 ? [] : argv.slice(at + 1);
}
