"""A stand-in for an inference server's workers on the data plane of a weight update, for the tests of
polar loop --weight-sync nccl (test/unit/loop/publish-nccl.test.ts): the stand-in servers' init route starts
it, their update route hands it the tensors' metadata.

It joins the group as SGLang's receiver builds its side (`init_custom_process_group`: a PrefixStore(group
name) over the TCP rendezvous at tcp://master_address:master_port, the group made by torch's own helper),
with the gloo backend, as rank `rank_offset` (one worker). Then for each JSON line {names, dtype_names,
shapes} on stdin it receives every tensor by broadcast from rank 0, in that order, and prints
{"received": n, "sums": {name: float}}. The first line it prints is {"joined": true}.

Run: python weight-receiver.py ADDRESS PORT WORLD_SIZE RANK GROUP_NAME
"""
import datetime
import inspect
import json
import sys

import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import Backend, PrefixStore, _new_process_group_helper, _world, rendezvous


def main():
    address, port, world, rank, group = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    timeout = datetime.timedelta(seconds=120)
    store, r, w = next(rendezvous("tcp://%s:%d" % (address, port), rank, world, timeout=timeout))
    store.set_timeout(timeout)
    store = PrefixStore(group, store)
    key = "backend_options" if "backend_options" in inspect.signature(_new_process_group_helper).parameters else "pg_options"
    pg, _ = _new_process_group_helper(w, r, [], Backend("gloo"), store, group_name=group, timeout=timeout, **{key: None})
    _world.pg_group_ranks[pg] = {i: i for i in range(w)}
    print(json.dumps({"joined": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        meta = json.loads(line)
        sums = {}
        for name, dtype, shape in zip(meta["names"], meta["dtype_names"], meta["shapes"]):
            t = torch.empty(shape, dtype=getattr(torch, dtype))
            dist.broadcast(t, src=0, group=pg)
            sums[name] = float(t.float().sum())
        print(json.dumps({"received": len(sums), "sums": sums}), flush=True)


if __name__ == "__main__":
    main()
