"""The run's one experiment-tracking writer: `python -m polar_train.report` (`--report-to tensorboard,wandb`).

The TypeScript side (src/train/tracking/reporter.ts) starts it once per run of polar train, loop or eval
and writes JSON lines to its stdin; it writes them with the real libraries and nothing else:
  {"type": "open", "tensorboard": {"dir": D, "purge_step": N|null} | null,
                   "wandb": {"project": P, "name": R, "id": I, "dir": D, "config": {...}} | null}
  {"type": "log", "axis": "train"|"loop"|"eval", "step": N, "values": {"train/loss": 0.1, ...}}
and closes stdin at the end of the run (the writers are flushed and closed, then it exits 0).
On its events stream (stdout, or the file descriptor `--events-fd N` names: wandb's service process
inherits stdout and stderr and may outlive this process, so the launcher reads events from a descriptor
nothing else holds), one JSON line per event: {"event": "ready", "wandb": {"id", "mode", "dir"} | null} once both
writers are open, {"event": "error", "kind": "missing_package" | "wandb" | ..., "message": M} when one
cannot be.

TensorBoard: torch.utils.tensorboard.SummaryWriter, one scalar per tag at its axis's step; `purge_step`
(a resumed run) makes TensorBoard's readers drop what an earlier, cut-short process wrote at that step and
after. W&B: wandb.init(id=..., resume="allow"): a resumed run continues the same run; each axis has its
own x-axis metric (`train/step`, `loop/step`, `eval/step`, wandb.define_metric), so trainer steps and loop
steps do not compete for W&B's own step counter. WANDB_MODE=offline (or `wandb offline`) writes the run
under DIR/wandb/ for `wandb sync`; online needs `wandb login`.

Neither package is imported unless the open line asks for it: a run without --report-to never starts this.
"""
import argparse
import json
import math
import os
import sys

_events = None


def _say(event: dict) -> None:
    out = _events or sys.stdout
    out.write(json.dumps(event) + "\n")
    out.flush()


class MissingPackage(RuntimeError):
    kind = "missing_package"

    def __init__(self, package: str, message: str):
        super().__init__(message)
        self.package = package


class Writers:
    def __init__(self, spec: dict):
        self.tb = None
        self.run = None
        self.wandb = None
        self.defined = set()
        tb = spec.get("tensorboard")
        wb = spec.get("wandb")
        # both imports first: a missing package fails before anything is written
        if tb is not None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                raise MissingPackage("tensorboard", "tensorboard cannot be imported (%s)" % exc)
        if wb is not None:
            try:
                import wandb
            except ImportError as exc:
                raise MissingPackage("wandb", "wandb cannot be imported (%s)" % exc)
            self.wandb = wandb
        if tb is not None:
            purge = tb.get("purge_step")
            self.tb = SummaryWriter(log_dir=tb["dir"], purge_step=purge)
        if wb is not None:
            try:
                self.run = self.wandb.init(
                    project=wb["project"],
                    name=wb["name"],
                    id=wb["id"],
                    resume="allow",
                    dir=wb["dir"],
                    config=wb.get("config") or {},
                )
            except Exception as exc:  # wandb's own errors (not logged in, a bad project name)
                err = RuntimeError("wandb.init failed: %s" % exc)
                err.kind = "wandb"
                raise err

    def ready(self) -> dict:
        if self.run is None:
            return {"event": "ready", "wandb": None}
        return {"event": "ready", "wandb": {"id": self.run.id, "mode": str(self.run.settings.mode),
                                            "dir": os.path.dirname(str(self.run.dir))}}

    def log(self, axis: str, step: int, values: dict) -> None:
        scalars = {k: float(v) for k, v in values.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
        if self.tb is not None:
            for tag, value in scalars.items():
                self.tb.add_scalar(tag, value, step)
        if self.run is not None:
            x = "%s/step" % axis
            if x not in self.defined:
                self.run.define_metric(x)
                self.defined.add(x)
            for tag in scalars:
                if tag not in self.defined:
                    self.run.define_metric(tag, step_metric=x)
                    self.defined.add(tag)
            self.run.log(dict(scalars, **{x: step}))

    def flush(self) -> None:
        if self.tb is not None:
            self.tb.flush()

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.run is not None:
            self.run.finish()


def main(stdin=None) -> int:
    stdin = stdin or sys.stdin
    writers = None
    try:
        for raw in stdin:
            raw = raw.strip()
            if not raw:
                continue
            message = json.loads(raw)
            if message.get("type") == "open":
                writers = Writers(message)
                _say(writers.ready())
            elif message.get("type") == "log":
                if writers is None:
                    raise RuntimeError("a log line before the open line")
                writers.log(str(message["axis"]), int(message["step"]), message.get("values") or {})
                writers.flush()
            else:
                raise RuntimeError("unknown line type %r" % message.get("type"))
        if writers is not None:
            writers.close()
        return 0
    except Exception as exc:
        event = {"event": "error", "kind": getattr(exc, "kind", type(exc).__name__), "message": str(exc)}
        if isinstance(exc, MissingPackage):
            event["package"] = exc.package
        _say(event)
        if writers is not None:
            try:
                writers.close()
            except Exception:
                pass
        return 1


def cli(argv=None) -> int:
    global _events
    parser = argparse.ArgumentParser(prog="polar_train.report")
    parser.add_argument("--events-fd", type=int, default=None, help="write events to this descriptor")
    args = parser.parse_args(argv)
    if args.events_fd is not None:
        os.set_inheritable(args.events_fd, False)  # not passed on to wandb's service process
        _events = os.fdopen(args.events_fd, "w")
    return main()


if __name__ == "__main__":
    sys.exit(cli())
