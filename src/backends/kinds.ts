/** The backend kinds `--backend` takes: a module of its own, so that `--help` loads no backend. */
export const BACKEND_KINDS = ['vllm', 'sglang', 'openai', 'tokens', 'embedded', 'nemo-rl'] as const;
