"""Checkpoints of the GRPO loop (trainer.py): atomic `step-N` directories (the model in Hugging Face format or
the adapter, the optimiser, scheduler and RNG state, polar's metadata and the resolved config), the `latest`
pointer, and resume. `save` and `restore` take the Trainer; Trainer.save and Trainer._restore call them.

The optimiser state goes through torch's own engine for state dicts across parallelisms
(torch.distributed.checkpoint.state_dict: get_optimizer_state_dict / set_optimizer_state_dict), keyed by
parameter name in every case, so a checkpoint of N processes (FSDP) resumes on M, one process included
(checkpoint version 2, docs/train.md "Checkpoints, resume and failures"). Version 1 keyed it as the
optimiser did (parameter ids in one process, names under FSDP): ids are renamed on load; a version-1
checkpoint of several CPU processes is refused (its Adam moments are one shared buffer, below). Under FSDP
the model's weights are gathered whole by the same engine (get_model_state_dict), not through
FSDP.state_dict_type, which torch deprecates."""
import hashlib
import json
import os
import shutil
from typing import TYPE_CHECKING

import torch
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_optimizer_state_dict,
)

from .model import torch_load
from .schema import CHECKPOINT_META, CONFIG_COPY, LATEST, STATE_FILE

if TYPE_CHECKING:
    from .trainer import Trainer


#: what FSDP puts into the names of the modules it wraps (torch/distributed/fsdp/_common_utils.py FSDP_PREFIX)
FSDP_PREFIX = "_fsdp_wrapped_module."

#: polar_checkpoint.json's `polar_checkpoint`: the layout of trainer_state.pt (module docstring)
CHECKPOINT_VERSION = 2


class ConfigError(ValueError):
    kind = "config"


class CheckpointError(ValueError):
    """A checkpoint this worker cannot resume from; the message names it and the way out."""

    kind = "checkpoint"


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


def _state_options(trainer: "Trainer", save: bool) -> StateDictOptions:
    """How torch's engine gathers (save) or shards (restore) the optimiser state, and gathers the model's
    weights (save). Under FSDP both are whole on saving; on GPUs they are gathered to rank 0's CPU memory
    (cpu_offload: FSDP's rank0_only and offload_to_cpu, torch 2.13 distributed/checkpoint/state_dict.py
    _verify_options), the other ranks getting none. On the CPU every rank gathers them whole instead:
    FSDP's offload to the CPU is a no-op there for the optimiser (fsdp/_optim_utils.py,
    _unflatten_orig_param_states: `value.cpu()` of a CPU tensor is itself), which leaves each Adam moment a
    view of the one all-gather buffer that the next moment's gather overwrites: exp_avg and exp_avg_sq saved
    as one shared tensor, the NaN weights of a resumed run; for the model the process crashed in FSDP's clone
    of a gathered weight (SIGSEGV, 2 CPU processes on gloo). Without the offload, FSDP clones each moment and
    each weight. Restoring, every rank has read the whole file: no broadcast."""
    gpu = trainer.device.type == "cuda"
    return StateDictOptions(full_state_dict=trainer.dist, cpu_offload=trainer.dist and save and gpu)


def shared_storage(optim_state: dict) -> list:
    """The parameters whose optimiser state tensors share memory with another's (any pair, any name): a state
    dict FSDP gathered into one reused buffer. Empty for a sound one."""
    seen = {}
    shared = []
    for key, values in optim_state.get("state", {}).items():
        for name, value in values.items():
            if not isinstance(value, torch.Tensor) or value.dim() == 0:
                continue
            ptr = value.untyped_storage().data_ptr()
            if ptr in seen and key not in shared:
                shared.append(key)
            seen.setdefault(ptr, (key, name))
    return shared


def _check_own_storage(optim_state: dict) -> None:
    """A checkpoint whose optimiser moments share memory is never written (it resumes into NaN)."""
    shared = shared_storage(optim_state)
    if shared:
        raise RuntimeError("optimiser state of %s shares memory with another state tensor; not writing a checkpoint "
                           "that would resume into NaN (a torch state-dict defect; checkpoint.py _state_options)"
                           % ", ".join(map(str, shared[:3])))


def _from_version_1(trainer: "Trainer", optim: dict, directory: str) -> dict:
    """A version-1 optimiser state keyed by parameter name, as version 2 is. One process saved it keyed by
    parameter id, in the order of the trainable parameters (the optimiser's): renamed in that order. Several
    CPU processes (FSDP over gloo) saved Adam's moments as one shared buffer: refused, the weights are good."""
    if shared_storage(optim):
        raise CheckpointError(
            "resume: %s is a version-1 checkpoint of a run on several CPU processes, whose optimiser state is "
            "corrupt (Adam's two moments were saved as one shared buffer; resuming it gives NaN weights). Its "
            "weights are sound: start from them with --model %s without --resume or --resume-from (a fresh optimiser)"
            % (directory, directory))
    keys = [k for group in optim.get("param_groups", []) for k in group.get("params", [])]
    if not all(isinstance(k, int) for k in keys):
        return optim  # names already (FSDP on GPUs)
    names = [n.replace(FSDP_PREFIX, "") for n, p in trainer.policy.named_parameters() if p.requires_grad]
    if len(names) != len(keys):
        raise CheckpointError("resume: %s holds optimiser state for %d parameters, this model trains %d; resume with "
                              "the run's own model and --lora setting" % (directory, len(keys), len(names)))
    rename = dict(zip(keys, names))
    groups = [dict(g, params=[rename[k] for k in g["params"]]) for g in optim["param_groups"]]
    return {"state": {rename[k]: v for k, v in optim["state"].items()}, "param_groups": groups}


def save(trainer: "Trainer") -> str:
    cfg = trainer.cfg
    name = "step-%d" % trainer.global_step
    final = os.path.join(cfg["out"], name)
    model_state = None
    optim_state = get_optimizer_state_dict(trainer.model, trainer.opt, options=_state_options(trainer, save=True))
    if trainer.rank == 0:
        _check_own_storage(optim_state)
    if trainer.dist:
        full = get_model_state_dict(trainer.model, options=_state_options(trainer, save=True))
        model_state = {k[len("model."):]: v for k, v in full.items() if k.startswith("model.")}
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
            "polar_checkpoint": CHECKPOINT_VERSION,
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

def trim_metrics(trainer: "Trainer") -> None:
    """metrics.jsonl keeps the steps up to the one this run starts after (issue 47 item 5): a run stopped
    between a step's line and its checkpoint (every step between two `save_every` checkpoints, or the last
    step before its save) left lines that the resumed run writes again, so a step was there twice. A fresh
    run in a folder an earlier one left without a checkpoint starts an empty file. Lines that do not parse
    (a line cut by the kill) go too."""
    path = trainer.metrics_path
    if not os.path.exists(path):
        return
    kept, dropped = [], []
    with open(path) as fh:
        for line in fh:
            try:
                step = json.loads(line).get("step")
            except ValueError:
                step = None
            if isinstance(step, int) and step <= trainer.global_step:
                kept.append(line if line.endswith("\n") else line + "\n")
            else:
                dropped.append(step)
    if not dropped:
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        fh.writelines(kept)
    os.replace(tmp, path)
    steps = sorted(s for s in dropped if isinstance(s, int))
    trainer.log("metrics.jsonl: dropped %d line(s) written after step %d (%s), which this run writes again"
                % (len(dropped), trainer.global_step,
                   "steps %s" % ", ".join(str(s) for s in steps) if steps else "unreadable"))


def restore(trainer: "Trainer", directory: str) -> None:
    with open(os.path.join(directory, CHECKPOINT_META)) as fh:
        version = json.load(fh).get("polar_checkpoint")
    if not isinstance(version, int) or version < 1 or version > CHECKPOINT_VERSION:
        raise CheckpointError("resume: %s is checkpoint version %r, and this polar reads versions 1 to %d; resume "
                              "it with the polar that wrote it, or start from its weights with --model %s without "
                              "--resume or --resume-from (a fresh optimiser)" % (directory, version, CHECKPOINT_VERSION, directory))
    state = torch_load(os.path.join(directory, STATE_FILE))
    if state.get("trainable") is not None:
        trainer.policy.load_trainable_state(state["trainable"])
    optim_state = state["optimizer"] if version >= 2 else _from_version_1(trainer, state["optimizer"], directory)
    try:
        set_optimizer_state_dict(trainer.model, trainer.opt, optim_state, options=_state_options(trainer, save=False))
    except (KeyError, RuntimeError, ValueError) as exc:
        raise CheckpointError("resume: the optimiser state of %s does not fit this model (%s); resume with the run's "
                              "own model and --lora setting, or start from its weights with --model %s without --resume or --resume-from"
                              % (directory, exc, directory)) from exc
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
