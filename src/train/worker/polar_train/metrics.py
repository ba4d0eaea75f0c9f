"""A training step's metrics (trainer.py): the loss and its parts, KL, clip fractions, entropy and the
truncated importance-sampling weights summed over micro-batches, gradient norms over updates, averaged
into the metrics.jsonl line of the step (schema.py METRICS names them)."""
import math
from typing import Dict, List, Optional

import torch


class StepMetrics:
    """Averages per-step metrics over micro-batches and updates."""

    def __init__(self):
        self.loss = 0.0
        self.pg = 0.0
        self.n_updates_loss = 0
        self.tokens = 0.0
        self.clip_low = 0.0
        self.clip_high = 0.0
        self.ratio = 0.0
        self.kl = 0.0
        self.entropy = 0.0
        self.tis = 0.0
        self.tis_tokens = 0.0
        self.tis_min: Optional[float] = None
        self.tis_max: Optional[float] = None
        self.tis_truncated = 0.0  # tokens whose weight hit tis_cap
        self.gnorms: List[float] = []
        self._update_loss = 0.0

    def add_micro(self, loss, m: Dict[str, torch.Tensor], entropy, tis, cap: float) -> None:
        self.loss += float(loss.detach())
        self.pg += float(m["pg_loss"])
        n = float(m["tokens"])
        self.tokens += n
        self.clip_low += float(m["clip_low_count"])
        self.clip_high += float(m["clip_high_count"])
        self.ratio += float(m["ratio_sum"])
        self.kl += float(m["kl_sum"])
        self.entropy += float(entropy.sum())
        if tis is not None:
            self.tis += float(tis.sum())
            self.tis_tokens += float(tis.shape[0])
            if tis.numel():  # min / max over the step, the share at the cap
                self.tis_min = min(float(tis.min()), self.tis_min if self.tis_min is not None else math.inf)
                self.tis_max = max(float(tis.max()), self.tis_max if self.tis_max is not None else -math.inf)
                self.tis_truncated += float((tis >= cap).sum())

    def add_update(self, gnorm: float) -> None:
        self.gnorms.append(gnorm)

    def result(self) -> dict:
        u = max(1, len(self.gnorms))
        t = max(1.0, self.tokens)
        return {
            "loss": self.loss / u,
            "pg_loss": self.pg / u,
            "kl": self.kl / t,
            "clip_frac": (self.clip_low + self.clip_high) / t,
            "clip_frac_low": self.clip_low / t,
            "clip_frac_high": self.clip_high / t,
            "ratio_mean": self.ratio / t,
            "entropy": self.entropy / t,
            "tis_mean": (self.tis / self.tis_tokens) if self.tis_tokens else None,
            # the importance ratio pi_old / mu per token, after truncation at tis_cap
            "tis_min": self.tis_min,
            "tis_max": self.tis_max,
            "tis_truncated_frac": (self.tis_truncated / self.tis_tokens) if self.tis_tokens else None,
            "grad_norm": sum(self.gnorms) / u,
            "grad_norm_max": max(self.gnorms) if self.gnorms else None,
        }


def batch_figures(rollouts) -> dict:
    """What the step trained on, as TRL logs it beside the loss: the rollouts' reward (mean, standard
    deviation; after --overlong penalty), the mean |advantage| (0 when every group scored alike: nothing to
    learn) and the mean response length in trained tokens (issue 47: a reward curve in metrics.jsonl)."""
    rewards = [float(r.reward) for r in rollouts if r.reward is not None]
    n = len(rewards)
    mean = sum(rewards) / n if n else None
    return {
        "reward_mean": mean,
        "reward_std": math.sqrt(sum((x - mean) ** 2 for x in rewards) / n) if n else None,
        "advantage_abs_mean": (sum(abs(float(r.advantage)) for r in rollouts) / len(rollouts)) if rollouts else None,
        "response_tokens_mean": (sum(r.trained_tokens for r in rollouts) / len(rollouts)) if rollouts else None,
    }
