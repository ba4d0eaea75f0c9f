"""Pure loss functions: chunked token log-probabilities, clipped policy loss, TIS, k3 KL, aggregation.

Everything here works on flat per-token tensors of the trained (mask-1) tokens only: the trainer never
computes logits for prompt, tool-output or template tokens. Formulas are documented in docs/train.md.

Formula choices were shaped by (read as reference, not copied):
- verl `verl/trainer/ppo/core_algos.py`: separate low/high clip (clip-higher, DAPO), k3 "low_var_kl" with a
  clamped log-ratio and clamped result, loss aggregation modes (token-mean, seq-mean-token-mean,
  seq-mean-token-sum-norm), truncated importance sampling weights multiplied into the policy-gradient term.
- TRL `trl/trainer/grpo_trainer.py`: Dr. GRPO's constant normaliser (batch size x max completion length).
- OpenRLHF `openrlhf/models/loss.py`: clip fraction as the share of tokens where the clipped branch wins.
"""
from typing import Dict, Optional, Tuple

import torch
from torch.utils.checkpoint import checkpoint

LOG_RATIO_CLAMP = 20.0
KL_VALUE_CLAMP = 10.0

from .schema import AGGREGATIONS  # noqa: E402  (generated from the TypeScript schema)


def _chunk_logprobs(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, bias: Optional[torch.Tensor]):
    logits = hidden @ weight.t()
    if bias is not None:
        logits = logits + bias
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()  # log-softmax in fp32 even under bf16 autocast
    lse = torch.logsumexp(logits, dim=-1)
    logp = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - lse
    with torch.no_grad():
        probs = torch.softmax(logits, dim=-1)
        entropy = lse - (probs * logits).sum(-1)
    return logp, entropy.detach()


def chunked_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    chunk_size: int = 1024,
    bias: Optional[torch.Tensor] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """log pi(target | h) and the entropy of pi(. | h) for each row of hidden [N, D], with head weight [V, D].

    The [N, V] logits are never held at once: each chunk of `chunk_size` rows is computed, reduced to two
    numbers per row and dropped; under autograd each chunk is recomputed in backward (activation
    checkpointing), so peak memory is one [chunk_size, V] block in forward and in backward.
    """
    if hidden.shape[0] == 0:
        empty = hidden.new_zeros((0,), dtype=torch.float32) + weight.sum() * 0  # keeps the graph connected
        return empty, empty
    outs_lp, outs_ent = [], []
    use_ckpt = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    for start in range(0, hidden.shape[0], chunk_size):
        h = hidden[start : start + chunk_size]
        t = targets[start : start + chunk_size]
        if use_ckpt:
            lp, ent = checkpoint(_chunk_logprobs, h, weight, t, bias, use_reentrant=False)
        else:
            lp, ent = _chunk_logprobs(h, weight, t, bias)
        outs_lp.append(lp)
        outs_ent.append(ent)
    return torch.cat(outs_lp), torch.cat(outs_ent)


def tis_weights(old_logp: torch.Tensor, sampling_logp: torch.Tensor, cap: float) -> torch.Tensor:
    """Truncated importance sampling: min(pi_old / mu, cap) per token, no gradient.

    mu is the inference engine's sampling probability (captured), pi_old the trainer's recomputation.
    """
    log_w = torch.clamp(old_logp.detach() - sampling_logp.detach(), max=LOG_RATIO_CLAMP)
    return torch.clamp(torch.exp(log_w), max=cap)


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k3 estimator of KL(pi || pi_ref): exp(ref - logp) - (ref - logp) - 1, log-ratio clamped to +-20,
    value clamped to at most 10 (verl's low_var_kl). Non-negative, unbiased, low variance."""
    log_ratio = torch.clamp(ref_logp - logp, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    kl = torch.exp(log_ratio) - log_ratio - 1.0
    return torch.clamp(kl, min=-KL_VALUE_CLAMP, max=KL_VALUE_CLAMP)


def aggregation_weights(
    rollout_index: torch.Tensor,
    mode: str,
    norm_tokens: Optional[float] = None,
) -> torch.Tensor:
    """Per-token weights w_t so that the aggregated loss is sum_t w_t * l_t over one mini-batch.

    `rollout_index` [N] names the rollout each trained token belongs to (a rollout rebuilt as several
    traces has one index, so it counts once). Modes:
      token-mean           w = 1 / (trained tokens in the mini-batch)
      seq-mean-token-mean  w = 1 / (rollouts * trained tokens of the token's rollout)
      seq-mean-token-sum   w = 1 / rollouts
      dr-grpo              w = 1 / (rollouts * norm_tokens), a constant (Dr. GRPO)
    """
    n = rollout_index.shape[0]
    if n == 0:
        return torch.zeros(0, dtype=torch.float32)
    uniq, inverse, counts = torch.unique(rollout_index, return_inverse=True, return_counts=True)
    n_rollouts = float(uniq.shape[0])
    if mode == "token-mean":
        return torch.full((n,), 1.0 / n, dtype=torch.float32)
    if mode == "seq-mean-token-mean":
        return 1.0 / (n_rollouts * counts[inverse].to(torch.float32))
    if mode == "seq-mean-token-sum":
        return torch.full((n,), 1.0 / n_rollouts, dtype=torch.float32)
    if mode == "dr-grpo":
        if norm_tokens is None or norm_tokens <= 0:
            raise ValueError("dr-grpo aggregation needs a positive loss_norm_tokens")
        return torch.full((n,), 1.0 / (n_rollouts * float(norm_tokens)), dtype=torch.float32)
    raise ValueError("unknown loss aggregation %r (expected one of %s)" % (mode, ", ".join(AGGREGATIONS)))


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    weights: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    tis: Optional[torch.Tensor] = None,
    ref_logp: Optional[torch.Tensor] = None,
    kl_coef: float = 0.0,
) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    """The clipped GRPO objective, negated for minimisation, on trained tokens only.

    per-token l_t = max(-A r, -A clip(r, 1 - clip_low, 1 + clip_high)) * tis_t + kl_coef * k3_t
    loss = sum_t w_t l_t   (w_t from `aggregation_weights`; its sum over the mini-batch is the normaliser)

    Returns the loss and metric sums (weighted by w_t where a mean is meant, plain counts otherwise).
    """
    log_ratio = torch.clamp(logp - old_logp.detach(), -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = torch.exp(log_ratio)
    adv = advantages.to(ratio.dtype)
    pg_unclipped = -adv * ratio
    pg_clipped = -adv * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    pg = torch.max(pg_unclipped, pg_clipped)
    if tis is not None:
        pg = pg * tis.detach()
    per_token = pg
    kl = None
    if ref_logp is not None and kl_coef != 0.0:
        kl = kl_k3(logp, ref_logp.detach())
        per_token = per_token + kl_coef * kl
    w = weights.to(per_token.dtype)
    loss = (per_token * w).sum()
    with torch.no_grad():
        clipped = pg_clipped > pg_unclipped
        metrics = {
            "pg_loss": (pg * w).sum(),
            "clip_low_count": (clipped & (ratio < 1.0 - clip_low)).sum().to(torch.float32),
            "clip_high_count": (clipped & (ratio > 1.0 + clip_high)).sum().to(torch.float32),
            "ratio_sum": ratio.sum(),
            "tokens": torch.tensor(float(logp.shape[0])),
            "kl_sum": kl.sum() if kl is not None else torch.tensor(0.0),
        }
    return loss, metrics
