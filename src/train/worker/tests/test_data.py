import os
import random
import tempfile
import unittest

import torch

import helpers
from helpers import record, trace
from polar_train import advantage as A
from polar_train import data as D
from polar_train.schema import ADVANTAGES, DEFAULTS
from polar_train.model import load_policy


def lines(records):
    for i, r in enumerate(records, 1):
        r["_line"] = i
    return records


def zeros(recs):
    return [0.0] * len(recs)


class Advantages(unittest.TestCase):
    def recs(self):
        return lines([record("a%d" % i, [trace([1], [2], [1])], reward=r) for i, r in enumerate([1.0, 0.0, 0.0, 1.0])])

    def test_registry_is_the_schema_enum_and_the_default_is_registered(self):
        # one list of estimators: the TypeScript enum (schema.json) names exactly what the worker registers
        self.assertEqual(sorted(A.ESTIMATORS), sorted(ADVANTAGES))
        self.assertIn(DEFAULTS["advantage"], A.ESTIMATORS)
        with self.assertRaises(A.AdvantageError):
            A.group_advantages([1.0, 0.0], "ppo")

    def test_rloo(self):
        adv, _ = A.compute_advantages(self.recs(), "rloo")
        self.assertEqual(adv, [1 - 1 / 3, 0 - 2 / 3, 0 - 2 / 3, 1 - 1 / 3])

    def test_grpo_unbiased_std(self):
        adv, _ = A.compute_advantages(self.recs(), "grpo")
        std = (4 * 0.25 / 3) ** 0.5
        for a, r in zip(adv, [1, 0, 0, 1]):
            self.assertAlmostEqual(a, (r - 0.5) / (std + 1e-6), places=9)

    def test_dr_grpo_mean_centred(self):
        self.assertEqual(A.compute_advantages(self.recs(), "dr-grpo")[0], [0.5, -0.5, -0.5, 0.5])

    def test_properties_over_random_groups(self):
        # grpo and dr-grpo sum to 0 over a group; rloo = G/(G-1) * dr-grpo; a uniform group or a group of
        # one gets 0 under every estimator (what polar build and polar train's pre-check count on)
        rng = random.Random(7)
        for _ in range(200):
            g = rng.randrange(2, 17)
            rewards = [rng.uniform(-10, 10) for _ in range(g)]
            dr = A.group_advantages(rewards, "dr-grpo")
            self.assertAlmostEqual(sum(dr), 0.0, places=8)
            self.assertAlmostEqual(sum(A.group_advantages(rewards, "grpo")), 0.0, places=5)
            for x, d in zip(A.group_advantages(rewards, "rloo"), dr):
                self.assertAlmostEqual(x, g / (g - 1) * d, places=8)
        for mode in A.ESTIMATORS:
            self.assertEqual(A.group_advantages([0.5, 0.5, 0.5], mode), [0.0, 0.0, 0.0])
            self.assertEqual(A.group_advantages([1.0], mode), [0.0])

    def test_groups_are_separate_and_a_recorded_v1_advantage_is_computed_again(self):
        recs = self.recs()
        recs[0] = dict(recs[0], v=1, advantage=7.0)  # an older build's value: not used
        recs[2]["group_id"] = "other"  # alone in its group -> 0
        adv, note = A.compute_advantages(recs, "dr-grpo")
        self.assertAlmostEqual(adv[0], 1 - 2 / 3)
        self.assertEqual(adv[2], 0.0)
        self.assertAlmostEqual(adv[1], 0.0 - 2 / 3)
        self.assertIn("1 of 1 trajectory v1 records", note)
        self.assertIn("--advantage dr-grpo", note)

    def test_v1_advantages_an_older_build_wrote_with_the_same_estimator_give_no_note(self):
        recs = self.recs()
        adv, _ = A.compute_advantages(recs, "grpo")
        old = lines([dict(r, v=1, advantage=a) for r, a in zip(recs, adv)])
        again, note = A.compute_advantages(old, "grpo")
        self.assertEqual(again, adv)
        self.assertIsNone(note)
        self.assertIsNotNone(A.compute_advantages(old, "rloo")[1])

    def test_multi_trace_rollout_counts_once_and_every_trace_gets_its_advantage(self):
        recs = lines([
            record("a", [trace([1], [2, 3], [1, 1]), trace([1], [4], [1], kind="compaction"), trace([1], [5], [1], kind="subagent")], reward=1.0),
            record("b", [trace([1], [2], [1])], reward=0.0),
        ])
        adv, _ = A.compute_advantages(recs, "dr-grpo")
        self.assertEqual(adv, [0.5, -0.5])  # mean over 2 rollouts, not over 4 traces
        rollouts = D.build_rollouts(recs, adv, False, 16)
        self.assertEqual([s.advantage for s in rollouts[0].samples], [0.5, 0.5, 0.5])
        self.assertEqual({s.rollout for s in rollouts[0].samples}, {0})

    def test_records_without_group_are_groups_of_their_own(self):
        # no group_id (polar build --group-by none): no baseline, advantage 0; not pooled into one group,
        # and not grouped by task_id behind the build's back
        recs = lines([record("a", [trace([1], [2], [1])], reward=1.0, group=None),
                      record("b", [trace([1], [2], [1])], reward=0.0, group=None),
                      record("c", [trace([1], [2], [1])], reward=1.0), record("d", [trace([1], [2], [1])], reward=0.0)])
        recs[0]["task_id"] = recs[1]["task_id"] = "same-task"
        self.assertEqual(A.compute_advantages(recs, "rloo")[0], [0.0, 0.0, 1.0, -1.0])

    def test_null_reward_is_refused(self):
        recs = lines([record("a", [trace([1], [2], [1])]), record("b", [trace([1], [2], [1])], reward=1.0)])
        with self.assertRaises(A.AdvantageError) as ctx:
            A.compute_advantages(recs, "rloo")
        self.assertIn("line 1: reward", str(ctx.exception))


class Samples(unittest.TestCase):
    def test_alignment_of_trained_positions(self):
        recs = lines([record("a", [trace([5, 6], [7, 8, 9], [1, 0, 1], [-0.5, 0.0, -0.25])], reward=1.0)])
        (r,) = D.build_rollouts(recs, zeros(recs), True, 16)
        s = r.samples[0]
        self.assertEqual(s.input_ids, [5, 6, 7, 8, 9])
        self.assertEqual(s.sel_pos, [1, 3])  # position p predicts token p + 1
        self.assertEqual(s.sel_tgt, [7, 9])
        self.assertEqual(s.sampling_logp, [-0.5, -0.25])

    def test_missing_logprobs_refused_when_tis_is_on(self):
        recs = lines([record("a", [trace([1], [2], [1])], reward=1.0)])
        with self.assertRaises(D.TrajectoryError) as ctx:
            D.build_rollouts(recs, zeros(recs), True, 16)
        self.assertIn("response_logprobs", str(ctx.exception))
        D.build_rollouts(recs, zeros(recs), False, 16)  # opting out of the correction accepts it

    def test_token_outside_vocabulary(self):
        recs = lines([record("a", [trace([1], [40], [1])], reward=1.0)])
        with self.assertRaises(D.TrajectoryError) as ctx:
            D.build_rollouts(recs, zeros(recs), False, 16)
        self.assertIn("vocabulary", str(ctx.exception))

    def test_read_records_reports_line(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "t.jsonl")
            with open(p, "w") as fh:
                fh.write('{"traces": [1]}\n{bad\n')
            with self.assertRaises(D.TrajectoryError) as ctx:
                D.read_records(p)
            self.assertIn(":2:", str(ctx.exception))


class Packing(unittest.TestCase):
    def test_budget_respected_all_samples_kept_no_padding(self):
        recs = lines(helpers.random_records(n_groups=3, group_size=5, logprobs=False))
        for i, r in enumerate(recs):  # varied lengths
            r["traces"][0]["response_ids"] = r["traces"][0]["response_ids"][: 3 + i % 5]
            r["traces"][0]["loss_mask"] = [1] * (3 + i % 5)
        rollouts = D.build_rollouts(recs, zeros(recs), False, 32)
        samples = [s for r in rollouts for s in r.samples]
        micros = D.pack(samples, 30)
        self.assertTrue(all(m.tokens <= 30 for m in micros))
        self.assertEqual(sum(m.tokens for m in micros), sum(s.length for s in samples))
        self.assertEqual(sorted(id(s) for m in micros for s in m.samples), sorted(id(s) for s in samples))
        self.assertLess(len(micros), len(samples))
        for m in micros:  # position ids restart at each sequence boundary
            starts = [0]
            for n in m.seg_lens[:-1]:
                starts.append(starts[-1] + n)
            self.assertEqual([int(m.position_ids[s]) for s in starts], [0] * len(starts))
        with self.assertRaises(D.TrajectoryError):
            D.pack(samples, 5)


if __name__ == "__main__":
    unittest.main()
