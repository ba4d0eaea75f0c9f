/**
 * One evaluation setup for `polar eval`, `polar loop` and `polar gym`: the agent (gold, empty, predictions
 * or a harness under capture) and the runtime it works in, made from typed options. eval and loop call
 * `setupEvaluation`; gym, which makes a harness agent per rollout, takes the same `harnessSetup`.
 */
import { readFile } from 'node:fs/promises';
import type { Backend, BackendOptions } from '../backends/types.ts';
import { InputError, UsageError } from '../errors.ts';
import type { HarnessName } from '../harnesses/types.ts';
import { type AgentName, isHarness } from './agent-names.ts';
import {
  type Agent,
  EmptyAgent,
  GoldAgent,
  HarnessAgent,
  type HarnessAgentOptions,
  PredictionsAgent,
} from './agents.ts';
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
  /** the backend a harness talks to (required for a harness agent) */
  backend?: BackendOptions;
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
    'harness' | 'backend' | 'model' | 'placement' | 'genericCommand' | 'promptTemplate' | 'harnessOptions'
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
    placement: runtime.isolated ? 'container' : 'host',
    ...(setup.agentCmd
      ? { genericCommand: ['bash', '-c', setup.agentCmd.replaceAll('{prompt}', '"$POLAR_PROMPT"')] }
      : {}),
    ...(setup.promptTemplate ? { promptTemplate: await readTemplate(setup.promptTemplate) } : {}),
    ...(setup.piApi ? { harnessOptions: { api: setup.piApi } } : {}),
  };
}

export async function createAgent(
  setup: AgentSetup,
  runtime: Runtime,
  extras: { backendInstance?: Backend } = {},
): Promise<Agent> {
  const name = setup.agent;
  if (name === 'gold') return new GoldAgent();
  if (name === 'empty') return new EmptyAgent();
  if (name === 'predictions') {
    if (!setup.predictions) throw new UsageError('--agent predictions needs --predictions FILE');
    const { patches, model } = await readPredictions(setup.predictions);
    return new PredictionsAgent(patches, model);
  }
  return new HarnessAgent({
    ...(await harnessSetup({ ...setup, agent: name }, runtime)),
    ...(extras.backendInstance ? { backendInstance: extras.backendInstance } : {}),
  });
}

/** The runtime and the agent of an evaluation (polar loop injects the backend it reloads between steps). */
export async function setupEvaluation(
  setup: EvaluationSetup,
  extras: { backendInstance?: Backend } & Omit<RuntimeContext, 'harness'> = {},
): Promise<{ agent: Agent; runtime: Runtime }> {
  const { backendInstance, ...context } = extras;
  const harness = isHarness(setup.agent.agent) ? setup.agent.agent : null;
  const runtime = await createRuntime(setup.runtime, { ...context, harness });
  const agent = await createAgent(setup.agent, runtime, backendInstance ? { backendInstance } : {});
  return { agent, runtime };
}

async function readTemplate(path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch {
    throw new UsageError(`--prompt-template ${path}: cannot be read`);
  }
}

async function readPredictions(path: string): Promise<{ patches: Map<string, string>; model: string }> {
  const patches = new Map<string, string>();
  let model = 'predictions';
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch {
    throw new UsageError(`--predictions ${path}: cannot be read`);
  }
  const rows = parseRows(path, text);
  for (const row of rows) {
    if (typeof row.instance_id !== 'string') continue;
    patches.set(row.instance_id, typeof row.model_patch === 'string' ? row.model_patch : '');
    if (typeof row.model_name_or_path === 'string') model = row.model_name_or_path;
  }
  return { patches, model };
}

function parseRows(path: string, text: string): Array<Record<string, unknown>> {
  if (path.endsWith('.json')) {
    try {
      return JSON.parse(text) as Array<Record<string, unknown>>;
    } catch (error) {
      throw new InputError(path, undefined, undefined, `not valid JSON (${(error as Error).message})`);
    }
  }
  const rows: Array<Record<string, unknown>> = [];
  text.split('\n').forEach((line, i) => {
    if (!line.trim()) return;
    try {
      rows.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      throw new InputError(path, i + 1, undefined, 'not valid JSON');
    }
  });
  return rows;
}
