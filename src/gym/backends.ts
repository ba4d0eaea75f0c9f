/**
 * The backends of a `polar gym` server: one per inference server URL, and the per-rollout view of one.
 *
 * NeMo RL hands NeMo Gym `policy_base_url` as a LIST, one URL per vLLM generation server
 * (nemo_rl/environments/nemo_gym.py, `initial_global_config_dict["policy_base_url"] = self.cfg["base_urls"]`,
 * NVIDIA-NeMo/RL read 2026-08-22). NeMo Gym's own model server pins each session to one of them
 * (responses_api_models/vllm_model/app.py, `_resolve_client`). polar does the same per rollout: every
 * call of a rollout goes to one server (its prefix cache holds the rollout's history), and a new rollout
 * goes to the server with the fewest rollouts running, ties in turn (round robin).
 *
 * NeMo RL writes `temperature`, `top_p` and `max_output_tokens` into every row's
 * `responses_create_params` (nemo_rl/experience/rollouts.py, `_prepare_nemo_gym_rows`) and divides the
 * training logits by that temperature: a rollout sampled at another temperature trains on the wrong
 * distribution. So the row's sampling reaches every call of its rollout: the row's temperature and top_p
 * replace the harness's; the row's max_output_tokens caps each call (a harness asking less keeps its
 * smaller ask, as NeMo RL itself takes min(row, max_new_tokens)). Each call records what was applied
 * (`backend_info.gym_sampling`).
 */
import type { Backend } from '../backends/types.ts';
import type { ResponseCreateParams } from './contract.ts';

/** The sampling a row asks for (null fields: the harness's own, else the backend's defaults). */
export interface RowSampling {
  temperature: number | null;
  topP: number | null;
  maxOutputTokens: number | null;
}

export function rowSampling(params: ResponseCreateParams): RowSampling {
  return {
    temperature: params.temperature ?? null,
    topP: params.top_p ?? null,
    maxOutputTokens: params.max_output_tokens ?? null,
  };
}

/** A backend whose every call samples with the row's parameters (see the file comment). */
export function withRowSampling(backend: Backend, sampling: RowSampling): Backend {
  const { temperature, topP, maxOutputTokens } = sampling;
  if (temperature === null && topP === null && maxOutputTokens === null) return backend;
  const apply = <R extends { temperature?: number; topP?: number; maxTokens?: number }>(request: R): R => {
    const next = { ...request };
    if (temperature !== null) next.temperature = temperature;
    if (topP !== null) next.topP = topP;
    if (maxOutputTokens !== null)
      next.maxTokens =
        request.maxTokens === undefined ? maxOutputTokens : Math.min(request.maxTokens, maxOutputTokens);
    return next;
  };
  const view: Backend = {
    kind: backend.kind,
    tokenExact: backend.tokenExact,
    url: backend.url,
    generate(request, context) {
      const applied = apply(request);
      context.recorder.annotate('gym_sampling', {
        row: { temperature, top_p: topP, max_output_tokens: maxOutputTokens },
        harness: {
          temperature: request.temperature ?? null,
          top_p: request.topP ?? null,
          max_tokens: request.maxTokens ?? null,
        },
        sent: {
          temperature: applied.temperature ?? null,
          top_p: applied.topP ?? null,
          max_tokens: applied.maxTokens ?? null,
        },
      });
      return backend.generate(applied, context);
    },
    countTokens: (request, context) => backend.countTokens(apply(request), context),
    // the pool owns the server's backend: a rollout never closes it
    close: async () => {},
  };
  return view;
}
