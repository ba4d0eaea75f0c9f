#!/usr/bin/env python3
"""GRPO training-step benchmark: polar's trainer against a naive padded, unchunked baseline.

On the GPU machine (torch 2.x + transformers), one command:

    .venv/bin/python bench/train_gpu.py        # Qwen3.5-architecture model (hybrid linear attention) from a
                                               # config, about 4B parameters, random weights, sequences up
                                               # to 16k tokens; then one LoRA step and one --gpus 1 FSDP
                                               # step; writes bench/out/train_gpu.json

On a CPU it proves the script works at tiny sizes with the same classes (`npm run bench -- train` runs it):

    .venv/bin/python bench/train_gpu.py --tiny

Both sides run the same rollouts (half of every sequence is mask-0 prompt/tool tokens) through one
optimiser step of the same loss:
- polar: the real trainer (polar_train.trainer.Trainer): sequences packed into --micro-batch-tokens budgets
  without padding, head applied only to the trained positions, logprobs in chunks (no [T x V] logits),
  gradient checkpointing, bf16 autocast.
- naive: sequences padded to the longest in a micro-batch of --naive-batch, full [B, T, V] logits and
  log_softmax, masked token-mean loss (the same gradient checkpointing and autocast, so the difference is
  padding and the logits). An out-of-memory baseline is reported as such.

Reported per side: real (non-padding) tokens/s, peak GPU memory, MFU = 6 * params * tokens/s (plus the
attention term 12 * layers * hidden * mean context) / peak bf16 FLOP/s (--peak-tflops, guessed from the
device name; omitted on CPU). Ratios polar/naive are printed from the same run.
"""
import argparse
import importlib.util
import json
import os
import random
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src", "train", "worker"))

import torch  # noqa: E402

from polar_train.trainer import Trainer  # noqa: E402

PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10": 125.0}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tiny", action="store_true", help="CPU-sized run of the same classes")
    p.add_argument("--arch", choices=["qwen3_5", "qwen3"], default="qwen3_5")
    p.add_argument("--skip-lora", action="store_true")
    p.add_argument("--skip-fsdp", action="store_true")
    p.add_argument("--fsdp-timeout", type=int, default=1800, help="seconds for the torchrun FSDP step")
    p.add_argument("--fsdp-step", action="store_true", help=argparse.SUPPRESS)  # the torchrun child
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    p.add_argument("--seq-len", type=int, default=16384, help="longest sequence (tokens)")
    p.add_argument("--num-seqs", type=int, default=8, help="rollouts in the step")
    p.add_argument("--micro-batch-tokens", type=int, default=None, help="polar token budget (default: seq-len)")
    p.add_argument("--naive-batch", type=int, default=2, help="sequences per padded naive micro-batch")
    # about 4B parameters in Qwen3.5's shape: 3 gated-delta-net layers to 1 full-attention layer
    p.add_argument("--hidden", type=int, default=2560)
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=256)
    p.add_argument("--intermediate", type=int, default=9216)
    p.add_argument("--vocab", type=int, default=248320)
    p.add_argument("--steps", type=int, default=2, help="measured steps (after one warm-up step)")
    p.add_argument("--peak-tflops", type=float, default=None)
    p.add_argument("--skip-naive", action="store_true")
    p.add_argument("--out", default=os.path.join(HERE, "out", "train_gpu.json"))
    p.add_argument("--traj", default=None, help=argparse.SUPPRESS)
    p.add_argument("--fsdp-out", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.tiny:
        args.seq_len = min(args.seq_len, 256)
        args.num_seqs = min(args.num_seqs, 6)
        args.hidden, args.layers, args.heads, args.kv_heads, args.intermediate, args.vocab = 32, 4, 2, 2, 128, 512
        args.head_dim = 16
        args.steps = 1
    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    args.micro_batch_tokens = args.micro_batch_tokens or args.seq_len
    return args


def model_config(args):
    """The transformers config of the benchmark model (random weights)."""
    common = dict(vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
                  num_attention_heads=args.heads, num_key_value_heads=args.kv_heads, head_dim=args.head_dim,
                  intermediate_size=args.intermediate, max_position_embeddings=max(32768, args.seq_len),
                  tie_word_embeddings=True, use_cache=False)
    if args.arch == "qwen3":
        from transformers import Qwen3Config  # type: ignore

        return Qwen3Config(**common)
    from transformers import Qwen3_5TextConfig  # type: ignore

    types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(args.layers)]
    return Qwen3_5TextConfig(layer_types=types, **common)


def build_model(args, device, dtype=torch.float32):
    from transformers import AutoModelForCausalLM  # type: ignore

    from polar_train.model import HFPolicy

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(model_config(args)).to(dtype)
    return HFPolicy(model, "random-%s" % args.arch).to(device), "%s-random" % args.arch


def make_rollouts(args, path):
    rng = random.Random(0)
    lengths = []
    with open(path, "w") as fh:
        for i in range(args.num_seqs):
            n = args.seq_len if i == 0 else rng.randint(args.seq_len // 4, args.seq_len)
            lengths.append(n)
            prompt = [rng.randrange(args.vocab) for _ in range(n // 4)]
            resp = [rng.randrange(args.vocab) for _ in range(n - len(prompt))]
            # alternating sampled turns and tool output: half of the response is trained
            block = max(1, len(resp) // 8)
            mask = [1 if (j // block) % 2 == 0 else 0 for j in range(len(resp))]
            lps = [-1.0 if m else 0.0 for m in mask]
            rec = {"v": 2, "id": "r%d" % i, "session": "s%d" % i, "task_id": "t", "sample": i, "group_id": "t",
                   "harness": "bench", "model": "random", "status": "completed", "reward": float(i % 2),
                   "stats": {},
                   "traces": [{"kind": "root", "prompt_ids": prompt, "response_ids": resp, "loss_mask": mask,
                               "response_logprobs": lps, "finish_reason": "stop", "calls": ["c"], "token_exact": True}]}
            fh.write(json.dumps(rec) + "\n")
    return lengths


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_mem(device):
    return torch.cuda.max_memory_allocated(device) / 2 ** 30 if device.type == "cuda" else None


def bench_polar(args, policy, traj, device):
    cfg = {"trajectories": traj, "model": "bench", "out": tempfile.mkdtemp(prefix="polar-bench-"),
           "device": device.type, "lr": 1e-6, "batch_rollouts": args.num_seqs, "max_steps": 1 + args.steps,
           "micro_batch_tokens": args.micro_batch_tokens, "save_every": 0, "tis": True,
           "gradient_checkpointing": True, "bf16": device.type == "cuda"}
    events = []
    t = Trainer(cfg, events.append, policy=policy)
    t.setup()
    t.save = lambda: None  # no checkpoint in a benchmark
    times = []
    orig_prepare = t.prepare

    def timed_prepare(rollouts):
        sync(device)
        times.append(time.time())
        return orig_prepare(rollouts)

    t.prepare = timed_prepare
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t.train()
    sync(device)
    times.append(time.time())
    steps = [e for e in events if e.get("event") == "step"]
    measured = steps[1:] or steps
    secs = [b - a for a, b in zip(times[:-1], times[1:])][1:] or [times[-1] - times[0]]
    tokens = measured[0]["tokens"]
    return {"tokens": tokens, "seconds": sum(secs) / len(secs), "tokens_per_s": tokens / (sum(secs) / len(secs)),
            "peak_mem_gb": peak_mem(device), "loss": measured[-1]["loss"]}, t


def bench_naive(args, policy, trainer, device):
    """Padded batches, full logits, log_softmax over [B, T, V]; one optimiser step per step."""
    samples = [s for r in trainer.rollouts for s in r.samples]
    opt = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=1e-6)
    autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16) if device.type == "cuda" else None
    total_trained = sum(len(s.sel_tgt) for s in samples)
    real_tokens = sum(s.length for s in samples)

    def step():
        opt.zero_grad(set_to_none=True)
        for i in range(0, len(samples), args.naive_batch):
            group = samples[i : i + args.naive_batch]
            t = max(s.length for s in group)
            ids = torch.zeros(len(group), t, dtype=torch.long)
            att = torch.zeros(len(group), t, dtype=torch.long)
            tmask = torch.zeros(len(group), t, dtype=torch.float32)
            tgt = torch.zeros(len(group), t, dtype=torch.long)
            adv = torch.zeros(len(group), 1)
            for b, s in enumerate(group):
                ids[b, : s.length] = torch.tensor(s.input_ids)
                att[b, : s.length] = 1
                tmask[b, s.sel_pos] = 1.0
                tgt[b, s.sel_pos] = torch.tensor(s.sel_tgt)
                adv[b] = s.advantage
            ids, att, tmask, tgt, adv = (x.to(device) for x in (ids, att, tmask, tgt, adv))
            ctx = autocast if autocast is not None else _Null()
            with ctx:
                logits = full_logits(policy, ids, att)
            logp_all = torch.log_softmax(logits.float(), dim=-1)  # the whole [B, T, V] matrix
            logp = logp_all.gather(-1, tgt.unsqueeze(-1)).squeeze(-1)
            ratio = torch.exp(logp - logp.detach())
            loss = -(adv * ratio * tmask).sum() / total_trained
            loss.backward()
        opt.step()

    step()  # warm-up
    sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    secs = []
    for _ in range(args.steps):
        t0 = time.time()
        step()
        sync(device)
        secs.append(time.time() - t0)
    sec = sum(secs) / len(secs)
    return {"tokens": real_tokens, "seconds": sec, "tokens_per_s": real_tokens / sec, "peak_mem_gb": peak_mem(device)}


def full_logits(policy, ids, att):
    return policy.model(input_ids=ids, attention_mask=att, use_cache=False).logits


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _fmt(v):
    return ("%.4g" % v) if isinstance(v, float) else str(v)


def one_step(args, traj, device, policy, **over):
    """One timed trainer step (after one warm-up step) with the given config overrides."""
    cfg = {"trajectories": traj, "model": "bench", "out": tempfile.mkdtemp(prefix="polar-bench-"),
           "device": device.type, "lr": 1e-6, "batch_rollouts": args.num_seqs, "max_steps": 2,
           "micro_batch_tokens": args.micro_batch_tokens, "save_every": 0, "tis": True,
           "gradient_checkpointing": True, "bf16": device.type == "cuda"}
    cfg.update(over)
    events = []
    t = Trainer(cfg, events.append, policy=policy)
    t.setup()
    t.save = lambda: None
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t.train()
    step = [e for e in events if e.get("event") == "step"][-1]
    return {"tokens_per_s": step["tokens_per_s"], "step_time_s": step["step_time_s"], "loss": step["loss"],
            "peak_mem_gb": peak_mem(device), "trainable_params": sum(p.numel() for p in t.params)}


def lora_step(args, traj, device):
    """LoRA (peft, r=16, all linear layers) on a bf16 frozen base (fp32 on the CPU); the base is the reference."""
    policy, _ = build_model(args, device, torch.bfloat16 if device.type == "cuda" else torch.float32)
    out = one_step(args, traj, device, policy, lora=True, kl_coef=0.001)
    del policy
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def fsdp_step(args, traj, device):
    """The same step under torchrun --nproc_per_node 1 with FSDP (what --gpus N runs with N = 1)."""
    import subprocess

    out = os.path.join(tempfile.mkdtemp(prefix="polar-bench-fsdp-"), "fsdp.json")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1", "--nproc_per_node=1",
           os.path.abspath(__file__), "--fsdp-step", "--traj", traj, "--fsdp-out", out] + _size_flags(args)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.fsdp_timeout)
    except subprocess.TimeoutExpired:
        return {"error": "the FSDP step did not finish in %d s" % args.fsdp_timeout}
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]}
    with open(out) as fh:
        return json.load(fh)


def _size_flags(args):
    flags = ["--arch", args.arch, "--seq-len", str(args.seq_len), "--num-seqs", str(args.num_seqs),
             "--micro-batch-tokens", str(args.micro_batch_tokens), "--hidden", str(args.hidden),
             "--layers", str(args.layers), "--heads", str(args.heads), "--kv-heads", str(args.kv_heads),
             "--head-dim", str(args.head_dim), "--intermediate", str(args.intermediate), "--vocab", str(args.vocab)]
    return flags + (["--device", args.device] if args.device else [])


def fsdp_child(args, device):
    policy, _ = build_model(args, device)
    result = one_step(args, args.traj, device, policy, fsdp=True)
    if int(os.environ.get("RANK", "0")) == 0:
        with open(args.fsdp_out, "w") as fh:
            json.dump(result, fh)
    return 0


def flops_per_token(args, n_params, mean_ctx):
    return 6.0 * n_params + 12.0 * args.layers * args.hidden * mean_ctx


def main(argv=None):
    args = parse_args(argv)
    device = torch.device(args.device)
    if args.fsdp_step:
        return fsdp_child(args, device)
    policy, kind = build_model(args, device)
    policy.enable_gradient_checkpointing()
    n_params = sum(p.numel() for p in policy.parameters())
    tmp = tempfile.mkdtemp(prefix="polar-bench-data-")
    traj = os.path.join(tmp, "traj.jsonl")
    lengths = make_rollouts(args, traj)
    mean_ctx = sum(n * n / 2 for n in lengths) / sum(lengths)
    peak = args.peak_tflops
    if peak is None and device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        peak = next((v for k, v in PEAK_TFLOPS.items() if k in name), None)
    fpt = flops_per_token(args, n_params, mean_ctx)

    polar, trainer = bench_polar(args, policy, traj, device)
    result = {"model": kind, "params": n_params, "device": str(device),
              "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "torch": torch.__version__, "seq_len": args.seq_len, "num_seqs": args.num_seqs,
              "lengths": lengths, "peak_tflops": peak, "polar": polar,
              # Qwen3.5's linear attention runs transformers' slow reference code without these (docs/train.md)
              "linear_attention_kernels": {m: importlib.util.find_spec(m) is not None for m in ("fla", "causal_conv1d")}}
    if not args.skip_naive:
        try:
            result["naive"] = bench_naive(args, policy, trainer, device)
        except RuntimeError as exc:  # torch.cuda.OutOfMemoryError is a RuntimeError
            if "out of memory" not in str(exc).lower():
                raise
            result["naive"] = {"oom": True, "error": str(exc).split("\n")[0]}
            if device.type == "cuda":
                torch.cuda.empty_cache()
    for side in ("polar", "naive"):
        r = result.get(side)
        if r and "tokens_per_s" in r:
            r["mfu"] = (fpt * r["tokens_per_s"] / (peak * 1e12)) if peak else None
    if "naive" in result and "tokens_per_s" in result["naive"]:
        result["speedup"] = polar["tokens_per_s"] / result["naive"]["tokens_per_s"]
        if polar["peak_mem_gb"] and result["naive"]["peak_mem_gb"]:
            result["memory_ratio"] = polar["peak_mem_gb"] / result["naive"]["peak_mem_gb"]
    del trainer, policy
    if device.type == "cuda":
        torch.cuda.empty_cache()
    if not args.skip_lora:
        result["lora"] = lora_step(args, traj, device)
    if not args.skip_fsdp:
        result["fsdp_gpus1"] = fsdp_step(args, traj, device)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=2)

    def show(name, r):
        if r is None:
            return
        if r.get("oom"):
            print("  %-6s out of memory" % name)
            return
        mem = "%.1f GiB" % r["peak_mem_gb"] if r["peak_mem_gb"] is not None else "-"
        mfu = "%.1f%%" % (100 * r["mfu"]) if r.get("mfu") is not None else "-"
        print("  %-6s %10.0f tok/s   peak %-10s MFU %s" % (name, r["tokens_per_s"], mem, mfu))

    print("train step: %s (%.1fM params) on %s, %d sequences up to %d tokens"
          % (kind, n_params / 1e6, result["device_name"], args.num_seqs, args.seq_len))
    missing = [m for m, ok in result["linear_attention_kernels"].items() if not ok]
    if kind.startswith("qwen3_5") and missing and device.type == "cuda":
        print("  note: %s not installed: the linear-attention layers ran transformers' reference code"
              % ", ".join(missing))
    show("polar", polar)
    show("naive", result.get("naive"))
    if "speedup" in result:
        print("  polar/naive: %.2fx tokens/s%s" % (result["speedup"], (", %.2fx memory" % result["memory_ratio"])
                                                    if "memory_ratio" in result else ""))
    for name in ("lora", "fsdp_gpus1"):
        r = result.get(name)
        if r:
            print("  %-10s %s" % (name, ", ".join("%s %s" % (k, _fmt(v)) for k, v in r.items())))
    print("  written to %s" % args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
