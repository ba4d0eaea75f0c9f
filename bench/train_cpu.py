#!/usr/bin/env python3
"""The trainer's overhead on the CPU: `npm run bench -- train` (or .venv/bin/python bench/train_cpu.py).

For a tiny random Qwen3 and Qwen3.5 (transformers classes from a config, Qwen3 vocabulary), one GRPO step of
polar's trainer (polar_train.trainer.Trainer: packing, chunked logprobs over trained positions only, the
clipped loss, AdamW) against a plain transformers forward + backward of the same tokens in the same process:
each sequence through model(input_ids).logits, log_softmax over the whole [T, V], the masked token-mean of
the trained tokens' logprobs times the advantage, backward, one AdamW step. Both without gradient
checkpointing and in fp32, so the ratio is the trainer's own cost (or saving). Timed steps follow one warm-up
step; the median is reported. Writes bench/out/train_cpu.json.
"""
import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src", "train", "worker"))

import torch  # noqa: E402

from polar_train.model import HFPolicy  # noqa: E402
from polar_train.tiny import build_tiny  # noqa: E402
from polar_train.trainer import Trainer  # noqa: E402

VOCAB = 151669


def make_records(n, length, seed=0):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        prompt = [rng.randrange(VOCAB) for _ in range(length // 4)]
        resp = [rng.randrange(VOCAB) for _ in range(length - len(prompt))]
        block = max(1, len(resp) // 6)
        mask = [1 if (j // block) % 2 == 0 else 0 for j in range(len(resp))]  # turns and tool output
        out.append({"v": 2, "id": "r%d" % i, "group_id": "g", "task_id": "g", "reward": float(i % 2),
                    "traces": [{"prompt_ids": prompt, "response_ids": resp, "loss_mask": mask,
                                "response_logprobs": None}]})
    return out


def trainer_steps(spec, traj, args):
    cfg = {"trajectories": traj, "model": spec, "out": tempfile.mkdtemp(prefix="polar-bench-"), "device": "cpu",
           "lr": 1e-6, "batch_rollouts": args.seqs, "max_steps": 1 + args.steps, "save_every": 0, "tis": False,
           "gradient_checkpointing": False, "bf16": False, "micro_batch_tokens": args.seqs * args.len}
    events = []
    t = Trainer(cfg, events.append)
    t.setup()
    t.save = lambda: None
    t.train()
    tokens = sum(s.length for r in t.rollouts for s in r.samples)
    # step_time_s: the whole step (packing, forward, loss, backward, optimiser), as the trainer reports it
    return tokens, [e["step_time_s"] for e in events if e.get("event") == "step"][1:]


def plain_steps(spec, records, args):
    model = build_tiny(spec).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    seqs = []
    for r in records:
        tr = r["traces"][0]
        ids = tr["prompt_ids"] + tr["response_ids"]
        p = len(tr["prompt_ids"])
        pos = [p + j - 1 for j, m in enumerate(tr["loss_mask"]) if m]
        tgt = [tr["response_ids"][j] for j, m in enumerate(tr["loss_mask"]) if m]
        seqs.append((torch.tensor([ids]), torch.tensor(pos), torch.tensor(tgt), 1.0 if r["reward"] else -1.0))
    n_trained = sum(len(s[2]) for s in seqs)
    times = []
    for _ in range(1 + args.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        for ids, pos, tgt, adv in seqs:
            logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), -1)[pos, tgt]
            (-(adv * logp).sum() / n_trained).backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    return sum(int(s[0].shape[1]) for s in seqs), times[1:]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seqs", type=int, default=4)
    p.add_argument("--len", type=int, default=128)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--out", default=os.path.join(HERE, "out", "train_cpu.json"))
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    records = make_records(args.seqs, args.len)
    traj = os.path.join(tempfile.mkdtemp(prefix="polar-bench-data-"), "traj.jsonl")
    with open(traj, "w") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    results = {"torch": torch.__version__, "threads": torch.get_num_threads(), "seqs": args.seqs, "len": args.len,
               "runs": {}}
    print("trainer step vs plain transformers forward+backward, CPU, %d threads, %d x %d tokens, vocab %d"
          % (torch.get_num_threads(), args.seqs, args.len, VOCAB))
    for arch in ("qwen3", "qwen3_5"):
        spec = "tiny:arch=%s,vocab=%d,dim=%d,layers=%d,heads=4,kv_heads=2,seed=0" % (arch, VOCAB, args.dim, args.layers)
        tokens, polar = trainer_steps(spec, traj, args)
        ptokens, plain = plain_steps(spec, records, args)
        assert tokens == ptokens
        polar_tps = tokens / statistics.median(polar)
        plain_tps = tokens / statistics.median(plain)
        results["runs"][arch] = {"spec": spec, "tokens": tokens, "polar_tokens_per_s": polar_tps,
                                 "plain_tokens_per_s": plain_tps, "overhead": plain_tps / polar_tps,
                                 "polar_s": polar, "plain_s": plain}
        print("  %-8s polar %8.0f tok/s   plain %8.0f tok/s   overhead (polar time / plain time) %.2fx"
              % (arch, polar_tps, plain_tps, plain_tps / polar_tps))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(results, fh, indent=2)
    print("  written to %s" % args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
