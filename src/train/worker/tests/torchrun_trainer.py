"""Runs the worker's Trainer once per config of a JSON list under one torchrun launch (test_checkpoint_processes.py),
so several multi-process runs cost one start of torch in each process. Each run has a process group of its
own over its own key prefix of torchrun's store: a second default group on the same store would find the
first one's keys (destroy_process_group restarts the group names at 0) and wait for ever. Prints each rank-0
event as a JSON line with the run's index added."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import torch.distributed as dist  # noqa: E402

from polar_train.trainer import Trainer  # noqa: E402


def main(path: str) -> None:
    with open(path) as fh:
        configs = json.load(fh)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    store, _, _ = next(dist.rendezvous("env://", rank, world))
    for i, cfg in enumerate(configs):
        dist.init_process_group("gloo", store=dist.PrefixStore("run-%d/" % i, store), rank=rank, world_size=world)

        def emit(event, i=i):
            sys.stdout.write(json.dumps(dict(event, run=i)) + "\n")
            sys.stdout.flush()

        trainer = Trainer(cfg, emit)
        trainer.setup()
        trainer.train()
        if trainer.rank == 0:
            emit({"event": "done", "steps": trainer.global_step, "world_size": trainer.world})
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
