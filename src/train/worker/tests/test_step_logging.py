"""How often the trainer logs (issue 28: "per optimiser step"): one `step` event and one metrics.jsonl line
per step, never per micro-batch or per PPO epoch. With the defaults (1 mini-batch, 1 PPO epoch), and in
polar loop, a step is exactly one optimiser update; a step of several updates (--mini-batches,
--ppo-epochs) is one line whose grad_norm / grad_norm_max are the mean / max over those updates and whose
lr is the learning rate after its last update.
"""
import json
import os
import tempfile
import unittest
from unittest import mock

import helpers
from polar_train import trainer as T
from polar_train.trainer import Trainer


class Recording(T._Acc):
    """StepMetrics that keeps each update's gradient norm (the values the step's line aggregates)."""

    updates = []

    def add_update(self, gnorm):
        Recording.updates.append(gnorm)
        super().add_update(gnorm)


class StepLogging(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name
        self.events = []
        Recording.updates = []

    def tearDown(self):
        self._tmp.cleanup()

    def train(self, **cfg):
        path = helpers.write_jsonl(os.path.join(self.dir, "traj.jsonl"), helpers.random_records())
        config = {"trajectories": path, "model": helpers.TINY, "out": os.path.join(self.dir, "out"),
                  "device": "cpu", "lr": 2e-2, "weight_decay": 0.0, "save_every": 0, "batch_rollouts": 8,
                  "sampling_gap_limit": 0, "micro_batch_tokens": 28, "max_steps": 3}
        config.update(cfg)
        t = Trainer(config, self.events.append)
        with mock.patch.object(T, "_Acc", Recording):
            t.setup()
            t.train()
        with open(os.path.join(self.dir, "out", "metrics.jsonl")) as fh:
            lines = [json.loads(line) for line in fh]
        return t, [e for e in self.events if e["event"] == "step"], lines

    def test_one_line_per_optimiser_update_with_the_defaults_not_per_micro_batch(self):
        t, steps, lines = self.train()
        micros = sum(len(m) for m in t.prepare(t.batch_rollouts(0)))
        self.assertGreater(micros, 1, "several micro-batches per step")
        self.assertEqual([e["step"] for e in steps], [1, 2, 3])
        self.assertEqual([e["updates"] for e in steps], [1, 2, 3], "one optimiser update per step")
        self.assertEqual(len(Recording.updates), 3)
        self.assertEqual([line["step"] for line in lines], [1, 2, 3])
        for e, line, gnorm in zip(steps, lines, Recording.updates):
            self.assertEqual(e, line, "the event is the metrics.jsonl line")
            self.assertAlmostEqual(e["grad_norm"], gnorm, places=6)
            self.assertAlmostEqual(e["grad_norm_max"], gnorm, places=6)

    def test_a_step_of_several_updates_is_one_line_aggregating_them(self):
        t, steps, lines = self.train(mini_batches=2, ppo_epochs=2, max_steps=2, schedule="cosine")
        self.assertEqual([e["step"] for e in steps], [1, 2], "one line per step, not per epoch")
        self.assertEqual([e["updates"] for e in steps], [4, 8], "2 mini-batches x 2 PPO epochs per step")
        self.assertEqual(len(lines), 2)
        for i, e in enumerate(steps):
            norms = Recording.updates[4 * i : 4 * i + 4]
            self.assertAlmostEqual(e["grad_norm"], sum(norms) / 4, places=6)
            self.assertAlmostEqual(e["grad_norm_max"], max(norms), places=6)
        # the learning rate after the step's last update (the cosine schedule moves every update)
        self.assertAlmostEqual(steps[-1]["lr"], t.sched.get_last_lr()[0], places=12)
        self.assertNotAlmostEqual(steps[0]["lr"], steps[1]["lr"], places=9)

    def test_each_line_says_what_the_step_trained_on_reward_advantage_length(self):
        # issue 47: a reward curve in metrics.jsonl, as TRL logs reward, advantage and length by default
        t, steps, lines = self.train(batch_rollouts=4, max_steps=2)
        for data_step, line in enumerate(lines):
            batch = t.batch_rollouts(data_step)
            rewards = [r.reward for r in batch]
            mean = sum(rewards) / len(rewards)
            self.assertAlmostEqual(line["reward_mean"], mean, places=9)
            self.assertAlmostEqual(line["reward_std"], (sum((x - mean) ** 2 for x in rewards) / len(rewards)) ** 0.5,
                                   places=9)
            self.assertAlmostEqual(line["advantage_abs_mean"], sum(abs(r.advantage) for r in batch) / len(batch),
                                   places=9)
            self.assertGreater(line["advantage_abs_mean"], 0, "rewards 0 and 1 in each group")
            self.assertAlmostEqual(line["response_tokens_mean"], sum(r.trained_tokens for r in batch) / len(batch))
        self.assertEqual([e["reward_mean"] for e in steps], [line["reward_mean"] for line in lines])


if __name__ == "__main__":
    unittest.main()
