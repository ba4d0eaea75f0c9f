"""polar loop --max-staleness K on the trainer's side (data.check_staleness, trainer.py, metrics.py): a
trajectory more than K versions behind the trained policy is refused before any step, naming its line and
the bound, as is one newer than the policy or with a version that is not a whole number; records without
a version are left alone; the step reports the staleness max and mean of what it trained. The truncated
importance-sampling weights min(pi_old / mu, cap) are summarised per step (tis_mean, tis_min, tis_max,
tis_truncated_frac): checked by hand on StepMetrics, and in a real trainer step against the sampling
log-probabilities of the records (all at the cap when the sampler gave the tokens far less probability
than the trainer does, all at e^-3 when it gave them e^3 times more)."""
import math
import os
import unittest

import torch

import helpers
from polar_train import data as D
from polar_train.metrics import StepMetrics
from polar_train.model import load_policy
from test_train import Base, token_logprobs


def versioned(versions, seed=0):
    """random_records (two groups of four) with the given policy_version per record, in order."""
    recs = helpers.random_records(n_groups=2, group_size=4, seed=seed)
    for rec, v in zip(recs, versions):
        if v is not None:
            rec["policy_version"] = v
    return recs


def lines(recs):
    return [dict(r, _line=i + 1) for i, r in enumerate(recs)]


class CheckStaleness(unittest.TestCase):
    def test_within_the_bound_gives_max_and_mean_of_the_lags(self):
        got = D.check_staleness(lines(versioned([3, 3, 2, 2, 1, 1, 3, 3])), 3, 2)
        self.assertEqual(got, {"max": 2, "mean": 0.75})

    def test_one_version_too_old_is_refused_naming_its_line_and_the_bound(self):
        recs = lines(versioned([2, 2, 2, 2, 2, 0, 2, 2]))
        with self.assertRaises(D.TrajectoryError) as e:
            D.check_staleness(recs, 2, 1)
        msg = str(e.exception)
        self.assertIn("line 6", msg)
        self.assertIn("policy version 0, 2 versions behind the trained policy 2", msg)
        self.assertIn("max_staleness 1", msg)
        self.assertIn("refused", msg)
        # the same records at K = 2 pass
        self.assertEqual(D.check_staleness(recs, 2, 2)["max"], 2)

    def test_newer_than_the_trained_policy_and_bad_versions_are_refused(self):
        with self.assertRaisesRegex(D.TrajectoryError, r"line 1: policy_version 4 is newer than the policy being trained \(3\)"):
            D.check_staleness(lines(versioned([4])), 3, 1)
        for bad in (-1, 1.5, "2", True):
            with self.assertRaisesRegex(D.TrajectoryError, r"line 1: policy_version: expected a whole number >= 0"):
                D.check_staleness(lines(versioned([bad])), 3, 1)

    def test_no_version_known_or_none_recorded(self):
        self.assertIsNone(D.check_staleness(lines(versioned([0, 0])), None, 1))
        self.assertIsNone(D.check_staleness(lines(versioned([None] * 8)), 3, 1))
        # records without a version (a strict-loop build) are not counted
        self.assertEqual(D.check_staleness(lines(versioned([None, 2, None, 3])), 3, 1), {"max": 1, "mean": 0.5})
        # without a bound every lag is accepted and counted
        self.assertEqual(D.check_staleness(lines(versioned([0, 5])), 5, None), {"max": 5, "mean": 2.5})


class ImportanceRatioStatistics(unittest.TestCase):
    def test_step_metrics_by_hand(self):
        cap = 2.0
        m = StepMetrics()
        zero = {k: torch.tensor(0.0) for k in ("pg_loss", "tokens", "clip_low_count", "clip_high_count", "ratio_sum", "kl_sum")}
        m.add_micro(torch.tensor(0.0), zero, torch.zeros(3), torch.tensor([0.5, 1.0, 2.0]), cap)
        m.add_micro(torch.tensor(0.0), zero, torch.zeros(2), torch.tensor([2.0, 1.5]), cap)
        m.add_micro(torch.tensor(0.0), zero, torch.zeros(0), torch.zeros(0), cap)  # an empty micro-batch
        r = m.result()
        self.assertAlmostEqual(r["tis_mean"], 7.0 / 5)
        self.assertEqual(r["tis_min"], 0.5)
        self.assertEqual(r["tis_max"], 2.0)
        self.assertAlmostEqual(r["tis_truncated_frac"], 2.0 / 5)

    def test_without_weights_the_statistics_are_null(self):
        m = StepMetrics()
        zero = {k: torch.tensor(0.0) for k in ("pg_loss", "tokens", "clip_low_count", "clip_high_count", "ratio_sum", "kl_sum")}
        m.add_micro(torch.tensor(0.0), zero, torch.zeros(2), None, 2.0)
        r = m.result()
        for k in ("tis_mean", "tis_min", "tis_max", "tis_truncated_frac"):
            self.assertIsNone(r[k], k)


def with_sampling_gap(recs, gap):
    """Each trained token's sampling log-probability set to the starting policy's own plus `gap`: the
    trainer's first step then sees pi_old / mu = exp(-gap) on every token."""
    policy = load_policy(helpers.TINY, torch.device("cpu"), False)
    for rec in recs:
        (t,) = rec["traces"]
        lp = iter(token_logprobs(policy, rec).tolist())
        t["response_logprobs"] = [next(lp) + gap if m else 0.0 for m in t["loss_mask"]]
    return recs


class TrainerStep(Base):
    def steps(self):
        return [e for e in self.events if e["event"] == "step"]

    def test_a_stale_trajectory_stops_the_run_before_any_step(self):
        recs = versioned([2, 2, 2, 2, 1, 1, 0, 2])
        with self.assertRaisesRegex(D.TrajectoryError, r"line 7: sampled by policy version 0, 2 versions behind"):
            self.run_trainer(recs, policy_version=2, max_staleness=1)
        self.assertEqual(self.steps(), [])
        self.assertFalse(os.path.exists(os.path.join(self.dir, "out", "metrics.jsonl")))

    def test_the_step_reports_staleness_and_importance_ratios(self):
        cap = 2.0
        # the sampler gave every token e^-5 of the trainer's probability: pi_old / mu = e^5, cut at the cap
        recs = with_sampling_gap(versioned([2, 2, 1, 1, 2, 2, 1, 2]), -5.0)
        self.run_trainer(recs, policy_version=2, max_staleness=1, tis_cap=cap, out=os.path.join(self.dir, "a"))
        (step,) = self.steps()
        self.assertEqual(step["staleness_max"], 1)
        self.assertAlmostEqual(step["staleness_mean"], 3 / 8)
        self.assertEqual(step["tis_max"], cap)
        self.assertEqual(step["tis_min"], cap)
        self.assertEqual(step["tis_truncated_frac"], 1.0)
        self.assertAlmostEqual(step["tis_mean"], cap, places=5)

        # e^3 of the trainer's probability: pi_old / mu = e^-3 on every token, none at the cap
        self.events.clear()
        recs = with_sampling_gap(versioned([2] * 8), 3.0)
        self.run_trainer(recs, policy_version=2, max_staleness=1, tis_cap=cap, out=os.path.join(self.dir, "b"))
        (step,) = self.steps()
        self.assertEqual(step["staleness_max"], 0)
        self.assertEqual(step["staleness_mean"], 0)
        self.assertEqual(step["tis_truncated_frac"], 0.0)
        for k in ("tis_min", "tis_mean", "tis_max"):
            self.assertAlmostEqual(step[k], math.exp(-3), delta=1e-3, msg=k)


if __name__ == "__main__":
    unittest.main()
