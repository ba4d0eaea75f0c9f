import math
import unittest

import numpy as np
import torch

import helpers  # noqa: F401  (puts polar_train on sys.path)
from polar_train.loss import aggregation_weights, chunked_logprobs, kl_k3, policy_loss, tis_weights


def np_loss(logp, old, adv, w, cl, ch, tis=None, ref=None, beta=0.0):
    """The formula of docs/train.md, written out directly in NumPy."""
    r = np.exp(logp - old)
    per = np.maximum(-adv * r, -adv * np.clip(r, 1 - cl, 1 + ch))
    if tis is not None:
        per = per * tis
    if ref is not None and beta:
        d = ref - logp
        per = per + beta * (np.exp(d) - d - 1)
    return float((per * w).sum())


class LossFormula(unittest.TestCase):
    def setUp(self):
        self.logp = np.array([-1.0, -2.0, -0.5, -3.0, -1.2, -0.1])
        self.old = np.array([-1.1, -1.5, -0.5, -3.4, -1.0, -0.4])
        self.adv = np.array([1.0, 1.0, -0.5, -0.5, 2.0, -1.0])
        self.w = np.full(6, 1 / 6)

    def t(self, a):
        return torch.tensor(a, dtype=torch.float64)

    def test_loss_matches_numpy_on_hand_made_batch(self):
        mu = np.array([-1.3, -1.4, -0.9, -3.0, -1.0, -0.3])
        tis = np.minimum(np.exp(self.old - mu), 2.0)
        ref = np.array([-1.0, -1.8, -0.7, -2.9, -1.1, -0.2])
        want = np_loss(self.logp, self.old, self.adv, self.w, 0.2, 0.28, tis, ref, 0.05)
        got, _ = policy_loss(self.t(self.logp), self.t(self.old), self.t(self.adv), self.t(self.w), 0.2, 0.28,
                             tis_weights(self.t(self.old), self.t(mu), 2.0), self.t(ref), 0.05)
        self.assertAlmostEqual(float(got), want, places=10)

    def test_ratio_one_gives_minus_weighted_advantage(self):
        got, m = policy_loss(self.t(self.old), self.t(self.old), self.t(self.adv), self.t(self.w))
        self.assertAlmostEqual(float(got), float(-(self.adv * self.w).sum()), places=12)
        self.assertEqual(float(m["clip_low_count"] + m["clip_high_count"]), 0.0)

    def test_clip_high_and_low_are_separate(self):
        # A > 0: ratio 1.25 is inside 1 + 0.28 (gradient flows), ratio 1.35 is clipped (no gradient)
        # A < 0: ratio 0.85 is inside 1 - 0.2, ratio 0.75 is clipped
        ratios = torch.tensor([1.25, 1.35, 0.85, 0.75], dtype=torch.float64)
        adv = torch.tensor([1.0, 1.0, -1.0, -1.0], dtype=torch.float64)
        old = torch.zeros(4, dtype=torch.float64)
        logp = torch.log(ratios).requires_grad_(True)
        w = torch.ones(4, dtype=torch.float64)
        loss, m = policy_loss(logp, old, adv, w, 0.2, 0.28)
        loss.backward()
        g = logp.grad.tolist()
        self.assertAlmostEqual(g[0], -1.25, places=12)  # d(-A r)/d logp = -A r
        self.assertEqual(g[1], 0.0)
        self.assertAlmostEqual(g[2], 0.85, places=12)
        self.assertEqual(g[3], 0.0)
        self.assertEqual(float(m["clip_high_count"]), 1.0)
        self.assertEqual(float(m["clip_low_count"]), 1.0)
        # the pessimistic branch: A > 0 with ratio below 1 - clip_low is NOT clipped (gradient flows)
        lp2 = torch.log(torch.tensor([0.5], dtype=torch.float64)).requires_grad_(True)
        l2, _ = policy_loss(lp2, torch.zeros(1, dtype=torch.float64), torch.ones(1, dtype=torch.float64),
                            torch.ones(1, dtype=torch.float64), 0.2, 0.28)
        l2.backward()
        self.assertAlmostEqual(float(lp2.grad), -0.5, places=12)

    def test_tis_weights_truncate_and_carry_no_gradient(self):
        old = torch.tensor([-1.0, -1.0, -1.0, -5.0], requires_grad=True)
        mu = torch.tensor([-1.0, -2.0, -0.5, -1.0])
        w = tis_weights(old, mu, 2.0)
        self.assertFalse(w.requires_grad)
        want = [1.0, 2.0, math.exp(-0.5), math.exp(-4.0)]  # exp(1) = 2.718 is capped at 2
        for a, b in zip(w.tolist(), want):
            self.assertAlmostEqual(a, b, places=6)
        # TIS multiplies the policy-gradient term per token
        logp = torch.zeros(4, dtype=torch.float64, requires_grad=True)
        loss, _ = policy_loss(logp, torch.zeros(4, dtype=torch.float64), torch.ones(4, dtype=torch.float64),
                              torch.ones(4, dtype=torch.float64), tis=w.double())
        loss.backward()
        for a, b in zip(logp.grad.tolist(), want):
            self.assertAlmostEqual(a, -b, places=6)

    def test_kl_k3_formula_zero_at_equality_and_clamped(self):
        logp = torch.tensor([-1.0, -2.0, -1.0, -40.0])
        ref = torch.tensor([-1.0, -1.5, -3.0, 0.0])
        k = kl_k3(logp, ref).tolist()
        self.assertEqual(k[0], 0.0)
        d = 0.5
        self.assertAlmostEqual(k[1], math.exp(d) - d - 1, places=6)
        d = -2.0
        self.assertAlmostEqual(k[2], math.exp(d) - d - 1, places=6)
        self.assertEqual(k[3], 10.0)  # log-ratio 40 -> clamped to 20 -> value clamped to 10
        self.assertTrue(all(v >= 0 for v in k))

    def test_kl_coefficient_zero_ignores_reference(self):
        a, _ = policy_loss(self.t(self.logp), self.t(self.old), self.t(self.adv), self.t(self.w))
        b, _ = policy_loss(self.t(self.logp), self.t(self.old), self.t(self.adv), self.t(self.w),
                           ref_logp=self.t(self.logp + 3), kl_coef=0.0)
        self.assertEqual(float(a), float(b))


class Aggregation(unittest.TestCase):
    # rollout 0: 2 traces with 1 + 3 trained tokens; rollout 1: one trace with 2 tokens
    ridx = torch.tensor([0, 0, 0, 0, 1, 1])

    def test_token_mean(self):
        w = aggregation_weights(self.ridx, "token-mean")
        self.assertTrue(torch.allclose(w, torch.full((6,), 1 / 6)))

    def test_seq_mean_token_mean_counts_a_multi_trace_rollout_once(self):
        w = aggregation_weights(self.ridx, "seq-mean-token-mean").tolist()
        for v in w[:4]:
            self.assertAlmostEqual(v, 1 / (2 * 4))
        for v in w[4:]:
            self.assertAlmostEqual(v, 1 / (2 * 2))
        self.assertAlmostEqual(sum(w), 1.0, places=6)  # each rollout weighs 1/2, however many traces

    def test_seq_mean_token_sum(self):
        w = aggregation_weights(self.ridx, "seq-mean-token-sum")
        self.assertTrue(torch.allclose(w, torch.full((6,), 0.5)))

    def test_dr_grpo_constant_normaliser(self):
        w = aggregation_weights(self.ridx, "dr-grpo", norm_tokens=100)
        self.assertTrue(torch.allclose(w, torch.full((6,), 1 / 200)))
        # a constant: does not depend on how many tokens the rollouts have
        w2 = aggregation_weights(torch.tensor([0, 1]), "dr-grpo", norm_tokens=100)
        self.assertAlmostEqual(float(w2[0]), 1 / 200)
        with self.assertRaises(ValueError):
            aggregation_weights(self.ridx, "dr-grpo")

    def test_unknown_mode(self):
        with self.assertRaises(ValueError):
            aggregation_weights(self.ridx, "bogus")


class ChunkedLogprobs(unittest.TestCase):
    def test_equals_full_log_softmax_values_and_gradients(self):
        torch.manual_seed(0)
        h = torch.randn(13, 8, dtype=torch.float64, requires_grad=True)
        wt = torch.randn(50, 8, dtype=torch.float64, requires_grad=True)
        tgt = torch.randint(0, 50, (13,))
        full = torch.log_softmax(h @ wt.t(), -1)
        want = full.gather(-1, tgt[:, None]).squeeze(-1)
        p = full.exp()
        want_ent = -(p * full).sum(-1)
        want.sum().backward()
        gh, gw = h.grad.clone(), wt.grad.clone()
        for chunk in (1, 4, 13, 64):
            h.grad = None
            wt.grad = None
            lp, ent = chunked_logprobs(h, wt, tgt, chunk)
            self.assertTrue(torch.allclose(lp, want, atol=1e-10))
            self.assertTrue(torch.allclose(ent.double(), want_ent, atol=1e-10))
            lp.sum().backward()
            self.assertTrue(torch.allclose(h.grad, gh, atol=1e-10))
            self.assertTrue(torch.allclose(wt.grad, gw, atol=1e-10))

    def test_rows_not_selected_get_exactly_zero_gradient(self):
        # mask-0 positions are never fed to the head, so their hidden states get exactly zero gradient
        torch.manual_seed(1)
        h = torch.randn(10, 8, requires_grad=True)
        wt = torch.randn(20, 8)
        sel = torch.tensor([2, 3, 7])
        lp, _ = chunked_logprobs(h[sel], wt, torch.tensor([1, 5, 9]), 2)
        lp.sum().backward()
        zero_rows = [i for i in range(10) if i not in (2, 3, 7)]
        self.assertTrue(torch.equal(h.grad[zero_rows], torch.zeros(len(zero_rows), 8)))
        self.assertTrue(bool((h.grad[sel].abs().sum(-1) > 0).all()))


if __name__ == "__main__":
    unittest.main()
