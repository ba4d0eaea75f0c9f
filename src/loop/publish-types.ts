/**
 * The shape of publishing new weights (src/loop/publish.ts picks a publisher per backend; publish-vllm.ts
 * and publish-sglang.ts load weights into a running server): what a publisher is given and does.
 */
import type { BackendOptions } from '../backends/types.ts';
import { EXIT, PolarError } from '../errors.ts';
import type { PauseMode, WeightSyncChoice } from '../options/defaults.ts';

/** New weights could not be put in front of the backend (an export missing, a refused update, a server down). */
export class PublishError extends PolarError {
  constructor(
    message: string,
    hint?: string,
    exitCode: typeof EXIT.failure | typeof EXIT.environment = EXIT.failure,
  ) {
    super(message, { hint, exitCode });
  }
}

/**
 * The server cannot take weights as asked (a flag it was started without, a version that lacks the route):
 * the environment's set-up (exit 4, as a server set-up check's), said before any rollout.
 */
export class PublishSetupError extends PublishError {
  constructor(message: string, hint: string) {
    super(message, hint, EXIT.environment);
  }
}

export interface PublishContext {
  /** the trained checkpoint directory (transformers/vLLM layout, or polar's tiny layout) */
  checkpoint: string;
  /** an ONNX export of it, for the embedded backend */
  onnx?: string;
  /** the policy version it becomes (the loop step that trained it): names a vLLM LoRA adapter */
  version?: number;
}

export interface Publisher {
  /** what the loop must produce for it before publishing */
  needsOnnx: boolean;
  /**
   * at the loop's start, before any rollout: checks the server offers what publishing needs (a refusal
   * names the server's flags), sets up the transfer, and labels the served weights with `version`
   */
  prepare?(version?: number): Promise<void>;
  publish(context: PublishContext): Promise<void>;
  /** at the loop's end: what prepare started (the NCCL sender) */
  close?(): Promise<void>;
}

export interface PublisherOptions {
  /** the run's backend options: the URL readiness polls and the API key every request carries */
  backendOptions: BackendOptions;
  reloadCmd?: string;
  readyTimeoutMs?: number;
  /** the run trains LoRA adapters (--lora): vLLM loads each step's adapter at run time */
  lora?: boolean;
  /** --weight-sync (default auto) */
  weightSync?: WeightSyncChoice;
  /** --weight-sync-pause: what an update does to the calls in flight (default wait) */
  pause?: PauseMode;
  /** --weight-sync-address HOST[:PORT]: where the server's workers reach the trainer's NCCL rendezvous */
  rendezvous?: { host: string; port?: number };
  /** the collective of the nccl path: nccl (a GPU), or gloo (SGLang's group on the CPU: the tests) */
  transport?: 'nccl' | 'gloo';
  /** the Python of the NCCL sender (--python, POLAR_PYTHON; default: polar's own) */
  python?: string;
  /** every server of the run when there are several (--backend-url A,B): each publish goes to all */
  servers?: string[];
}
