"""The advantage estimators, registered once, here, in the trainer (as verl registers its own in its
trainer: verl/trainer/ppo/core_algos.py, `register_adv_est`, read at commit 012be9d9). `polar build`
writes each rollout's reward and GRPO group (trajectory format v2, docs/trajectory-format.md); the
trainer owns the advantages: one value per rollout from the rewards of its group, carried by every trace
of the rollout. The names are schema.json's `advantage` enum and the default is schema.json's (both from
src/train/options.ts); tests/test_data.py checks that the registry and the enum agree.

A group is the rollouts with the same `group_id`; a rollout without one is a group of its own. A group of
one has no baseline: advantage 0 under every estimator, as in a group whose rewards are all equal.
"""
import math
from typing import Callable, Dict, List, Optional, Sequence, Tuple

#: name -> fn(rewards of one group, of size >= 2) -> one advantage per reward
ESTIMATORS: Dict[str, Callable[[Sequence[float]], List[float]]] = {}

#: GRPO's std normaliser is (std + EPS)
EPS = 1e-6


class AdvantageError(ValueError):
    pass


def register(name: str):
    def decorator(fn):
        if name in ESTIMATORS:
            raise ValueError("advantage estimator %r is registered twice" % name)
        ESTIMATORS[name] = fn
        return fn

    return decorator


def _mean(rewards: Sequence[float]) -> float:
    return sum(rewards) / len(rewards)


@register("grpo")
def grpo(rewards: Sequence[float]) -> List[float]:
    """A_i = (R_i - mean R) / (unbiased std R + eps) (DeepSeekMath)"""
    m = _mean(rewards)
    std = math.sqrt(sum((r - m) ** 2 for r in rewards) / (len(rewards) - 1))
    return [(r - m) / (std + EPS) for r in rewards]


@register("dr-grpo")
def dr_grpo(rewards: Sequence[float]) -> List[float]:
    """A_i = R_i - mean R (Dr. GRPO: no std normalisation)"""
    m = _mean(rewards)
    return [r - m for r in rewards]


@register("rloo")
def rloo(rewards: Sequence[float]) -> List[float]:
    """A_i = R_i - mean of the other G-1 rewards (leave-one-out)"""
    total = sum(rewards)
    n = len(rewards)
    return [r - (total - r) / (n - 1) for r in rewards]


def group_advantages(rewards: Sequence[float], mode: str) -> List[float]:
    """The advantage of each member of one group, in order."""
    if mode not in ESTIMATORS:
        raise AdvantageError("unknown advantage estimator %r (%s)" % (mode, ", ".join(ESTIMATORS)))
    if len(rewards) < 2:
        return [0.0 for _ in rewards]
    return ESTIMATORS[mode](rewards)


def group_key(record: dict, index: int) -> str:
    """The record's GRPO group: its group_id, or a group of its own."""
    group = record.get("group_id")
    return group if group is not None else "\0rollout-%d" % index


def compute_advantages(records: Sequence[dict], mode: str) -> Tuple[List[float], Optional[str]]:
    """Per-rollout advantages from the rewards of each group, and a note when trajectory v1 records
    carry advantages (an older `polar build` computed them) that differ from these."""
    groups: Dict[str, List[int]] = {}
    for i, rec in enumerate(records):
        if rec.get("reward") is None:
            raise AdvantageError(
                "line %d: reward: null: nothing to train on (the advantage comes from the rewards of the group)"
                % rec["_line"]
            )
        groups.setdefault(group_key(rec, i), []).append(i)
    out: List[float] = [0.0] * len(records)
    for members in groups.values():
        for i, a in zip(members, group_advantages([float(records[i]["reward"]) for i in members], mode)):
            out[i] = a
    return out, _recorded_note(records, out, mode)


def _recorded_note(records: Sequence[dict], computed: Sequence[float], mode: str) -> Optional[str]:
    recorded = [(r["advantage"], a) for r, a in zip(records, computed)
                if r.get("v") == 1 and r.get("advantage") is not None]
    if not recorded:
        return None
    differ = sum(1 for old, new in recorded if abs(float(old) - new) > 1e-6 * max(1.0, abs(new)))
    if not differ:
        return None
    return ("%d of %d trajectory v1 records carry an advantage from an older polar build that differs from "
            "--advantage %s's: polar train computes its own from the rewards and groups; if those records were "
            "built with another --advantage, train with that one (%s)"
            % (differ, len(recorded), mode, ", ".join(ESTIMATORS)))
