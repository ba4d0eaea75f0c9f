"""The GRPO loop: batches of rollouts, old/ref logprobs, PPO epochs over mini-batches, AdamW with warm-up
and constant/cosine schedule, gradient clipping, NaN guard, atomic checkpoints and resume.

Vocabulary: a *step* is one batch of `batch_rollouts` rollouts; each step runs `ppo_epochs` passes over
its `mini_batches` mini-batches, one optimiser *update* per mini-batch; a mini-batch is packed into
micro-batches of at most `micro_batch_tokens` tokens whose gradients accumulate.
"""
import json
import math
import os
import random
import time
from typing import Callable, Dict, List, Optional

import torch

from . import advantage as A
from . import checkpoint
from . import data as D
from . import overlong as O
from .checkpoint import ConfigError, file_sha256, resolve_resume_dir
from .metrics import StepMetrics as _Acc
from .metrics import batch_figures
from .loss import aggregation_weights, policy_loss, tis_weights
from .model import load_policy
from .sampling import SamplingMismatch, check_sampling  # noqa: F401 (SamplingMismatch: the worker's error)
from .schema import CHECKPOINT_META, DEFAULTS, METRICS, SCHEDULES


def _count(n: int, word: str) -> str:
    """`1 step`, `2 steps`: a count with its noun in the right number (src/util/plural.ts)."""
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


class NonFiniteError(RuntimeError):
    kind = "non_finite"


def resolve(config: dict) -> dict:
    cfg = dict(DEFAULTS)
    cfg.update({k: v for k, v in config.items() if v is not None or k not in DEFAULTS})
    for key in ("trajectories", "out"):
        if not cfg.get(key):
            raise ConfigError("config: %s is required" % key)
    if not cfg.get("model") and not cfg.get("resume"):
        raise ConfigError("config: model is required (or resume)")
    if cfg["bf16"] is None:
        cfg["bf16"] = cfg["device"] == "cuda"
    return cfg


def refuse_multiprocess_lora(cfg: dict, world: int) -> None:
    """LoRA trains in one process: the adapter is merged into the model's weights when a checkpoint is saved
    (peft, model.py save_pretrained), which FSDP shards over the processes. polar's launchers refuse it
    (src/train/config.ts resolveTrainConfig); a worker started some other way (torchrun or srun by hand)
    refuses it here, on every rank, before a process group is opened or a model loaded."""
    if cfg.get("lora") and world > 1:
        raise ConfigError(
            'config: "lora": true with %d processes (WORLD_SIZE=%d) is not supported: LoRA trains in one process, '
            "its adapter merged into weights that FSDP shards over the processes; set \"lora\" to false to train "
            "the whole model across the processes, or start one process (torchrun --nproc_per_node 1 on one node; "
            "polar train --gpus 1) to train LoRA" % (world, world))


def lr_lambda(schedule: str, warmup: int, total: int, min_ratio: float) -> Callable[[int], float]:
    def f(update: int) -> float:
        if warmup > 0 and update < warmup:
            return (update + 1) / warmup
        if schedule == "constant":
            return 1.0
        if schedule == "cosine":
            span = max(1, total - warmup)
            progress = min(1.0, (update - warmup) / span)
            return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
        raise ConfigError("unknown schedule %r (%s)" % (schedule, ", ".join(SCHEDULES)))

    return f


class Trainer:
    def __init__(self, config: dict, emit: Callable[[dict], None], policy=None):
        """`policy`: an already built model (benchmarks); otherwise `config["model"]` is loaded."""
        self._given_policy = policy
        self.cfg = resolve(config)
        self.emit = emit
        self.rank = int(os.environ.get("RANK", "0"))
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        refuse_multiprocess_lora(self.cfg, self.world)
        self.dist = self.world > 1 or bool(self.cfg["fsdp"])  # fsdp: FSDP even for one process (bench)
        self.device = self._device()
        self.last_checkpoint: Optional[str] = None
        self.global_step = 0
        self.updates = 0
        self.metrics_path = os.path.join(self.cfg["out"], METRICS)

    # ------------------------------------------------------------------ setup

    def _device(self) -> torch.device:
        if self.cfg["device"] == "cpu":
            return torch.device("cpu")
        if not torch.cuda.is_available():
            raise ConfigError("device cuda requested but torch.cuda.is_available() is false; use device cpu")
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        return torch.device("cuda", local)

    def log(self, message: str, **extra) -> None:
        if self.rank == 0:
            self.emit(dict({"event": "log", "message": message}, **extra))

    def setup(self) -> None:
        cfg = self.cfg
        torch.manual_seed(cfg["seed"])
        random.seed(cfg["seed"])
        if self.dist:
            import torch.distributed as dist

            if not dist.is_initialized():  # a group the caller opened is used (tests/torchrun_trainer.py)
                dist.init_process_group("nccl" if self.device.type == "cuda" else "gloo")
        os.makedirs(cfg["out"], exist_ok=True)
        self.resume_dir = resolve_resume_dir(cfg["resume"]) if cfg["resume"] else None
        resume_meta = None
        if self.resume_dir:
            with open(os.path.join(self.resume_dir, CHECKPOINT_META)) as fh:
                resume_meta = json.load(fh)
        # model: a resumed run restores its weights from the checkpoint (LoRA: base + saved adapter)
        spec = cfg["model"]
        if resume_meta is not None:
            spec = resume_meta["base_model"] if resume_meta.get("lora") else self.resume_dir
            # the launcher sets model to the resume directory when none was given: nothing to say then
            given = cfg.get("model")
            if given and os.path.abspath(given) not in (os.path.abspath(spec), os.path.abspath(cfg["resume"])):
                if resume_meta.get("lora"):
                    self.log("resuming from the checkpoint %s: its base model %s and saved adapter are loaded, not --model %s"
                             % (self.resume_dir, spec, given))
                else:
                    self.log("resuming from the checkpoint %s: its weights are loaded, not --model %s" % (spec, given))
        self.base_model = resume_meta["base_model"] if resume_meta else cfg["model"]
        # the start's slow part (imports and weights): said before it, so a long silence has a reason
        self.log("loading the model %s on %s" % (spec, self.device))
        if self._given_policy is not None:
            self.policy = self._given_policy.to(self.device)
        else:
            self.policy = load_policy(spec, self.device, cfg["lora"])
        if cfg["lora"]:
            self.policy.enable_lora(cfg["lora_r"], cfg["lora_alpha"], cfg["lora_target_modules"], cfg["lora_dropout"])
            self.policy.to(self.device)
        if cfg["gradient_checkpointing"]:
            self.policy.enable_gradient_checkpointing()
        self.ref_policy = None
        if cfg["kl_coef"] and not cfg["lora"]:
            # full fine-tune: the reference is a frozen copy of the starting model
            self.ref_policy = load_policy(self.base_model, self.device, False,
                                          torch.bfloat16 if self.device.type == "cuda" else None)
            self.ref_policy.eval()
            for p in self.ref_policy.parameters():
                p.requires_grad_(False)

        # data
        records = D.read_records(cfg["trajectories"])
        self.staleness = D.check_staleness(records, cfg.get("policy_version"), cfg.get("max_staleness"))
        # overlong traces (overlong.py): masked out of the loss, or the length penalty on the reward, before
        # the advantages are computed from the rewards
        over = O.apply(records, cfg)
        if over["masked"] or over["penalised"]:
            self.log("overlong traces: %s masked (loss mask 0), %s penalised (DAPO length penalty)"
                     % (_count(over["masked"], "trace"), _count(over["penalised"], "rollout")))
        advantages, note = A.compute_advantages(records, cfg["advantage"])
        if note:
            self.log(note)
        self.rollouts = D.build_rollouts(records, advantages, cfg["tis"], self.policy.vocab_size)
        lone = sum(1 for r in records if r.get("group_id") is None)
        if lone:
            self.log("%d rollouts have no group_id: each is a group of its own, advantage 0 (no baseline)" % lone)
        if cfg["loss_agg"] == "dr-grpo" and not cfg["loss_norm_tokens"]:
            cfg["loss_norm_tokens"] = max(1, D.max_trained_tokens_per_rollout(self.rollouts))
        self.data_sha = file_sha256(cfg["trajectories"])
        n = len(self.rollouts)
        self.batch = max(1, min(cfg["batch_rollouts"], n))
        self.steps_per_epoch = math.ceil(n / self.batch)
        self.total_steps = cfg["max_steps"] or self.steps_per_epoch * cfg["epochs"]
        self.updates_per_step = cfg["ppo_epochs"] * min(cfg["mini_batches"], self.batch)

        self.model = self.policy
        if self.dist:
            self.model = self._wrap_fsdp(self.policy)
        params = [p for p in self.model.parameters() if p.requires_grad]
        if not params:
            raise ConfigError("the model has no trainable parameters")
        self.params = params
        self.opt = torch.optim.AdamW(params, lr=cfg["lr"], betas=tuple(cfg["adam_betas"]), eps=cfg["adam_eps"],
                                     weight_decay=cfg["weight_decay"])
        total_updates = self.total_steps * self.updates_per_step
        self.sched = torch.optim.lr_scheduler.LambdaLR(
            self.opt, lr_lambda(cfg["schedule"], cfg["warmup_steps"], total_updates, cfg["min_lr_ratio"]))
        self.data_step = 0
        if self.resume_dir:
            self._restore(self.resume_dir)
        if self.rank == 0:
            checkpoint.trim_metrics(self)
        self.log("training %s (%s) for %s of %s; %s per step"
                 % (_count(n, "rollout"), _count(sum(len(r.samples) for r in self.rollouts), "trace"),
                    _count(self.total_steps, "step"), _count(self.batch, "rollout"),
                    _count(self.updates_per_step, "update")),
                 model=self.policy.kind, device=str(self.device), world_size=self.world,
                 loss_norm_tokens=cfg["loss_norm_tokens"])

    def _wrap_fsdp(self, policy):
        """FSDP (full sharding) over the decoder layers; NCCL on GPUs, gloo on the CPU (--nproc N)."""
        import functools

        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp import MixedPrecision
        from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

        layer_names = set(getattr(policy.inner, "_no_split_modules", None) or [])
        classes = {type(m) for m in policy.modules() if type(m).__name__ in layer_names}
        wrap = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls=classes) if classes else None
        mp = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if self.cfg["bf16"] else None
        device_id = self.device
        return FSDP(policy, auto_wrap_policy=wrap, mixed_precision=mp, device_id=device_id, use_orig_params=True)

    # ------------------------------------------------------------------ forward helpers

    def _autocast(self):
        if self.cfg["bf16"]:
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return _Null()

    def _forward(self, model, mb: D.MicroBatch, grad: bool):
        dev = self.device
        with torch.set_grad_enabled(grad), self._autocast():
            return model(mb.input_ids.to(dev), mb.position_ids.to(dev), mb.seg_lens, mb.sel_pos.to(dev),
                         mb.sel_tgt.to(dev), self.cfg["logprob_chunk"])

    def _rank_share(self, micros: List[D.MicroBatch]) -> List[D.MicroBatch]:
        if not self.dist:
            return micros
        mine = micros[self.rank :: self.world]
        need = math.ceil(len(micros) / self.world)
        while len(mine) < need:  # equal forward counts on every rank (FSDP collectives); zero weight
            dummy = D.MicroBatch(micros[0].samples)
            dummy.old_logp = micros[0].old_logp
            dummy.ref_logp = micros[0].ref_logp
            dummy.tis = micros[0].tis
            dummy.weights = torch.zeros_like(micros[0].weights)
            mine.append(dummy)
        return mine

    # ------------------------------------------------------------------ the loop

    def batch_rollouts(self, data_step: int) -> List[D.Rollout]:
        data_epoch, pos = divmod(data_step, self.steps_per_epoch)
        order = D.epoch_order(len(self.rollouts), self.cfg["seed"], data_epoch, self.cfg["shuffle"])
        return [self.rollouts[i] for i in order[pos * self.batch : (pos + 1) * self.batch]]

    def prepare(self, rollouts: List[D.Rollout]) -> List[List[D.MicroBatch]]:
        cfg = self.cfg
        minis = []
        for group in D.split_mini_batches(rollouts, cfg["mini_batches"]):
            micros = D.pack([s for r in group for s in r.samples], cfg["micro_batch_tokens"])
            ridx = torch.cat([m.rollout_index for m in micros])
            w = aggregation_weights(ridx, cfg["loss_agg"], cfg["loss_norm_tokens"])
            off = 0
            for m in micros:
                m.weights = w[off : off + m.trained_tokens]
                off += m.trained_tokens
            minis.append(micros)
        return minis

    def check_sampling(self) -> Optional[float]:
        """The first batch's sampling logprobs against this model's own (sampling.py)."""
        return check_sampling(self)

    def train(self) -> dict:
        cfg = self.cfg
        summary = {}
        if self.data_step < self.total_steps:
            self.check_sampling()
        while self.data_step < self.total_steps:
            t0 = time.time()
            if self.device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(self.device)
            minis = self.prepare(self.batch_rollouts(self.data_step))
            step_no = self.global_step + 1
            # pi_old and pi_ref before any update. The first mini-batch's pi_old is its own first forward
            # (the weights have not moved yet), so on-policy training (1 epoch, 1 mini-batch) costs no extra pass.
            # progress within the step: one `micro` event per micro-batch of this rank (rank 0 speaks; every
            # rank runs the same number of micro-batches, _rank_share)
            shares = [self._rank_share(micros) for micros in minis]
            ref_total = sum(len(s) for i, s in enumerate(shares) if i > 0 or cfg["kl_coef"])
            progress = {"step": step_no, "phase": "reference", "done": 0, "total": ref_total}
            self.model.eval()
            for i, micros in enumerate(minis):
                if i == 0 and not cfg["kl_coef"]:
                    continue  # pi_old of the first mini-batch is its first update forward; no reference pass
                for mb in shares[i]:
                    if i > 0:
                        mb.old_logp = self._forward(self.model, mb, False)[0].float()
                    if cfg["kl_coef"]:
                        if self.ref_policy is not None:
                            mb.ref_logp = self._forward(self.ref_policy, mb, False)[0].float()
                        else:
                            with self.policy.reference():
                                mb.ref_logp = self._forward(self.model, mb, False)[0].float()
                    self._micro_done(progress)
            self.model.train()
            progress = {"step": step_no, "phase": "update", "done": 0,
                        "total": cfg["ppo_epochs"] * sum(len(s) for s in shares)}
            acc = _Acc()
            for epoch in range(cfg["ppo_epochs"]):
                order = list(range(len(minis)))
                if epoch > 0 and cfg["shuffle"]:
                    random.Random(cfg["seed"] * 7919 + step_no * 31 + epoch).shuffle(order)
                for mi in order:
                    self._update(minis[mi], step_no, acc, progress)
            step_time = time.time() - t0
            tokens = sum(m.tokens for micros in minis for m in micros)
            trained = sum(m.trained_tokens for micros in minis for m in micros)
            metrics = acc.result()
            metrics.update(batch_figures(self.batch_rollouts(self.data_step)))
            metrics.update({"staleness_" + k: (self.staleness or {}).get(k) for k in ("max", "mean")})
            metrics.update({
                "event": "step",
                "step": step_no,
                "total_steps": self.global_step - self.data_step + self.total_steps,
                "updates": self.updates,
                "lr": self.sched.get_last_lr()[0],
                "rollouts": sum(1 for _ in self.batch_rollouts(self.data_step)),
                "tokens": tokens,
                "trained_tokens": trained,
                "tokens_per_s": tokens * cfg["ppo_epochs"] / max(step_time, 1e-9),
                "step_time_s": step_time,
                "gpu_mem_gb": (torch.cuda.max_memory_allocated(self.device) / 2 ** 30) if self.device.type == "cuda" else None,
            })
            self.global_step += 1
            self.data_step += 1
            if self.rank == 0:
                with open(self.metrics_path, "a") as fh:
                    fh.write(json.dumps(metrics) + "\n")
                self.emit(metrics)
            last = self.data_step >= self.total_steps
            if last or (cfg["save_every"] and self.global_step % cfg["save_every"] == 0):
                self.save()
            summary = metrics
        return summary

    def _micro_done(self, progress: dict) -> None:
        progress["done"] += 1
        if self.rank == 0:
            self.emit(dict(progress, event="micro", total_steps=self.global_step - self.data_step + self.total_steps))

    def _update(self, micros: List[D.MicroBatch], step_no: int, acc: "_Acc", progress: dict) -> None:
        cfg = self.cfg
        self.opt.zero_grad(set_to_none=True)
        scale = float(self.world)  # FSDP averages gradients over ranks; weights already normalise globally
        for k, mb in enumerate(self._rank_share(micros)):
            logp, entropy = self._forward(self.model, mb, True)
            logp = logp.float()
            if mb.old_logp is None:
                mb.old_logp = logp.detach()
            dev = logp.device
            if cfg["tis"] and mb.sampling_logp is not None:
                if mb.tis is None:
                    mb.tis = tis_weights(mb.old_logp, mb.sampling_logp.to(dev), cfg["tis_cap"])
                tis = mb.tis
            else:
                tis = None
            weights = mb.weights.to(dev)
            loss, m = policy_loss(logp, mb.old_logp.to(dev), mb.advantages.to(dev), weights, cfg["clip_low"],
                                  cfg["clip_high"], tis, None if mb.ref_logp is None else mb.ref_logp.to(dev),
                                  cfg["kl_coef"])
            if cfg["debug_inject_nan_step"] is not None and step_no == int(cfg["debug_inject_nan_step"]):
                loss = loss * float("nan")
            if not torch.isfinite(loss):
                self._non_finite("loss", step_no, k)
            if loss.requires_grad:  # a micro-batch without trained tokens has nothing to back-propagate
                (loss * scale).backward()
            acc.add_micro(loss, m, entropy, tis, cfg["tis_cap"])
            self._micro_done(progress)
        if cfg["grad_clip"] and cfg["grad_clip"] > 0:
            if self.dist:
                gnorm = self.model.clip_grad_norm_(cfg["grad_clip"])
            else:
                gnorm = torch.nn.utils.clip_grad_norm_(self.params, cfg["grad_clip"])
        else:
            norms = [p.grad.detach().norm() for p in self.params if p.grad is not None]
            gnorm = torch.norm(torch.stack(norms)) if norms else torch.tensor(0.0)
        if not torch.isfinite(gnorm):
            self._non_finite("gradient norm", step_no, None)
        self.opt.step()
        self.sched.step()
        self.updates += 1
        acc.add_update(float(gnorm))

    def _non_finite(self, what: str, step_no: int, micro: Optional[int]) -> None:
        self.opt.zero_grad(set_to_none=True)
        where = "step %d (update %d%s)" % (step_no, self.updates + 1, "" if micro is None else ", micro-batch %d" % micro)
        kept = ("last good checkpoint: %s" % self.last_checkpoint) if self.last_checkpoint else "no checkpoint was written in this run"
        raise NonFiniteError("non-finite %s at %s; the update was not applied and training stopped; %s"
                             % (what, where, kept))

    # ------------------------------------------------------------------ checkpoints (checkpoint.py)

    def save(self) -> str:
        return checkpoint.save(self)

    def _restore(self, directory: str) -> None:
        checkpoint.restore(self, directory)


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
