"""The trainer's side of a weight update over a collective (polar loop --weight-sync nccl).

polar loop starts this as `python -m polar_train.weight_sender` (src/loop/weight-sender.ts) and drives the
inference server's HTTP control plane itself (src/loop/publish-vllm.ts, publish-sglang.ts); this process is
rank 0 of the group the server's workers join, and broadcasts a checkpoint's tensors to them.

Protocol: one JSON command per stdin line, one JSON event per stdout line (anything else goes to stderr).
  {"cmd": "init", "server": "vllm"|"sglang", "master_address", "master_port", "world_size",
   "group_name"?, "transport": "nccl"|"gloo"}
      -> {"event": "ready"} once every rank joined (the server's init route is in flight meanwhile)
  {"cmd": "send", "checkpoint": DIR}
      -> {"event": "meta", "names", "dtype_names", "shapes"}: the tensors of DIR's *.safetensors, files in
         name order, each file's tensors in its own order; then each tensor is broadcast from rank 0, in that
         order (the server's update route, given the same lists, receives them one by one)
      -> {"event": "sent", "tensors", "bytes", "seconds"}
  end of stdin -> leaves the group and exits 0. A failure: {"event": "error", "message"} and exit 1.

The groups, as each server's receiver builds its side:
- vLLM (--weight-transfer-config '{"backend": "nccl"}'): `StatelessProcessGroup.create(host, port, rank,
  world_size)` then `PyNcclCommunicator(pg, device)`, broadcast with `comm.broadcast(tensor, src=0,
  stream=...)`, one tensor per entry of update_info (not packed): vllm/distributed/weight_transfer/
  nccl_engine.py @04b06efe (`_stateless_init_process_group`, `receive_weights`, the trainer's
  `trainer_init` / `trainer_send_weights`). The trainer side uses vLLM's own two classes, so vLLM (the
  server's version) must be importable in this Python.
- SGLang (/init_weights_update_group): a torch.distributed group built as torch's init_process_group builds
  its default one, but under a `PrefixStore(group_name, store)` over the TCP rendezvous at
  tcp://master_address:master_port (SGLang's `init_custom_process_group`, copied from torch and OpenRLHF;
  the trainer must build its side identically or the first broadcast deadlocks), broadcast with
  `dist.broadcast(tensor, src=0, group=pg)`; `backend` is the init body's (`nccl`, or `gloo`).
The `gloo` transport builds the SGLang-style group on the CPU: the tests run this file with it (no GPU).
"""

import datetime
import glob
import inspect
import json
import os
import sys
import time


def emit(event, **fields):
    sys.stdout.write(json.dumps(dict(event=event, **fields)) + "\n")
    sys.stdout.flush()


def checkpoint_files(directory):
    files = sorted(glob.glob(os.path.join(directory, "*.safetensors")))
    if not files:
        raise ValueError("%s holds no *.safetensors file (polar train writes its checkpoints so)" % directory)
    return files


def dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def read_meta(directory):
    """The names, dtype names and shapes of the checkpoint's tensors, in the order they are sent."""
    from safetensors import safe_open

    names, dtypes, shapes = [], [], []
    for path in checkpoint_files(directory):
        with safe_open(path, framework="pt", device="cpu") as f:
            for name in f.keys():
                sl = f.get_slice(name)
                names.append(name)
                dtypes.append(dtype_name(_dtype_of(sl.get_dtype())))
                shapes.append(list(sl.get_shape()))
    return {"names": names, "dtype_names": dtypes, "shapes": shapes}


_SAFETENSORS_DTYPES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
    "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool",
    "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
}


def _dtype_of(code):
    import torch

    name = _SAFETENSORS_DTYPES.get(code)
    if name is None or not hasattr(torch, name):
        raise ValueError("tensor dtype %s is not one torch can broadcast" % code)
    return getattr(torch, name)


def iter_tensors(directory, device):
    from safetensors import safe_open

    for path in checkpoint_files(directory):
        with safe_open(path, framework="pt", device=device) as f:
            for name in f.keys():
                yield name, f.get_tensor(name)


def torch_group(transport, address, port, world_size, group_name, timeout_s):
    """Rank 0 of a non-default torch.distributed group, built as SGLang's receiver builds its side."""
    from torch.distributed.distributed_c10d import (
        Backend,
        PrefixStore,
        _new_process_group_helper,
        _world,
        rendezvous,
    )

    timeout = datetime.timedelta(seconds=timeout_s)
    store, rank, world = next(rendezvous("tcp://%s:%d" % (address, port), 0, world_size, timeout=timeout))
    store.set_timeout(timeout)
    store = PrefixStore(group_name, store)
    # torch renamed pg_options to backend_options (2.6); pass whichever this torch has
    params = inspect.signature(_new_process_group_helper).parameters
    options = "backend_options" if "backend_options" in params else "pg_options"
    pg, _ = _new_process_group_helper(
        world, rank, [], Backend(transport), store, group_name=group_name, timeout=timeout, **{options: None}
    )
    _world.pg_group_ranks[pg] = {i: i for i in range(world)}
    return pg


class Sender:
    def __init__(self):
        self.broadcast = None
        self.device = "cpu"
        self.close_group = lambda: None

    def init(self, cmd):
        server = cmd["server"]
        transport = cmd.get("transport", "nccl")
        address, port, world = cmd["master_address"], int(cmd["master_port"]), int(cmd["world_size"])
        timeout_s = float(cmd.get("timeout_s", 600))
        if transport not in ("nccl", "gloo"):
            raise ValueError("transport %r is not nccl or gloo" % transport)
        import torch

        if transport == "nccl":
            if not torch.cuda.is_available():
                raise RuntimeError("--weight-sync nccl needs a CUDA device on this machine (torch sees none)")
            self.device = "cuda:%d" % torch.cuda.current_device()
        if server == "vllm" and transport == "nccl":
            try:
                from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator
                from vllm.distributed.utils import StatelessProcessGroup
            except ImportError as e:
                raise RuntimeError(
                    "the NCCL path to vLLM needs vLLM (the server's version) importable in polar's trainer "
                    "Python (--python): %s" % e
                )
            pg = StatelessProcessGroup.create(host=address, port=port, rank=0, world_size=world)
            comm = PyNcclCommunicator(pg, device=torch.cuda.current_device())
            self.broadcast = lambda t: comm.broadcast(t, src=0, stream=torch.cuda.current_stream())
            return
        import torch.distributed as dist

        group = torch_group(transport, address, port, world, cmd.get("group_name") or "weight_update_group", timeout_s)
        self.broadcast = lambda t: dist.broadcast(t, src=0, group=group)
        self.close_group = lambda: dist.destroy_process_group(group)

    def send(self, cmd):
        if self.broadcast is None:
            raise RuntimeError("send before init")
        directory = cmd["checkpoint"]
        meta = read_meta(directory)
        emit("meta", **meta)
        t0 = time.perf_counter()
        count, size = 0, 0
        for i, (name, tensor) in enumerate(iter_tensors(directory, self.device)):
            if name != meta["names"][i]:
                raise RuntimeError("tensor %d is %s, the metadata sent said %s" % (i, name, meta["names"][i]))
            self.broadcast(tensor.contiguous())
            count += 1
            size += tensor.numel() * tensor.element_size()
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()
        emit("sent", tensors=count, bytes=size, seconds=round(time.perf_counter() - t0, 4))


def main():
    sender = Sender()
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            cmd = json.loads(line)
            if cmd.get("cmd") == "init":
                sender.init(cmd)
                emit("ready")
            elif cmd.get("cmd") == "send":
                sender.send(cmd)
            else:
                raise ValueError("unknown command %r" % cmd.get("cmd"))
    except Exception as e:  # reported as an event: polar names it in its PublishError
        emit("error", message="%s: %s" % (type(e).__name__, e))
        return 1
    finally:
        try:
            sender.close_group()
        except Exception:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
