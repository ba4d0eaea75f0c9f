"""Entry point: `python -m polar_train --config resolved.json`.

Writes one JSON object per line to stdout: {"event":"environment"|"log"|"step"|"checkpoint"|"done"|"error",
...}. The first, from rank 0 before anything is loaded or written, is the environment torch reports (the
launcher's probe does not import torch: Python starts once per `polar train`).
Exit codes: 0 done, 1 error, 3 non-finite loss/gradient (the last good checkpoint is kept).
"""
import argparse
import json
import math
import os
import sys
import traceback


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def emit(event: dict) -> None:
    sys.stdout.write(json.dumps(_clean(event)) + "\n")
    sys.stdout.flush()


def environment() -> dict:
    """What only an imported torch knows (CUDA and its devices), for the launcher to check."""
    import torch

    cuda = bool(torch.cuda.is_available())
    devices = torch.cuda.device_count() if cuda else 0
    return {"event": "environment", "python": sys.executable, "version": sys.version.split()[0],
            "torch": torch.__version__, "cuda": cuda, "cuda_devices": devices,
            "device_names": [torch.cuda.get_device_name(i) for i in range(devices)]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="polar_train")
    parser.add_argument("--config", required=True, help="resolved training config (JSON)")
    args = parser.parse_args(argv)
    try:
        with open(args.config) as fh:
            config = json.load(fh)
        if int(os.environ.get("RANK", "0")) == 0:
            emit(environment())
        from .trainer import Trainer

        trainer = Trainer(config, emit)
        trainer.setup()
        summary = trainer.train()
        if trainer.rank == 0:
            emit({"event": "done", "steps": trainer.global_step, "checkpoint": trainer.last_checkpoint,
                  "loss": summary.get("loss")})
        return 0
    except Exception as exc:  # every failure becomes one clear error event
        kind = getattr(exc, "kind", None) or type(exc).__name__
        emit({"event": "error", "kind": kind, "message": str(exc) or type(exc).__name__,
              "traceback": traceback.format_exc(limit=8)})
        try:
            from .trainer import NonFiniteError

            if isinstance(exc, NonFiniteError):
                return 3
        except Exception:
            pass
        return 1


if __name__ == "__main__":
    sys.exit(main())
