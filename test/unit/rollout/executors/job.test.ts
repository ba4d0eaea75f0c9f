/**
 * The rollout job (src/rollout/executors/job.ts), the seam between a driver and the polar a cluster node
 * runs: polar eval's flags made into one (the run's flags, runtime ones too, reach the node as the driver
 * resolved them; the driver's own flags do not), a node's share of it, what a machine fills in for itself
 * (the backend's key, the environments' cache), and a job read back refused when it is not one.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InputError } from '../../../../src/errors.ts';
import { evalJob, evaluationSetup } from '../../../../src/eval/job.ts';
import { runSettings } from '../../../../src/eval/settings.ts';
import { DEFAULTS } from '../../../../src/options/defaults.ts';
import type { SweInstance } from '../../../../src/rollout/dataset.ts';
import {
  jobOfSetup,
  jobSetup,
  nodeJob,
  parseJob,
  type RolloutJob,
} from '../../../../src/rollout/executors/job.ts';
import { POLAR_BIN } from '../../../../src/train/cluster/polar.ts';
import { parseArgv, SERVED_POLICY } from '../../../support/argv.ts';

/** POLAR_BACKEND_API_KEY set to `value` (unset for undefined) while `body` runs. */
function withKey<T>(value: string | undefined, body: () => T): T {
  const before = process.env.POLAR_BACKEND_API_KEY;
  if (value === undefined) delete process.env.POLAR_BACKEND_API_KEY;
  else process.env.POLAR_BACKEND_API_KEY = value;
  try {
    return body();
  } finally {
    if (before === undefined) delete process.env.POLAR_BACKEND_API_KEY;
    else process.env.POLAR_BACKEND_API_KEY = before;
  }
}

const instances = [{ instance_id: 'a__b-1' }, { instance_id: 'a__b-2' }] as SweInstance[];

/** The job of `polar eval <words>` as its command makes it, the key in the environment. */
function jobOf(words: string[]): RolloutJob {
  return withKey('sk-env', () => {
    const f = parseArgv(['eval', '--dataset', 'd.jsonl', '--agent', 'pi', ...words]).flags as never;
    return evalJob(f, evaluationSetup(f), instances, runSettings(f));
  });
}

test("polar eval's flags as a job: the run's flags, runtime ones too, as resolved; the cluster's as its executor", () => {
  const job = jobOf([
    ...SERVED_POLICY,
    '--cluster',
    'ray=10.0.0.1:6379',
    '--cluster-memory',
    '4GiB',
    '--out=runs/x',
    '--runtime',
    'sandbox',
    '--network-allow',
    '10.0.0.5:9000',
    '--memory-limit',
    '2GiB',
    '--resume',
    '--concurrency',
    '8',
    '--agent-timeout',
    '60',
    '--grade-empty-patches',
    '--samples',
    '2',
  ]);
  assert.deepEqual(job.instances, ['a__b-1', 'a__b-2']);
  assert.deepEqual([job.samples, job.concurrency, job.out, job.resume], [2, 8, 'runs/x', true]);
  assert.deepEqual([job.agentTimeoutMs, job.gradeEmpty, job.grader], [60_000, true, { kind: 'polar' }]);
  assert.equal(job.setup.runtime.kind, 'sandbox');
  assert.deepEqual(job.setup.runtime.networkAllow, [{ host: '10.0.0.5', port: 9000 }]);
  assert.equal(job.setup.runtime.limits?.memoryBytes, 2 * 1024 ** 3);
  assert.deepEqual(job.executor, {
    kind: 'ray',
    address: '10.0.0.1:6379',
    cpus: DEFAULTS.clusterCpus.value,
    memoryBytes: 4 * 1024 ** 3,
    retries: DEFAULTS.clusterRetries.value,
    polar: [process.execPath, POLAR_BIN],
  });
  // the settings --resume checks, recorded in the run folder on every machine
  assert.equal(job.settings?.['--agent-timeout'], 60);
  // a key from the environment stays out of the job; --api-key, given, is the job's
  assert.equal(job.setup.agent.backend?.apiKey, undefined);
  assert.equal(jobOf([...SERVED_POLICY, '--api-key', 'sk-flag']).setup.agent.backend?.apiKey, 'sk-flag');
  // what a node runs: its share on its own pool, the servers not probed again; the rest as the driver's
  const node = nodeJob(job, { resume: false });
  assert.deepEqual(
    [node.executor, node.resume, node.setup.agent.backend?.skipCheck],
    [{ kind: 'local' }, false, true],
  );
  assert.deepEqual(node.setup.runtime, job.setup.runtime);
  assert.deepEqual(
    parseJob(JSON.stringify(node), '(stdin)'),
    JSON.parse(JSON.stringify(node)),
    'read back as written',
  );
});

test('each machine fills in its own key and environments cache; the driver pick of a server wins', () => {
  const job = jobOf([...SERVED_POLICY, '--backend-url', 'http://10.0.0.3:8000/v1']);
  assert.deepEqual(job.setup.agent.backendUrls, ['http://10.0.0.2:8000/v1', 'http://10.0.0.3:8000/v1']);
  // the default cache is each machine's own ($POLAR_CACHE_DIR, else ~/.cache/polar/envs)
  assert.deepEqual(job.setup.runtime.environments, { pythons: {} });
  const here = withKey('sk-node', () => jobSetup({ ...job, backendUrl: 'http://10.0.0.3:8000/v1' }));
  assert.equal(here.agent.backend?.apiKey, 'sk-node');
  assert.equal(here.agent.backend?.url, 'http://10.0.0.3:8000/v1');
  assert.equal(here.agent.backendUrls, undefined, "one server: the Ray driver's pick");
  assert.equal(here.runtime.environments?.cacheDir, DEFAULTS.envCache.value);
  // a cache given by flag travels
  const given = jobOf([...SERVED_POLICY, '--env-cache', '/shared/envs']);
  assert.equal(withKey(undefined, () => jobSetup(given)).runtime.environments?.cacheDir, '/shared/envs');
  assert.equal(withKey(undefined, () => jobSetup(given)).agent.backend?.apiKey, undefined);
  // jobOfSetup(jobSetup(x)) keeps what was given
  assert.deepEqual(
    jobOfSetup(
      withKey(undefined, () => jobSetup(given)),
      {},
    ),
    given.setup,
  );
});

test('a job read back: not JSON, another version, an unknown field or a bad value is refused, naming it', () => {
  const job = jobOf(SERVED_POLICY);
  const refused = (text: string, pattern: RegExp) =>
    assert.throws(
      () => parseJob(text, 'job.json'),
      (e: unknown) => e instanceof InputError && pattern.test(e.message),
    );
  refused('{', /job\.json: not valid JSON/);
  refused(JSON.stringify({ ...job, v: 2 }), /v: /);
  refused(JSON.stringify({ ...job, argv: ['--x'] }), /argv|unrecognized/i);
  refused(JSON.stringify({ ...job, executor: { kind: 'ssh' } }), /executor/);
  refused(
    JSON.stringify({ ...job, setup: { ...job.setup, runtime: { kind: 'vm', repos: 'r' } } }),
    /setup\.runtime\.kind/,
  );
  refused(JSON.stringify({ ...job, instances: [] }), /instances/);
});
