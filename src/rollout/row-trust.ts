/**
 * Who may set each field of a row (issue 43): the rule, written once. A row is data; what runs on the
 * machine, what is installed, and where, is the operator's. A dataset file the operator names
 * (`--dataset`, `--train-set`, `polar grade`'s row, a Ray or Slurm worker's share of the operator's
 * rows) is the operator's own and sets every field. A row that arrives over the network (polar gym's
 * `POST /run`, its `verifier_metadata.instance` or `verifier_metadata` itself, the only such place: a
 * `/v1/responses` call names an instance of `--dataset` by `instance_id`, it brings none) sets only the
 * fields marked `caller` below; one that sets an `operator` field is refused naming the fields, unless
 * the operator trusts callers (`polar gym --trust-row-commands`), or its `instance_id` names an instance
 * of `--dataset`, whose operator fields it then gets (set or unset) in place of its own.
 *
 * Every field of the row schema (src/rollout/dataset.ts) is declared here, and the type makes a new
 * field a compile error until it is. A row carries no environment variables: the harness's come from
 * the operator's flags (--pass-env, the harness profile), the tests' from the spec. The rest of a gym row
 * (`responses_create_params`: the prompt and the sampling parameters; `_ng_*` indices, `agent_ref`) is
 * the caller's: text for the model, numbers for the sampler, echoed back.
 *
 * What `caller` still allows, by design: the task itself (repository and commit among the operator's
 * `--repos`, the problem, the test patch and test ids). The test patch and the agent's patch are code
 * that runs, in the runtime (a sandbox or container), as the agent's own commands do: that is the
 * rollout, and the runtime is what bounds it.
 */
import type { SweInstance } from './dataset.ts';

export type FieldOwner = 'caller' | 'operator';

export interface FieldRule {
  who: FieldOwner;
  /** why: what the field reaches */
  why: string;
}

export const ROW_FIELDS: Readonly<Record<keyof SweInstance, FieldRule>> = {
  instance_id: { who: 'caller', why: 'a name (checked to be a file name); picks a --dataset row' },
  repo: { who: 'caller', why: 'owner/name of a repository under the operator’s --repos (checked)' },
  base_commit: { who: 'caller', why: 'a commit hash of that repository, checked out in the runtime' },
  patch: { who: 'caller', why: 'the reference fix: text, applied only by the gold agent, in the runtime' },
  test_patch: {
    who: 'caller',
    why: 'test code applied before grading, run in the runtime as the agent’s is',
  },
  problem_statement: { who: 'caller', why: 'prompt text' },
  hints_text: { who: 'caller', why: 'prompt text' },
  created_at: { who: 'caller', why: 'text' },
  version: {
    who: 'caller',
    why: 'picks one of polar’s own specs for the repository (src/rollout/env/official.ts, src/rollout/specs.ts)',
  },
  FAIL_TO_PASS: { who: 'caller', why: 'test ids, read from the test log only' },
  PASS_TO_PASS: { who: 'caller', why: 'test ids, read from the test log only' },
  environment_setup_commit: {
    who: 'caller',
    why: 'a commit of the operator’s repository whose requirement files the spec reads (each line checked as a requirement), as base_commit does without it',
  },
  difficulty: { who: 'caller', why: 'text' },
  image: {
    who: 'operator',
    why: 'the container image every command of the sample runs in (also image_name)',
  },
  eval_script: { who: 'operator', why: 'a shell script run to grade' },
  log_parser: { who: 'caller', why: 'the name of one of polar’s log parsers' },
  eval_type: { who: 'caller', why: 'how the task’s tests are counted (pass_and_fail, fail_only)' },
  test_cmd: { who: 'operator', why: 'a shell command run to grade' },
  grader: { who: 'operator', why: 'a verifier command run on this machine to grade' },
  python: {
    who: 'operator',
    why: 'the interpreter the environment is built with: a version, or a path polar runs on this machine',
  },
  pip_packages: {
    who: 'operator',
    why: 'what pip installs into the environment: a package’s build (setup.py, a build backend) runs code',
  },
  pre_install: { who: 'operator', why: 'shell steps run before the install' },
  install: { who: 'operator', why: 'the install step, a shell command' },
  extra: {
    who: 'caller',
    why: 'the row’s other fields: data handed to the operator’s verifier on stdin, never run by polar',
  },
};

/** The fields only the operator sets. */
export const OPERATOR_FIELDS = (Object.keys(ROW_FIELDS) as Array<keyof SweInstance>).filter(
  (f) => ROW_FIELDS[f].who === 'operator',
);

/** The operator fields a row sets. */
export function operatorFieldsSet(instance: SweInstance): Array<keyof SweInstance> {
  return OPERATOR_FIELDS.filter((f) => instance[f] !== undefined);
}

export interface RowFromOutside {
  /** the operator trusts callers with every field (polar gym --trust-row-commands) */
  trusted: boolean;
  /** the operator's rows by instance_id (--dataset) */
  dataset: ReadonlyMap<string, SweInstance>;
}

export type Admission =
  | {
      ok: true;
      instance: SweInstance;
      /** operator fields taken from --dataset in place of the row's (those whose values differed) */
      replaced: Array<keyof SweInstance>;
    }
  | { ok: false; fields: Array<keyof SweInstance> };

/**
 * Whether a row from outside may run as sent: as is when trusted; with --dataset's operator fields when
 * its instance_id is there; as is when it sets no operator field; else refused, naming the fields.
 */
export function admitRow(instance: SweInstance, context: RowFromOutside): Admission {
  if (context.trusted) return { ok: true, instance, replaced: [] };
  const own = context.dataset.get(instance.instance_id);
  if (own) {
    const merged: SweInstance = { ...instance };
    const replaced: Array<keyof SweInstance> = [];
    for (const f of OPERATOR_FIELDS) {
      if (JSON.stringify(instance[f]) !== JSON.stringify(own[f])) replaced.push(f);
      if (own[f] === undefined) delete merged[f];
      else (merged as unknown as Record<string, unknown>)[f] = own[f];
    }
    return { ok: true, instance: merged, replaced };
  }
  const fields = operatorFieldsSet(instance);
  return fields.length === 0 ? { ok: true, instance, replaced: [] } : { ok: false, fields };
}
