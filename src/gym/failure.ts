/**
 * Failed rollouts of `polar gym`: what a rollout that produced nothing to grade or train on answers
 * (docs/gym.md, "Failed rollouts").
 */
import type { RolloutOutput } from './rollout.ts';

type Json = Record<string, unknown>;

/**
 * NeMo Gym's routing key for a failed rollout (nemo_gym/rollout_collection.py, NG_FAILURE_CLASS_KEY,
 * NVIDIA-NeMo/Gym read 2026-08-22): `gym eval run` writes a row carrying it to the
 * `<output>_failures.jsonl` sidecar (never to the rollouts the aggregation reads) and dispatches the
 * rollout again on resume, up to NEMO_GYM_MAX_ROLLOUT_ATTEMPTS; a non-2xx answer would abort the whole
 * collection (`raise_for_status` in `run_examples`).
 */
export const FAILURE_CLASS_KEY = '_ng_failure_class';

/**
 * A rollout that produced nothing to train on or grade: answered 200 with `_ng_failure_class`, `reward`
 * null and no output items (src/rollout/outcome.ts: an infrastructure failure is never a reward).
 * `transient`: the backend or the runtime failed (Gym's own name for that class, responses_api_agents/
 * conversational_tool_use/simulation/app.py); `no_trainable_call`: the harness made no call with token
 * ids; `non_contiguous`: polar could not build one contiguous chain (a polar bug; the capture keeps all).
 */
export class RolloutFailure extends Error {
  constructor(
    readonly failureClass: 'transient' | 'no_trainable_call' | 'non_contiguous',
    message: string,
    readonly capture: string | null = null,
  ) {
    super(message);
  }
}

/**
 * The /run answer of a failed rollout: the row, a Responses object with no output items, reward null,
 * `_ng_failure_class`. What the callers do with it: NeMo Gym's collection puts it in the failures
 * sidecar and retries it on resume (see FAILURE_CLASS_KEY). NeMo RL never reads the key: its
 * `_postprocess_nemo_gym_to_nemo_rl_result` (nemo_rl/environments/nemo_gym.py, NVIDIA-NeMo/RL read
 * 2026-08-22) raises "NeMo Gym returned a result with no generation data" on an output without
 * trainable items before it reads `reward`, so the sample never reaches the loss or the group baseline;
 * nemo_rl/experience/rollout_manager.py counts that as a data failure of the prompt (retried
 * max_data_attempts_per_prompt times, then skipped within max_skipped_prompts).
 */
/** A rollout with no output items (the Responses object of a failed rollout is built from it). */
export const EMPTY_ROLLOUT: RolloutOutput = {
  output: [],
  traces: [],
  main: -1,
  calls: { recorded: 0, usable: 0, outside_main: 0, errors: 0, hung_up: 0 },
  usage: { input_tokens: 0, output_tokens: 0 },
  skipped: [],
};

/** `response`: the Responses object of EMPTY_ROLLOUT for the row's parameters */
export function failureRow(row: Json, response: Json, instanceId: string, failure: RolloutFailure): Json {
  return {
    ...row,
    response: {
      ...response,
      status: 'failed',
      error: { code: 'server_error', message: failure.message },
    },
    reward: null,
    resolved: null,
    status: 'error',
    reason: failure.message,
    [FAILURE_CLASS_KEY]: failure.failureClass,
    polar: { instance_id: instanceId, capture: failure.capture, failure: failure.failureClass },
  };
}
