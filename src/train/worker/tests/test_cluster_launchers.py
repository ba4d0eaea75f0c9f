"""The node launchers without a cluster: what srun_torchrun runs on a node from Slurm's environment (a fake
`scontrol` on PATH answers as Slurm 22.05's does), and the polar train line both launchers build."""
import io
import os
import stat
import tempfile
import unittest
from unittest import mock

import helpers  # noqa: F401  (puts the worker on sys.path)
from polar_train.cluster import nodes, srun_torchrun

# `scontrol show hostnames n[1-2]` and `scontrol show node -o NAME` (one line, fields space-separated)
FAKE_SCONTROL = """#!/bin/sh
if [ "$1 $2" = "show hostnames" ]; then printf 'n1\\nn2\\n'; exit 0; fi
if [ "$1 $2 $3" = "show node -o" ]; then
  case "$4" in
    n1) echo "NodeName=n1 Arch=x86_64 CoresPerSocket=1 NodeAddr=10.9.0.1 NodeHostName=n1 State=MIXED";;
    n2) echo "NodeName=n2 Arch=x86_64 CoresPerSocket=1 NodeAddr=10.9.0.2 NodeHostName=n2 State=MIXED";;
    *) echo "Node $4 not found" >&2; exit 1;;
  esac
  exit 0
fi
exit 2
"""


class SrunTorchrunTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        path = os.path.join(self.dir, "scontrol")
        with open(path, "w") as fh:
            fh.write(FAKE_SCONTROL)
        os.chmod(path, stat.S_IRWXU)
        self.env = {"PATH": f"{self.dir}:{os.environ.get('PATH', '')}", "SLURM_STEP_NUM_NODES": "2",
                    "SLURM_NODEID": "1", "SLURMD_NODENAME": "n2", "SLURM_STEP_NODELIST": "n[1-2]",
                    "SLURM_STEP_TASKS_PER_NODE": "1(x2)", "SLURM_JOB_ID": "42", "SLURM_STEP_ID": "0"}

    def launch(self, env, argv):
        with mock.patch.dict(os.environ, env, clear=True), \
                mock.patch.object(srun_torchrun.os, "execvp") as execvp, \
                mock.patch.object(srun_torchrun, "interface_of", return_value="veth0"), \
                mock.patch.object(srun_torchrun.sys, "stderr", io.StringIO()):  # unittest's own lines stay whole
            srun_torchrun.main(argv)
        return execvp.call_args[0][1]

    def test_node_rank_and_first_node_from_slurm(self):
        argv = self.launch(self.env, ["--polar", "polar", "--port", "29500", "--", "t.jsonl", "--out", "o"])
        self.assertEqual(argv, ["polar", "train", "t.jsonl", "--out", "o", "--nnodes", "2", "--node-rank", "1",
                                "--rdzv-endpoint", "10.9.0.1:29500", "--local-addr", "10.9.0.2",
                                "--rdzv-id", "slurm-42-0", "--socket-ifname", "veth0"])

    def test_more_than_one_task_per_node_is_refused(self):
        env = dict(self.env, SLURM_STEP_TASKS_PER_NODE="2(x2)")
        with self.assertRaises(SystemExit) as raised:
            self.launch(env, ["--", "t.jsonl"])
        self.assertIn("one task per node", str(raised.exception))

    def test_outside_srun_says_how_to_run_it(self):
        with self.assertRaises(SystemExit) as raised:
            self.launch({"PATH": self.env["PATH"]}, ["--", "t.jsonl"])
        self.assertIn("srun -N N --ntasks-per-node=1", str(raised.exception))


class NodesTest(unittest.TestCase):
    def test_loopback_interface_found(self):
        self.assertEqual(nodes.interface_of("127.0.0.1"), "lo")
        self.assertIsNone(nodes.interface_of("192.0.2.77"))  # TEST-NET-1: on no interface here

    def test_no_interface_no_socket_flag(self):
        argv = nodes.train_argv(["polar"], ["t.jsonl"], 2, 0, "10.0.0.1:1", "10.0.0.1", None, "r")
        self.assertNotIn("--socket-ifname", argv)
        self.assertEqual(argv[:3], ["polar", "train", "t.jsonl"])


if __name__ == "__main__":
    unittest.main()
