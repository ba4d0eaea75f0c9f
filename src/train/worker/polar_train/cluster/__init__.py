"""polar's cluster drivers: rollouts fanned out on Ray (ray_rollouts) and torchrun on Ray (ray_torchrun).

Both are started by the TypeScript CLI (src/cluster/) like the trainer: a JSON spec in, JSON-lines events
out on stdout. Only the scheduling talks to Ray here; what a sample or a training step does stays in polar.
"""
