"""metrics.jsonl holds each step once (issue 47 item 5): a run stopped after writing a step's line and
before that step's checkpoint (with `save_every` 3, steps 4 and 5 were written, the last checkpoint is
step 3) wrote 4 and 5 again when resumed, so the file held them twice. The resumed run drops the lines
after the step it restores; a fresh run in a folder an earlier run left without a checkpoint starts empty.
"""
import json
import os
import tempfile
import unittest
from unittest import mock

import helpers
from polar_train.trainer import Trainer


class Stopped(Exception):
    """stands in for the kill: the process ends in the middle of a step"""


class MetricsOnResume(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name
        self.path = helpers.write_jsonl(os.path.join(self.dir, "traj.jsonl"), helpers.random_records())
        self.out = os.path.join(self.dir, "out")
        self.events = []

    def tearDown(self):
        self._tmp.cleanup()

    def config(self, **cfg):
        config = {"trajectories": self.path, "model": helpers.TINY, "out": self.out, "device": "cpu",
                  "lr": 2e-2, "weight_decay": 0.0, "save_every": 3, "batch_rollouts": 8,
                  "sampling_gap_limit": 0, "max_steps": 6}
        config.update(cfg)
        return config

    def run_until(self, stop_at=None, **cfg):
        t = Trainer(self.config(**cfg), self.events.append)
        t.setup()
        real = t._update

        def update(minis, step_no, acc, progress):
            if stop_at is not None and step_no == stop_at:
                raise Stopped()
            return real(minis, step_no, acc, progress)

        with mock.patch.object(t, "_update", update):
            try:
                t.train()
            except Stopped:
                pass
        return t

    def steps(self):
        with open(os.path.join(self.out, "metrics.jsonl")) as fh:
            return [json.loads(line)["step"] for line in fh]

    def test_a_resumed_run_writes_each_step_once(self):
        self.run_until(stop_at=6)
        self.assertEqual(self.steps(), [1, 2, 3, 4, 5], "stopped in step 6: 4 and 5 written after checkpoint 3")
        with open(os.path.join(self.out, "latest")) as fh:
            self.assertEqual(fh.read().strip(), "step-3")
        self.events.clear()
        t = self.run_until(resume=self.out)
        self.assertEqual(t.global_step, 6)
        self.assertEqual(self.steps(), [1, 2, 3, 4, 5, 6])
        logs = [e["message"] for e in self.events if e["event"] == "log"]
        self.assertTrue(any("dropped 2 line(s) written after step 3 (steps 4, 5)" in m for m in logs), logs)

    def test_a_fresh_run_over_an_earlier_one_without_a_checkpoint_starts_empty(self):
        self.run_until(stop_at=2, save_every=0)
        self.assertEqual(self.steps(), [1])
        self.assertFalse(os.path.exists(os.path.join(self.out, "latest")))
        with open(os.path.join(self.out, "metrics.jsonl"), "a") as fh:
            fh.write('{"event": "step", "step": 2, "tot')  # a line cut by the kill
        self.run_until(max_steps=2, save_every=0)
        self.assertEqual(self.steps(), [1, 2])


if __name__ == "__main__":
    unittest.main()
