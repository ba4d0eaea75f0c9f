/**
 * One evaluation setup for `polar eval`, `polar loop` and `polar gym`: the agent (gold, empty, predictions
 * or a harness under capture) and the runtime it works in, made from typed options. eval and loop call
 * `setupEvaluation`; gym, which makes a harness agent per rollout, takes the same `harnessSetup`.
 */
import { readFile } from 'node:fs/promises';
import type { Backend, BackendOptions } from '../backends/types.ts';
import { InputError, UsageError, unreadableInput } from '../errors.ts';
import type { HarnessName } from '../harnesses/types.ts';
import { parseJsonLine, splitLines } from '../util/jsonl.ts';
import { log } from '../util/log.ts';
import { plural } from '../util/plural.ts';
import { type AgentName, isHarness } from './agent-names.ts';
import {
  type Agent,
  EmptyAgent,
  GoldAgent,
  HarnessAgent,
  type HarnessAgentOptions,
  PredictionsAgent,
} from './agents.ts';
import type { SweInstance } from './dataset.ts';
import { createRuntime, type RuntimeContext, type RuntimeSetup } from './runtime/create.ts';
import type { Runtime } from './runtime/types.ts';

/** The typed form of --agent/--harness, --agent-cmd, --predictions, --prompt-template, --pi-api and the backend. */
export interface AgentSetup {
  agent: AgentName;
  /** --harness generic: the command, {prompt} replaced by the prompt */
  agentCmd?: string;
  /** --agent predictions: the predictions file */
  predictions?: string;
  /** a prompt template file ({{problem_statement}}, {{workdir}}, {{repo}}) */
  promptTemplate?: string;
  /** Pi's wire API */
  piApi?: string;
  /** more variables of polar's environment the harness may see (--pass-env) */
  passEnv?: string[];
  /** the backend a harness talks to (required for a harness agent) */
  backend?: BackendOptions;
  /** several inference servers with the options of `backend`: each sample uses the least loaded */
  backendUrls?: string[];
}

export interface EvaluationSetup {
  agent: AgentSetup;
  runtime: RuntimeSetup;
}

/** What a harness agent needs besides its backend instance, from the setup and the runtime it runs in. */
export async function harnessSetup(
  setup: AgentSetup & { agent: HarnessName },
  runtime: Runtime,
): Promise<
  Pick<
    HarnessAgentOptions,
    | 'harness'
    | 'backend'
    | 'model'
    | 'placement'
    | 'genericCommand'
    | 'promptTemplate'
    | 'harnessOptions'
    | 'passEnv'
    | 'backendUrls'
  >
> {
  if (!setup.backend) throw new UsageError(`the ${setup.agent} harness needs a backend (--backend, --model)`);
  if (setup.agent === 'generic' && !setup.agentCmd)
    throw new UsageError(
      '--harness generic needs --agent-cmd',
      "for example --agent-cmd 'my-agent {prompt}'",
    );
  return {
    harness: setup.agent,
    backend: setup.backend,
    model: setup.backend.model,
    placement: runtime.placement ?? 'host',
    ...(setup.agentCmd
      ? { genericCommand: ['bash', '-c', setup.agentCmd.replaceAll('{prompt}', '"$POLAR_PROMPT"')] }
      : {}),
    ...(setup.promptTemplate ? { promptTemplate: await readTemplate(setup.promptTemplate) } : {}),
    ...(setup.piApi ? { harnessOptions: { api: setup.piApi } } : {}),
    ...(setup.passEnv?.length ? { passEnv: setup.passEnv } : {}),
    ...((setup.backendUrls?.length ?? 0) > 1 ? { backendUrls: setup.backendUrls } : {}),
  };
}

export async function createAgent(
  setup: AgentSetup,
  runtime: Runtime,
  extras: { backendInstance?: Backend; predictions?: Predictions } = {},
): Promise<Agent> {
  const name = setup.agent;
  if (name === 'gold') return new GoldAgent();
  if (name === 'empty') return new EmptyAgent();
  if (name === 'predictions') {
    if (!setup.predictions) throw new UsageError('--agent predictions needs --predictions FILE');
    const { patches, model } = extras.predictions ?? (await readPredictions(setup.predictions));
    return new PredictionsAgent(patches, model);
  }
  return new HarnessAgent({
    ...(await harnessSetup({ ...setup, agent: name }, runtime)),
    ...(extras.backendInstance ? { backendInstance: extras.backendInstance } : {}),
  });
}

/**
 * The checks that need no runtime: every flag combination and every file the agent reads, so a bad
 * flag is reported before the runtime is made (and before its warnings).
 */
export async function checkAgentSetup(setup: AgentSetup): Promise<{ predictions?: Predictions }> {
  const name = setup.agent;
  if (name === 'predictions') {
    if (!setup.predictions) throw new UsageError('--agent predictions needs --predictions FILE');
    return { predictions: await readPredictions(setup.predictions) };
  }
  if (!isHarness(name)) return {};
  if (!setup.backend) throw new UsageError(`the ${name} harness needs a backend (--backend, --model)`);
  if (name === 'generic' && !setup.agentCmd)
    throw new UsageError(
      '--harness generic needs --agent-cmd',
      "for example --agent-cmd 'my-agent {prompt}'",
    );
  if (setup.promptTemplate) await readTemplate(setup.promptTemplate);
  return {};
}

/** The runtime and the agent of an evaluation (polar loop injects the backend it reloads between steps). */
export async function setupEvaluation(
  setup: EvaluationSetup,
  extras: { backendInstance?: Backend } & Omit<RuntimeContext, 'harness'> = {},
): Promise<{ agent: Agent; runtime: Runtime }> {
  const { backendInstance, ...context } = extras;
  const checked = await checkAgentSetup(setup.agent);
  const harness = isHarness(setup.agent.agent) ? setup.agent.agent : null;
  const runtime = await createRuntime(setup.runtime, { ...context, harness });
  const agent = await createAgent(setup.agent, runtime, {
    ...checked,
    ...(backendInstance ? { backendInstance } : {}),
  });
  return { agent, runtime };
}

async function readTemplate(path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    throw unreadableInput(path, error, { what: '--prompt-template' });
  }
}

/** A predictions file: instance id -> model_patch, and the model it names. */
export interface Predictions {
  patches: Map<string, string>;
  model: string;
}

const PREDICTIONS_HINT =
  'a predictions file has one {"instance_id", "model_name_or_path", "model_patch"} per line (polar eval writes predictions.jsonl; results.jsonl is not one)';

/** Reads and validates a predictions file: every row names an instance_id and carries a model_patch. */
export async function readPredictions(path: string): Promise<Predictions> {
  const patches = new Map<string, string>();
  let model = 'predictions';
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw unreadableInput(path, error, { what: '--predictions' });
  }
  const rows = parseRows(path, text);
  for (const { row, line } of rows) {
    if (typeof row !== 'object' || row === null || Array.isArray(row))
      throw new InputError(path, line, undefined, 'expected a JSON object', PREDICTIONS_HINT);
    if (typeof row.instance_id !== 'string' || row.instance_id === '')
      throw new InputError(path, line, 'instance_id', 'missing (expected a string)', PREDICTIONS_HINT);
    // the official harness takes a null patch as an empty one; a missing field is another file
    if (!('model_patch' in row)) throw new InputError(path, line, 'model_patch', 'missing', PREDICTIONS_HINT);
    if (typeof row.model_patch !== 'string' && row.model_patch !== null)
      throw new InputError(path, line, 'model_patch', 'expected a string (a unified diff) or null');
    if (patches.has(row.instance_id))
      throw new InputError(path, line, 'instance_id', `${row.instance_id} is predicted twice`);
    patches.set(row.instance_id, row.model_patch ?? '');
    if (typeof row.model_name_or_path === 'string') model = row.model_name_or_path;
  }
  if (patches.size === 0)
    throw new InputError(path, undefined, undefined, 'holds no predictions', PREDICTIONS_HINT);
  return { patches, model };
}

/**
 * Checks a predictions file against the dataset: every instance it names exists there; the selected
 * instances it has no patch for are graded as empty patches, with a warning that counts them.
 */
export function checkPredictions(
  predictions: Predictions,
  path: string,
  dataset: { all: readonly SweInstance[]; selected: readonly SweInstance[] },
): void {
  const known = new Set(dataset.all.map((i) => i.instance_id));
  const unknown = [...predictions.patches.keys()].filter((id) => !known.has(id));
  if (unknown.length > 0) {
    throw new InputError(
      path,
      undefined,
      'instance_id',
      `${plural(unknown.length, 'instance')} not in the dataset: ${unknown.slice(0, 5).join(', ')}${unknown.length > 5 ? ', ...' : ''}`,
      'give the --dataset (and --split) the predictions were made for',
    );
  }
  const missing = dataset.selected.filter((i) => !predictions.patches.has(i.instance_id)).length;
  if (missing > 0)
    log.warn(`${path}: no prediction for ${plural(missing, 'selected instance')} (graded as empty patches)`);
}

function parseRows(path: string, text: string): Array<{ row: Record<string, unknown>; line?: number }> {
  if (path.endsWith('.json')) {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      throw new InputError(path, undefined, undefined, `not valid JSON (${(error as Error).message})`);
    }
    if (!Array.isArray(value))
      throw new InputError(
        path,
        undefined,
        undefined,
        'expected a JSON array of predictions',
        PREDICTIONS_HINT,
      );
    return value.map((row) => ({ row: row as Record<string, unknown> }));
  }
  const rows: Array<{ row: Record<string, unknown>; line?: number }> = [];
  for (const line of splitLines(text)) {
    rows.push({
      row: parseJsonLine(path, line, PREDICTIONS_HINT) as Record<string, unknown>,
      line: line.line,
    });
  }
  return rows;
}
