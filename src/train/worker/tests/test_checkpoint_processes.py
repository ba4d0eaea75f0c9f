"""Checkpoints across process counts (issue 26, part 3): torchrun --nproc_per_node 2 with FSDP over gloo makes
the update one process makes on the same global batch, and a checkpoint resumes on any number of processes
with the update an uninterrupted one-process run makes: 2 -> 1, 2 -> 2 and 1 -> 2, weights finite. Before
checkpoint version 2, FSDP on the CPU saved Adam's two moments as one shared buffer and a 2-process
checkpoint resumed into NaN weights (checkpoint.py, _state_options). Version-1 checkpoints: renamed on load, or
refused with the way out when corrupt."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

import torch

import helpers
from polar_train.checkpoint import CheckpointError, shared_storage
from polar_train.model import load_policy, torch_load
from polar_train.trainer import Trainer

QWEN3 = "tiny:arch=qwen3,vocab=64,dim=32,layers=2,heads=4,kv_heads=2,seed=1"
DRIVER = os.path.join(helpers.HERE, "torchrun_trainer.py")


def weights(out, step):
    from safetensors.torch import load_file  # type: ignore

    return load_file(os.path.join(out, "step-%d" % step, "model.safetensors"))


def set_version(step_dir, version):
    path = os.path.join(step_dir, "polar_checkpoint.json")
    with open(path) as fh:
        meta = json.load(fh)
    meta["polar_checkpoint"] = version
    with open(path, "w") as fh:
        json.dump(meta, fh)


class AcrossProcesses(unittest.TestCase):
    """One torchrun launch of 2 processes runs three trainings: a fresh one, and resumes of the 2-process and of
    the 1-process checkpoint; the 1-process runs (the reference, a resume of the 2-process checkpoint) run here."""

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory()
        tmp = cls.dir = cls._tmp.name
        recs = helpers.random_records(n_groups=2, group_size=4, vocab=64, resp_len=6)
        traj = helpers.write_jsonl(os.path.join(tmp, "traj.jsonl"), recs)
        # 2 steps of 1 update over all 8 rollouts; made-up logprobs: no sampling check
        cls.base = {"trajectories": traj, "model": QWEN3, "device": "cpu", "lr": 1e-2, "batch_rollouts": 8,
                    "micro_batch_tokens": 16, "save_every": 1, "tis": False, "gradient_checkpointing": False,
                    "sampling_gap_limit": 0}
        cls.out = {name: os.path.join(tmp, name) for name in ("n1", "n2", "n2-on2", "n1-on2", "n2-on1")}
        # the reference: one process, 2 steps uninterrupted (step-1 is the 1-process checkpoint)
        cls.train_here(out=cls.out["n1"], max_steps=2)
        runs = [dict(cls.base, out=cls.out["n2"], max_steps=1),
                dict(cls.base, out=cls.out["n2-on2"], max_steps=2, resume=os.path.join(cls.out["n2"], "step-1")),
                dict(cls.base, out=cls.out["n1-on2"], max_steps=2, resume=os.path.join(cls.out["n1"], "step-1"))]
        path = os.path.join(tmp, "runs.json")
        with open(path, "w") as fh:
            json.dump(runs, fh)
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1", "--nproc_per_node=2",
               DRIVER, path]
        env = dict(os.environ, PYTHONPATH=helpers.WORKER, OMP_NUM_THREADS="1")
        # its own session: a launch past its time is killed with its workers (torchrun's children)
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
        cls.launch = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
        cls.events = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    @classmethod
    def train_here(cls, **cfg):
        events = []
        t = Trainer(dict(cls.base, **cfg), events.append)
        t.setup()
        t.train()
        return t, events

    def assert_launch_ran(self):
        self.assertEqual(self.launch.returncode, 0, self.launch.stdout[-3000:] + self.launch.stderr[-3000:])

    def assert_same(self, out, step, reference="n1", what=""):
        a, b = weights(self.out[reference], step), weights(out, step)
        self.assertEqual(sorted(a), sorted(b))
        for k in a:
            self.assertTrue(torch.isfinite(b[k]).all(), "%s: non-finite %s" % (what, k))
            worst = float((a[k] - b[k]).abs().max())
            self.assertTrue(torch.allclose(a[k], b[k], atol=1e-5, rtol=1e-4), "%s: %s differs by %g" % (what, k, worst))

    def test_two_processes_make_the_one_process_update(self):
        self.assert_launch_ran()
        # rank 0 alone reports; every run had 2 processes
        self.assertEqual([(e["run"], e["world_size"]) for e in self.events if e["event"] == "done"],
                         [(0, 2), (1, 2), (2, 2)])
        self.assertEqual({e.get("world_size") for e in self.events if e["event"] == "log"} - {None}, {2})
        start = load_policy(QWEN3, torch.device("cpu"), False).model.state_dict()
        one = weights(self.out["n1"], 1)
        self.assertGreater(max(float((one[k] - start[k]).abs().max()) for k in one), 1e-4)  # it moved
        self.assert_same(self.out["n2"], 1, what="2 processes, step 1")
        with open(os.path.join(self.out["n2"], "step-1", "polar_checkpoint.json")) as fh:
            self.assertEqual(json.load(fh)["polar_checkpoint"], 2)

    def test_the_two_process_checkpoint_resumes_on_one(self):
        self.assert_launch_ran()
        t, events = self.train_here(out=self.out["n2-on1"], max_steps=2, resume=os.path.join(self.out["n2"], "step-1"))
        self.assertEqual([e["step"] for e in events if e["event"] == "step"], [2])
        self.assert_same(self.out["n2-on1"], 2, what="2 -> 1")
        # Adam's moments came back as two tensors of their own (the defect: one shared buffer)
        state = torch_load(os.path.join(self.out["n2"], "step-1", "trainer_state.pt"))["optimizer"]
        self.assertEqual(shared_storage(state), [])
        self.assertTrue(all(not torch.equal(v["exp_avg"], v["exp_avg_sq"]) for v in state["state"].values()))

    def test_the_two_process_checkpoint_resumes_on_two(self):
        self.assert_launch_ran()
        self.assertEqual([e["step"] for e in self.events if e["event"] == "step" and e["run"] == 1], [2])
        self.assert_same(self.out["n2-on2"], 2, what="2 -> 2")

    def test_the_one_process_checkpoint_resumes_on_two(self):
        self.assert_launch_ran()
        self.assertEqual([e["step"] for e in self.events if e["event"] == "step" and e["run"] == 2], [2])
        self.assert_same(self.out["n1-on2"], 2, what="1 -> 2")

    def test_version_1_checkpoints(self):
        self.assert_launch_ran()
        # one process keyed the optimiser state by parameter id: renamed in the optimiser's order, same update
        v1 = os.path.join(self.dir, "v1-one")
        shutil.copytree(os.path.join(self.out["n1"], "step-1"), v1)
        state = torch_load(os.path.join(v1, "trainer_state.pt"))
        names = state["optimizer"]["param_groups"][0]["params"]
        ids = {n: i for i, n in enumerate(names)}
        state["optimizer"] = {"state": {ids[n]: v for n, v in state["optimizer"]["state"].items()},
                              "param_groups": [dict(state["optimizer"]["param_groups"][0], params=list(range(len(names))))]}
        torch.save(state, os.path.join(v1, "trainer_state.pt"))
        set_version(v1, 1)
        self.train_here(out=os.path.join(self.dir, "v1-one-resumed"), max_steps=2, resume=v1)
        self.assert_same(os.path.join(self.dir, "v1-one-resumed"), 2, what="version 1, one process")
        # several CPU processes saved both moments as one buffer: refused, naming the way out
        bad = os.path.join(self.dir, "v1-fsdp")
        shutil.copytree(os.path.join(self.out["n2"], "step-1"), bad)
        state = torch_load(os.path.join(bad, "trainer_state.pt"))
        for v in state["optimizer"]["state"].values():
            v["exp_avg"] = v["exp_avg_sq"]
        torch.save(state, os.path.join(bad, "trainer_state.pt"))
        set_version(bad, 1)
        with self.assertRaises(CheckpointError) as ctx:
            self.train_here(out=os.path.join(self.dir, "v1-fsdp-resumed"), max_steps=2, resume=bad)
        self.assertIn("--model %s without --resume" % bad, str(ctx.exception))
        # a version this polar does not know
        set_version(bad, 3)
        with self.assertRaisesRegex(CheckpointError, "checkpoint version 3, and this polar reads versions 1 to 2"):
            self.train_here(out=os.path.join(self.dir, "v3-resumed"), max_steps=2, resume=bad)


if __name__ == "__main__":
    unittest.main()
