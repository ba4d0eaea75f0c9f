"""The trainer's side of a weight update over a collective (polar_train/weight_sender.py), on the CPU.

No GPU here, so NCCL itself cannot run: the sender runs as polar loop runs it (a process of its own, JSON
lines in and out) with the gloo transport, which builds exactly the group SGLang's receiver builds
(`init_custom_process_group`: a PrefixStore(group_name) over the TCP rendezvous, the group made by torch's
own helper) on the CPU instead of the GPU. The receivers here are stand-ins for the server's workers
written from SGLang's side of that contract, in processes of their own (rank_offset 1 and up, as
/init_weights_update_group gives them): they join the group, take the names/dtypes/shapes the sender
reports (what polar posts to /update_weights_from_distributed) and receive each tensor by broadcast,
then compare it with the checkpoint.

What is tested: the checkpoint's tensors read from every *.safetensors file in order, the metadata and the
broadcast order agreeing, dtypes (bfloat16 and float32) and shapes as the receiver allocates them, two
receivers at once (TP 2), several sends over one group, the protocol's events and its errors. What is not:
NCCL, a GPU, and vLLM's own group (StatelessProcessGroup + PyNcclCommunicator, which needs vLLM and CUDA):
for vLLM only the reading, ordering and broadcast loop shared with this path are exercised.
"""
import json
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import tempfile
import unittest

import torch

import helpers  # noqa: F401  (puts the worker on sys.path)

WORKER = helpers.WORKER


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def receiver(rank, world, port, group_name, inbox, outbox):
    """A server worker's side, as SGLang's init_custom_process_group and its broadcast receive build it."""
    import datetime

    import torch
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import Backend, PrefixStore, _new_process_group_helper, _world, rendezvous

    try:
        timeout = datetime.timedelta(seconds=60)
        store, r, w = next(rendezvous("tcp://127.0.0.1:%d" % port, rank, world, timeout=timeout))
        store.set_timeout(timeout)
        store = PrefixStore(group_name, store)
        import inspect

        key = "backend_options" if "backend_options" in inspect.signature(_new_process_group_helper).parameters else "pg_options"
        pg, _ = _new_process_group_helper(w, r, [], Backend("gloo"), store, group_name=group_name, timeout=timeout, **{key: None})
        _world.pg_group_ranks[pg] = {i: i for i in range(w)}
        outbox.put(("joined", rank))
        while True:
            meta = inbox.get()
            if meta is None:
                break
            got = {}
            for name, dtype, shape in zip(meta["names"], meta["dtype_names"], meta["shapes"]):
                t = torch.empty(shape, dtype=getattr(torch, dtype))
                dist.broadcast(t, src=0, group=pg)
                got[name] = t.float().sum().item()
            outbox.put(("received", rank, got))
    except Exception as e:  # reported to the test
        outbox.put(("error", rank, repr(e)))


class Sender:
    def __init__(self):
        env = dict(os.environ, PYTHONPATH=WORKER)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "polar_train.weight_sender"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=WORKER,
        )

    def cmd(self, **c):
        self.proc.stdin.write(json.dumps(c) + "\n")
        self.proc.stdin.flush()

    def event(self):
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError("the sender ended: %s" % self.proc.stderr.read())
        return json.loads(line)

    def close(self):
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        code = self.proc.wait(timeout=60)
        for f in (self.proc.stdout, self.proc.stderr):
            f.close()
        return code


def checkpoint(directory, step):
    """A sharded checkpoint as save_pretrained writes one: two safetensors files, bf16 and f32 tensors."""
    from safetensors.torch import save_file

    g = torch.Generator().manual_seed(step)
    a = {
        "model.embed_tokens.weight": torch.randn(8, 4, generator=g).to(torch.bfloat16),
        "model.layers.0.mlp.up_proj.weight": torch.randn(6, 4, generator=g).to(torch.bfloat16),
    }
    b = {"model.norm.weight": torch.randn(4, generator=g), "lm_head.weight": torch.randn(8, 4, generator=g)}
    save_file(a, os.path.join(directory, "model-00001-of-00002.safetensors"))
    save_file(b, os.path.join(directory, "model-00002-of-00002.safetensors"))
    return {k: v.float().sum().item() for k, v in {**a, **b}.items()}


class WeightSenderTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="polar-sender-")
        self.ctx = mp.get_context("spawn")
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)

    def start_receivers(self, world, port, group):
        outbox = self.ctx.Queue()
        inboxes = []
        for rank in range(1, world):
            inbox = self.ctx.Queue()
            p = self.ctx.Process(target=receiver, args=(rank, world, port, group, inbox, outbox))
            p.start()
            self.procs.append(p)
            inboxes.append(inbox)
        return inboxes, outbox

    def test_two_receivers_get_every_tensor_of_two_checkpoints_in_order(self):
        port, world, group = free_port(), 3, "polar_weights"
        sender = Sender()
        inboxes, outbox = self.start_receivers(world, port, group)
        sender.cmd(cmd="init", server="sglang", transport="gloo", master_address="127.0.0.1",
                   master_port=port, world_size=world, group_name=group)
        self.assertEqual(sender.event(), {"event": "ready"})
        joined = sorted(outbox.get(timeout=60)[1] for _ in inboxes)
        self.assertEqual(joined, [1, 2])
        for step in (1, 2):
            ckpt = os.path.join(self.dir, "step-%d" % step)
            os.makedirs(ckpt)
            sums = checkpoint(ckpt, step)
            sender.cmd(cmd="send", checkpoint=ckpt)
            meta = sender.event()
            self.assertEqual(meta["event"], "meta")
            self.assertEqual(meta["names"], [
                "model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight", "lm_head.weight", "model.norm.weight",
            ])
            self.assertEqual(meta["dtype_names"], ["bfloat16", "bfloat16", "float32", "float32"])
            self.assertEqual(meta["shapes"], [[8, 4], [6, 4], [8, 4], [4]])
            for inbox in inboxes:
                inbox.put({k: meta[k] for k in ("names", "dtype_names", "shapes")})
            sent = sender.event()
            self.assertEqual(sent["event"], "sent")
            self.assertEqual(sent["tensors"], 4)
            self.assertEqual(sent["bytes"], (32 + 24) * 2 + (32 + 4) * 4)
            for _ in inboxes:
                kind, rank, got = outbox.get(timeout=60)
                self.assertEqual(kind, "received", got)
                self.assertEqual(got.keys(), sums.keys())
                for name in sums:
                    self.assertAlmostEqual(got[name], sums[name], places=3, msg="rank %d %s" % (rank, name))
        for inbox in inboxes:
            inbox.put(None)
        self.assertEqual(sender.close(), 0)

    def test_a_folder_without_safetensors_is_an_error_event(self):
        port = free_port()
        sender = Sender()
        inboxes, outbox = self.start_receivers(2, port, "g")
        sender.cmd(cmd="init", server="sglang", transport="gloo", master_address="127.0.0.1",
                   master_port=port, world_size=2, group_name="g")
        self.assertEqual(sender.event(), {"event": "ready"})
        sender.cmd(cmd="send", checkpoint=self.dir)
        ev = sender.event()
        self.assertEqual(ev["event"], "error")
        self.assertIn("holds no *.safetensors file", ev["message"])
        self.assertEqual(sender.close(), 1)
        inboxes[0].put(None)

    @unittest.skipIf(torch.cuda.is_available(), "this machine has CUDA")
    def test_nccl_without_a_gpu_names_the_need(self):
        sender = Sender()
        sender.cmd(cmd="init", server="vllm", transport="nccl", master_address="127.0.0.1",
                   master_port=free_port(), world_size=2)
        ev = sender.event()
        self.assertEqual(ev["event"], "error")
        self.assertIn("needs a CUDA device", ev["message"])
        self.assertEqual(sender.close(), 1)


if __name__ == "__main__":
    unittest.main()
