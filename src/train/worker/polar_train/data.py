"""Trajectory JSONL -> training samples -> packed micro-batches.

One trajectory record is one rollout; each of its traces becomes one sample (prompt_ids + response_ids)
that carries the rollout's advantage (computed from the rewards of its group: advantage.py) and the
rollout's index, so a rollout rebuilt as several traces
counts once in group statistics and in per-rollout loss normalisation.

Packing: samples are placed into micro-batches of at most `micro_batch_tokens` tokens (first-fit
decreasing), concatenated without padding. Each micro-batch keeps per-sequence boundaries (`seg_lens`)
and position ids that restart at 0 for each sequence; the model keeps sequences independent (the tiny
model with a block-diagonal causal mask, Hugging Face models by running each sequence separately; see
model.py).
"""
import json
import math
import random
from typing import List, Optional, Sequence

import torch


class TrajectoryError(ValueError):
    pass


class Sample:
    __slots__ = ("input_ids", "sel_pos", "sel_tgt", "sampling_logp", "advantage", "rollout", "length")

    def __init__(self, input_ids, sel_pos, sel_tgt, sampling_logp, advantage, rollout):
        self.input_ids = input_ids  # List[int]
        self.sel_pos = sel_pos  # positions (within the sequence) whose next-token prediction is trained
        self.sel_tgt = sel_tgt  # the trained target ids
        self.sampling_logp = sampling_logp  # List[float] or None
        self.advantage = advantage
        self.rollout = rollout
        self.length = len(input_ids)


class Rollout:
    def __init__(self, index, record_id, group, reward, advantage, samples, policy_version=None):
        self.index = index
        self.policy_version = policy_version  # the policy that sampled it (polar loop), or None
        self.record_id = record_id
        self.group = group
        self.reward = reward
        self.advantage = advantage
        self.samples = samples  # List[Sample]

    @property
    def trained_tokens(self) -> int:
        return sum(len(s.sel_tgt) for s in self.samples)


def read_records(path: str) -> List[dict]:
    records = []
    with open(path, "r", encoding="utf8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TrajectoryError("%s:%d: not valid JSON (%s)" % (path, lineno, exc))
            if not isinstance(rec, dict) or not isinstance(rec.get("traces"), list) or not rec["traces"]:
                raise TrajectoryError("%s:%d: traces: missing or empty" % (path, lineno))
            rec["_line"] = lineno
            records.append(rec)
    if not records:
        raise TrajectoryError("%s: no trajectory records" % path)
    return records


def check_staleness(records: Sequence[dict], version, max_staleness):
    """polar loop --max-staleness: each record's `policy_version` against the version training starts
    from. A record more than `max_staleness` versions behind is refused (the loop drops such samples before
    they reach the trainer; one here is a bug or a hand-made file). Returns {max, mean} of the lags, or
    None when no version is known."""
    if version is None:
        return None
    lags = []
    for rec in records:
        pv = rec.get("policy_version")
        if pv is None:
            continue
        if isinstance(pv, bool) or not isinstance(pv, int) or pv < 0:  # JSON true is no version
            raise TrajectoryError("line %d: policy_version: expected a whole number >= 0, got %r" % (rec.get("_line", 0), pv))
        lag = version - pv
        if lag < 0:
            raise TrajectoryError("line %d: policy_version %d is newer than the policy being trained (%d)"
                                  % (rec.get("_line", 0), pv, version))
        if max_staleness is not None and lag > max_staleness:
            raise TrajectoryError("line %d: sampled by policy version %d, %d versions behind the trained policy %d "
                                  "(max_staleness %d): refused" % (rec.get("_line", 0), pv, lag, version, max_staleness))
        lags.append(lag)
    if not lags:
        return None
    return {"max": max(lags), "mean": sum(lags) / len(lags)}


def build_rollouts(records: Sequence[dict], advantages: Sequence[float], need_logprobs: bool, vocab_size: int) -> List[Rollout]:
    """The records as rollouts of samples, each rollout with its advantage (polar_train/advantage.py)."""
    rollouts = []
    for ri, (rec, adv) in enumerate(zip(records, advantages)):
        samples = []
        for ti, tr in enumerate(rec["traces"]):
            prompt = list(tr["prompt_ids"])
            resp = list(tr["response_ids"])
            mask = list(tr["loss_mask"])
            lps = tr.get("response_logprobs")
            where = "line %d: traces[%d]" % (rec["_line"], ti)
            if len(mask) != len(resp):
                raise TrajectoryError("%s.loss_mask: %d entries for %d response_ids" % (where, len(mask), len(resp)))
            if need_logprobs and lps is None:
                raise TrajectoryError(
                    "%s.response_logprobs: null, but the off-policy correction (TIS) needs sampling logprobs" % where
                )
            if lps is not None and len(lps) != len(resp):
                raise TrajectoryError("%s.response_logprobs: %d entries for %d response_ids" % (where, len(lps), len(resp)))
            ids = prompt + resp
            bad = [t for t in ids if t < 0 or t >= vocab_size]
            if bad:
                raise TrajectoryError("%s: token id %d is outside the model's vocabulary (size %d)" % (where, bad[0], vocab_size))
            if not prompt:
                # the first response token has no context to be predicted from
                mask = [0] + mask[1:] if mask else mask
            p = len(prompt)
            sel_pos, sel_tgt, slp = [], [], []
            for j, m in enumerate(mask):
                if m == 1:
                    sel_pos.append(p + j - 1)
                    sel_tgt.append(resp[j])
                    if lps is not None:
                        slp.append(float(lps[j]))
            samples.append(Sample(ids, sel_pos, sel_tgt, slp if lps is not None else None, adv, ri))
        rollouts.append(Rollout(ri, rec.get("id"), rec.get("group_id"), rec.get("reward"), adv, samples,
                                rec.get("policy_version")))
    return rollouts


class MicroBatch:
    """Samples packed into one token budget, concatenated without padding."""

    def __init__(self, samples: List[Sample]):
        self.samples = samples
        ids, pos, sel, tgt, slp, adv, roll, seg = [], [], [], [], [], [], [], []
        offset = 0
        has_lp = all(s.sampling_logp is not None for s in samples)
        for s in samples:
            ids.extend(s.input_ids)
            pos.extend(range(s.length))
            sel.extend(offset + p for p in s.sel_pos)
            tgt.extend(s.sel_tgt)
            if has_lp:
                slp.extend(s.sampling_logp)
            adv.extend([s.advantage] * len(s.sel_tgt))
            roll.extend([s.rollout] * len(s.sel_tgt))
            seg.append(s.length)
            offset += s.length
        self.input_ids = torch.tensor(ids, dtype=torch.long)
        self.position_ids = torch.tensor(pos, dtype=torch.long)
        self.seg_lens = seg
        self.sel_pos = torch.tensor(sel, dtype=torch.long)
        self.sel_tgt = torch.tensor(tgt, dtype=torch.long)
        self.sampling_logp = torch.tensor(slp, dtype=torch.float32) if has_lp else None
        self.advantages = torch.tensor(adv, dtype=torch.float32)
        self.rollout_index = torch.tensor(roll, dtype=torch.long)
        self.weights = torch.zeros(len(tgt), dtype=torch.float32)  # set per mini-batch
        self.old_logp: Optional[torch.Tensor] = None
        self.ref_logp: Optional[torch.Tensor] = None
        self.tis: Optional[torch.Tensor] = None

    @property
    def tokens(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def trained_tokens(self) -> int:
        return int(self.sel_tgt.shape[0])


def pack(samples: Sequence[Sample], budget: int) -> List[MicroBatch]:
    """First-fit decreasing into bins of at most `budget` tokens. A sample longer than the budget is an
    error (the launcher checks this before any GPU time is spent)."""
    order = sorted(samples, key=lambda s: -s.length)
    bins: List[List[Sample]] = []
    room: List[int] = []
    for s in order:
        if s.length > budget:
            raise TrajectoryError("a trace of %d tokens exceeds micro_batch_tokens=%d" % (s.length, budget))
        for b in range(len(bins)):
            if room[b] >= s.length:
                bins[b].append(s)
                room[b] -= s.length
                break
        else:
            bins.append([s])
            room.append(budget - s.length)
    return [MicroBatch(b) for b in bins]


def split_mini_batches(rollouts: Sequence[Rollout], n: int) -> List[List[Rollout]]:
    """Splits a batch into n mini-batches of whole rollouts (all traces of a rollout stay together)."""
    n = max(1, min(n, len(rollouts)))
    size = math.ceil(len(rollouts) / n)
    return [list(rollouts[i : i + size]) for i in range(0, len(rollouts), size)]


def epoch_order(n: int, seed: int, data_epoch: int, shuffle: bool = True) -> List[int]:
    order = list(range(n))
    if shuffle:
        random.Random(seed * 1_000_003 + data_epoch).shuffle(order)
    return order


def max_trained_tokens_per_rollout(rollouts: Sequence[Rollout]) -> int:
    return max((r.trained_tokens for r in rollouts), default=0)
