"""polar's cluster drivers and launchers: rollouts fanned out on Ray (ray_rollouts), and `polar train`
across nodes launched by Slurm (srun_torchrun, one srun task per node) or by Ray (ray_torchrun, one
STRICT_SPREAD placement-group bundle per node); nodes holds what the two launchers share.

ray_rollouts is started by the TypeScript CLI (src/rollout/executors/ray.ts) like the trainer: a JSON
spec in, JSON-lines events out on stdout. The launchers are started by the user (srun, or python -m on a
Ray node) and run `polar train` on each node. Only the scheduling talks to the engine here; what a sample or a training
step does stays in polar.
"""
