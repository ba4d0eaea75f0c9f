"""The sampling check: are these trajectories this model's own samples? (issue 31 item 4)

Before the first update, the model's logprobs of the first micro-batch's trained tokens are compared with
the logprobs the sampler recorded; when the trajectories name the policy version that sampled them (polar
loop), only those of the version being trained. `trainer` is the Trainer (trainer.py)."""
from typing import Optional

import torch


class SamplingMismatch(ValueError):
    """The trajectories were sampled from another model: their logprobs disagree with this one's."""
    kind = "sampling_mismatch"


def check_sampling(trainer) -> Optional[float]:
    """The trajectories' sampling logprobs against this model's on the first micro-batch of the first
    batch, before any update: the mean |difference| per trained token. Sampling noise (bf16 servers, fp32
    exports, temperature and top-p renormalisation) stays well under a nat; another model is off by
    several (a random token under a 150k vocabulary: ~12). Beyond `sampling_gap_limit` training refuses
    with TIS on (its weights would be ~0 and nothing learned) and warns without it."""
    limit = trainer.cfg["sampling_gap_limit"]
    if not limit:  # 0: no check
        return None
    rollouts = trainer.batch_rollouts(trainer.data_step)
    version = trainer.cfg.get("policy_version")
    if version is not None:
        # polar loop --max-staleness: a sample of an older policy differs from this one by what the steps
        # since have learnt, which is no sign of another model: only the samples of the policy being
        # trained are compared (found by the real tiny loop at K=1: 10 nats a token after one step)
        own = [r for r in rollouts if r.policy_version is None or r.policy_version == version]
        if not own:
            trainer.log("sampling check skipped: every rollout of the first batch was sampled by an older policy "
                        "than version %d (--max-staleness)" % version)
            return None
        rollouts = own
    minis = trainer.prepare(rollouts)
    share = trainer._rank_share(minis[0])[:1]  # every rank runs one forward (FSDP collectives)
    total = torch.zeros(2, dtype=torch.float64)
    trainer.model.eval()
    for mb in share:
        logp = trainer._forward(trainer.model, mb, False)[0].float().cpu()
        if mb.sampling_logp is not None and mb.weights.abs().sum() > 0:
            total += torch.tensor([float((logp - mb.sampling_logp).abs().sum()), float(logp.shape[0])],
                                  dtype=torch.float64)
    if trainer.dist:
        import torch.distributed as dist

        dist.all_reduce(total)
    if total[1] == 0:
        return None
    gap = float(total[0] / total[1])
    what = "%.3f nats per token over %d tokens" % (gap, int(total[1]))
    if gap <= limit:
        trainer.log("sampling check: the trajectories' logprobs match the model's within %s" % what,
                 sampling_gap=gap)
        return gap
    message = ("the trajectories' sampling logprobs differ from %s's own by %s of the first batch (limit %g): "
               "they were sampled from another model" % (getattr(trainer.policy, "source", trainer.base_model), what, limit))
    if trainer.cfg["tis"]:
        raise SamplingMismatch(message)
    trainer.log("warning: %s; training on without the off-policy correction (--no-tis)" % message,
             sampling_gap=gap)
    return gap

