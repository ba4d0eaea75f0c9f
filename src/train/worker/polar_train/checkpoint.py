"""Checkpoints of the GRPO loop (trainer.py): atomic `step-N` directories (the model in Hugging Face format or
the adapter, the optimiser, scheduler and RNG state, polar's metadata and the resolved config), the `latest`
pointer, and resume. `save` and `restore` take the Trainer; Trainer.save and Trainer._restore call them."""
import hashlib
import json
import os
import shutil
from typing import TYPE_CHECKING

import torch

from .model import torch_load
from .schema import CHECKPOINT_META, CONFIG_COPY, LATEST, STATE_FILE

if TYPE_CHECKING:
    from .trainer import Trainer


class ConfigError(ValueError):
    kind = "config"


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def resolve_resume_dir(resume: str) -> str:
    """--resume ckpt/ (reads ckpt/latest) or --resume ckpt/step-3."""
    if os.path.exists(os.path.join(resume, STATE_FILE)):
        return resume
    latest = os.path.join(resume, LATEST)
    if os.path.exists(latest):
        with open(latest) as fh:
            name = fh.read().strip()
        path = os.path.join(resume, name)
        if os.path.exists(os.path.join(path, STATE_FILE)):
            return path
    raise ConfigError("resume: %s holds no checkpoint (no %s and no %s file)" % (resume, STATE_FILE, LATEST))


def fresh_dir(parent: str, name: str) -> str:
    """An empty `.tmp-<name>-<pid>` folder in `parent`: where a directory is written before replace_dir."""
    tmp = os.path.join(parent, ".tmp-%s-%d" % (name, os.getpid()))
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    os.makedirs(tmp)
    return tmp


def replace_dir(tmp: str, final: str) -> None:
    """Moves a finished `tmp` to `final`, replacing an earlier one: a crash leaves either whole."""
    if os.path.exists(final):
        old = final + ".old-%d" % os.getpid()
        os.rename(final, old)
        os.rename(tmp, final)
        shutil.rmtree(old)
    else:
        os.rename(tmp, final)


def save(trainer: "Trainer") -> str:
    cfg = trainer.cfg
    name = "step-%d" % trainer.global_step
    final = os.path.join(cfg["out"], name)
    model_state = None
    optim_state = trainer.opt.state_dict()
    if trainer.dist:
        from torch.distributed.fsdp import FullStateDictConfig, StateDictType
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        with FSDP.state_dict_type(trainer.model, StateDictType.FULL_STATE_DICT,
                                  FullStateDictConfig(offload_to_cpu=trainer.device.type == "cuda", rank0_only=True)):
            full = trainer.model.state_dict()
        model_state = {k[len("model."):]: v for k, v in full.items() if k.startswith("model.")}
        optim_state = FSDP.optim_state_dict(trainer.model, trainer.opt)
    if trainer.rank == 0:
        tmp = fresh_dir(cfg["out"], name)
        fmt = trainer.policy.save_pretrained(tmp, state_dict=model_state)
        state = {
            "global_step": trainer.global_step,
            "data_step": trainer.data_step,
            "updates": trainer.updates,
            "optimizer": optim_state,
            "scheduler": trainer.sched.state_dict(),
            "rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if trainer.device.type == "cuda" else None,
            "trainable": trainer.policy.trainable_state() if cfg["lora"] else None,
            "data_sha256": trainer.data_sha,
        }
        torch.save(state, os.path.join(tmp, STATE_FILE))
        meta = {
            "polar_checkpoint": 1,
            "step": trainer.global_step,
            "data_step": trainer.data_step,
            "updates": trainer.updates,
            "format": fmt,
            "model_kind": trainer.policy.kind,
            "base_model": trainer.base_model,
            "lora": bool(cfg["lora"]),
            "trajectories": cfg["trajectories"],
            "data_sha256": trainer.data_sha,
            "torch": torch.__version__,
        }
        with open(os.path.join(tmp, CHECKPOINT_META), "w") as fh:
            json.dump(meta, fh, indent=2)
        with open(os.path.join(tmp, CONFIG_COPY), "w") as fh:
            json.dump(cfg, fh, indent=2)
        replace_dir(tmp, final)  # a re-run of the same step replaces it
        latest_tmp = os.path.join(cfg["out"], ".latest-%d" % os.getpid())
        with open(latest_tmp, "w") as fh:
            fh.write(name + "\n")
        os.replace(latest_tmp, os.path.join(cfg["out"], LATEST))
        trainer.emit({"event": "checkpoint", "step": trainer.global_step, "path": final, "format": fmt})
    if trainer.dist:
        import torch.distributed as dist

        dist.barrier()
    trainer.last_checkpoint = final
    return final

def restore(trainer: "Trainer", directory: str) -> None:
    state = torch_load(os.path.join(directory, STATE_FILE))
    if state.get("trainable") is not None:
        trainer.policy.load_trainable_state(state["trainable"])
    if trainer.dist:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        trainer.opt.load_state_dict(FSDP.optim_state_dict_to_load(trainer.model, trainer.opt, state["optimizer"]))
    else:
        trainer.opt.load_state_dict(state["optimizer"])
    trainer.sched.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["rng"])
    if state.get("cuda_rng") is not None and trainer.device.type == "cuda":
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    trainer.global_step = state["global_step"]
    trainer.updates = state["updates"]
    if state.get("data_sha256") == trainer.data_sha:
        trainer.data_step = state["data_step"]
        trainer.log("resumed from %s at step %d (data position %d of %d)"
                 % (directory, trainer.global_step, trainer.data_step, trainer.total_steps))
    else:
        trainer.data_step = 0
        trainer.log("resumed model, optimiser and scheduler from %s at step %d; new trajectory file, "
                 "starting its data from the beginning" % (directory, trainer.global_step))
    trainer.last_checkpoint = directory
