import os
import tempfile
import unittest

import torch

import helpers
from helpers import record, trace
from polar_train import data as D
from polar_train.model import load_policy


def lines(records):
    for i, r in enumerate(records, 1):
        r["_line"] = i
    return records


class Advantages(unittest.TestCase):
    def recs(self):
        return lines([record("a%d" % i, [trace([1], [2], [1])], reward=r) for i, r in enumerate([1.0, 0.0, 0.0, 1.0])])

    def test_rloo_default(self):
        adv = D.compute_advantages(self.recs(), "rloo")
        self.assertEqual(adv, [1 - 1 / 3, 0 - 2 / 3, 0 - 2 / 3, 1 - 1 / 3])

    def test_grpo_unbiased_std(self):
        adv = D.compute_advantages(self.recs(), "grpo")
        std = (4 * 0.25 / 3) ** 0.5
        for a, r in zip(adv, [1, 0, 0, 1]):
            self.assertAlmostEqual(a, (r - 0.5) / (std + 1e-6), places=9)

    def test_dr_grpo_mean_centred(self):
        self.assertEqual(D.compute_advantages(self.recs(), "dr-grpo"), [0.5, -0.5, -0.5, 0.5])

    def test_build_step_advantage_wins_and_groups_are_separate(self):
        recs = self.recs()
        recs[0]["advantage"] = 7.0
        recs[2]["group_id"] = recs[2]["task_id"] = "other"  # alone in its group -> 0
        adv = D.compute_advantages(recs, "dr-grpo")
        self.assertEqual(adv[0], 7.0)
        self.assertEqual(adv[2], 0.0)
        self.assertAlmostEqual(adv[1], 0.0 - 2 / 3)

    def test_multi_trace_rollout_counts_once_and_every_trace_gets_its_advantage(self):
        recs = lines([
            record("a", [trace([1], [2, 3], [1, 1]), trace([1], [4], [1], kind="compaction"), trace([1], [5], [1], kind="subagent")], reward=1.0),
            record("b", [trace([1], [2], [1])], reward=0.0),
        ])
        adv = D.compute_advantages(recs, "dr-grpo")
        self.assertEqual(adv, [0.5, -0.5])  # mean over 2 rollouts, not over 4 traces
        rollouts = D.build_rollouts(recs, "dr-grpo", False, 16)
        self.assertEqual([s.advantage for s in rollouts[0].samples], [0.5, 0.5, 0.5])
        self.assertEqual({s.rollout for s in rollouts[0].samples}, {0})

    def test_records_without_group_get_no_advantage(self):
        # neither group_id nor task_id: no baseline, advantage 0 (as `polar build` leaves them ungrouped);
        # they are not pooled into one group
        recs = lines([record("a", [trace([1], [2], [1])], reward=1.0, group=None),
                      record("b", [trace([1], [2], [1])], reward=0.0, group=None),
                      record("c", [trace([1], [2], [1])], reward=1.0), record("d", [trace([1], [2], [1])], reward=0.0)])
        self.assertEqual(D.compute_advantages(recs, "rloo"), [0.0, 0.0, 1.0, -1.0])
        self.assertEqual(D.ungrouped(recs), 2)

    def test_null_reward_and_advantage_is_refused(self):
        recs = lines([record("a", [trace([1], [2], [1])]), record("b", [trace([1], [2], [1])], reward=1.0)])
        with self.assertRaises(D.TrajectoryError):
            D.compute_advantages(recs, "rloo")


class Samples(unittest.TestCase):
    def test_alignment_of_trained_positions(self):
        recs = lines([record("a", [trace([5, 6], [7, 8, 9], [1, 0, 1], [-0.5, 0.0, -0.25])], advantage=1.0)])
        (r,) = D.build_rollouts(recs, "rloo", True, 16)
        s = r.samples[0]
        self.assertEqual(s.input_ids, [5, 6, 7, 8, 9])
        self.assertEqual(s.sel_pos, [1, 3])  # position p predicts token p + 1
        self.assertEqual(s.sel_tgt, [7, 9])
        self.assertEqual(s.sampling_logp, [-0.5, -0.25])

    def test_missing_logprobs_refused_when_tis_is_on(self):
        recs = lines([record("a", [trace([1], [2], [1])], advantage=1.0)])
        with self.assertRaises(D.TrajectoryError) as ctx:
            D.build_rollouts(recs, "rloo", True, 16)
        self.assertIn("response_logprobs", str(ctx.exception))
        D.build_rollouts(recs, "rloo", False, 16)  # opting out of the correction accepts it

    def test_token_outside_vocabulary(self):
        recs = lines([record("a", [trace([1], [40], [1])], advantage=1.0)])
        with self.assertRaises(D.TrajectoryError) as ctx:
            D.build_rollouts(recs, "rloo", False, 16)
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
        rollouts = D.build_rollouts(recs, "rloo", False, 32)
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
