"""Overlong traces in the trainer (polar_train/overlong.py): DAPO's length penalty at its boundaries (the
same table as test/unit/trajectory/overlong.test.ts for the TypeScript rule), each record's own mode or
the config's, and --overlong mask through a real training step: the masked trace's tokens change nothing."""
import os
import random
import tempfile
import unittest

import torch

import helpers
from helpers import record, trace
from polar_train import data as D
from polar_train import overlong as O
from polar_train.schema import SCHEMA
from polar_train.trainer import Trainer


class Formula(unittest.TestCase):
    def test_dapo_eq_13_boundaries(self):
        r = lambda y: O.length_reward(y, 100, 20)  # noqa: E731
        self.assertEqual(r(0), 0)
        self.assertEqual(r(80), 0)  # |y| = L_max - L_cache
        self.assertEqual(r(81), -1 / 20)
        self.assertEqual(r(90), -0.5)
        self.assertEqual(r(100), -1)  # |y| = L_max
        self.assertEqual(r(101), -1)
        self.assertEqual(O.penalty(None, 20), 0)
        self.assertEqual(O.penalty(-5, 20), -1)

    def test_modes_and_defaults_come_from_schema_json(self):
        self.assertEqual(O.MODES, tuple(SCHEMA["overlong"]["modes"]))
        self.assertIn(O.DEFAULT_MODE, O.MODES)
        self.assertGreater(O.DEFAULT_BUFFER, 0)


def overlong_trace(prompt, response, **facts):
    t = trace(prompt, response, [1] * len(response), [-1.0] * len(response))
    t.update(facts)
    return t


class Apply(unittest.TestCase):
    def recs(self, own=None):
        a = record("a", [trace([1, 2], [3, 4], [1, 1], [-1.0, -1.0]),
                         overlong_trace([1, 2], [5, 6, 7], length_stopped=1, headroom=0)], reward=1.0)
        b = record("b", [overlong_trace([1], [8, 9], truncated=True, headroom=-4)], reward=1.0)
        c = record("c", [overlong_trace([1], [8, 9], headroom=10)], reward=1.0)
        recs = [a, b, c]
        for i, r in enumerate(recs, 1):
            r["_line"] = i
            if own:
                r["overlong"] = dict(own)
        return recs

    def test_mask_zeroes_only_overlong_traces(self):
        recs = self.recs({"mode": "mask", "buffer": 20})
        self.assertEqual(O.apply(recs, {"overlong": None, "overlong_buffer": None}), {"masked": 2, "penalised": 0})
        self.assertEqual(recs[0]["traces"][0]["loss_mask"], [1, 1])
        self.assertEqual(recs[0]["traces"][1]["loss_mask"], [0, 0, 0])
        self.assertEqual(recs[1]["traces"][0]["loss_mask"], [0, 0])
        self.assertEqual(recs[2]["traces"][0]["loss_mask"], [1, 1], "within its limit: not overlong")
        self.assertEqual([r["reward"] for r in recs], [1.0, 1.0, 1.0])

    def test_penalty_from_the_least_headroom(self):
        recs = self.recs({"mode": "penalty", "buffer": 20})
        self.assertEqual(O.apply(recs, {}), {"masked": 0, "penalised": 3})
        self.assertEqual(recs[0]["reward"], 0.0)  # headroom 0: -1
        self.assertEqual(recs[1]["reward"], 0.0)  # cut: -1
        self.assertEqual(recs[2]["reward"], 1.0 + (10 - 20) / 20)
        self.assertEqual(recs[0]["traces"][1]["loss_mask"], [1, 1, 1])

    def test_the_config_overrides_the_record_and_the_default_applies_without_either(self):
        recs = self.recs({"mode": "mask", "buffer": 20})
        O.apply(recs, {"overlong": "keep"})
        self.assertEqual(recs[0]["traces"][1]["loss_mask"], [1, 1, 1])
        recs = self.recs({"mode": "penalty", "buffer": 20})
        O.apply(recs, {"overlong_buffer": 5})
        self.assertEqual(recs[2]["reward"], 1.0, "headroom 10 >= buffer 5")
        recs = self.recs()
        self.assertEqual(O.resolve(recs[0], {}), (SCHEMA["overlong"]["default"], SCHEMA["overlong"]["buffer"]))
        recs[0]["overlong"] = {"mode": "trim", "buffer": 3}
        with self.assertRaises(ValueError):
            O.resolve(recs[0], {})


class MaskInTraining(unittest.TestCase):
    """--overlong mask through a real step of the tiny model: the masked trace's tokens are out of the loss,
    so two runs whose only difference is those tokens end with the same weights (with keep they do not)."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def records(self, junk_seed):
        recs = helpers.random_records(n_groups=1, group_size=4, logprobs=False)
        rng = random.Random(junk_seed)
        junk = [rng.randrange(32) for _ in range(12)]
        # the first rollout (reward 0, a negative advantage) also holds a trace cut at max tokens
        recs[0]["traces"].append(overlong_trace([3, 1, 4, 1], junk, length_stopped=1, headroom=0))
        recs[0]["traces"][-1]["response_logprobs"] = None
        return recs

    def train(self, recs, mode, name):
        path = helpers.write_jsonl(os.path.join(self.dir, name + ".jsonl"), recs)
        events = []
        cfg = {"trajectories": path, "model": helpers.TINY, "out": os.path.join(self.dir, name), "device": "cpu",
               "lr": 2e-2, "weight_decay": 0.0, "save_every": 0, "batch_rollouts": 8, "tis": False,
               "sampling_gap_limit": 0, "overlong": mode}
        t = Trainer(cfg, events.append)
        t.setup()
        t.train()
        step = next(e for e in events if e["event"] == "step")
        return [p.detach().clone() for p in t.policy.parameters()], step

    def test_masked_tokens_do_not_reach_the_loss(self):
        a, step_a = self.train(self.records(1), "mask", "mask-a")
        b, _ = self.train(self.records(2), "mask", "mask-b")
        for x, y in zip(a, b):
            self.assertTrue(torch.equal(x, y), "the masked trace's tokens changed the update")
        expected = sum(sum(t["loss_mask"]) for r in self.records(1) for t in r["traces"] if not O.is_overlong(t))
        self.assertEqual(step_a["trained_tokens"], expected)
        k1, step_k = self.train(self.records(1), "keep", "keep-a")
        k2, _ = self.train(self.records(2), "keep", "keep-b")
        self.assertTrue(any(not torch.equal(x, y) for x, y in zip(k1, k2)), "with keep the tokens are trained")
        self.assertEqual(step_k["trained_tokens"], step_a["trained_tokens"] + 12)

    def test_samples_of_a_masked_trace_select_nothing(self):
        recs = self.records(1)
        for i, r in enumerate(recs, 1):
            r["_line"] = i
        O.apply(recs, {"overlong": "mask"})
        rollouts = D.build_rollouts(recs, [0.0] * len(recs), False, 32)
        self.assertEqual(rollouts[0].samples[-1].sel_tgt, [])
        self.assertGreater(len(rollouts[0].samples[0].sel_tgt), 0)


if __name__ == "__main__":
    unittest.main()
