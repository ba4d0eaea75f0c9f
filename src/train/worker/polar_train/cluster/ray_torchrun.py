"""`polar train` across the nodes of a Ray cluster: one placement-group bundle per node (STRICT_SPREAD:
never two on one node), each bundle running `polar train ... --nnodes N --node-rank R` (polar train starts
torchrun, src/train/launch.ts), the rendezvous hosted by bundle 0's node.

    python -m polar_train.cluster.ray_torchrun --address HOST:PORT --nnodes 2 [--cpus 1] [--gpus 8] -- TRAIN ARGS

First one small task per bundle says where it landed (the node's address, the interface that holds it,
and on bundle 0 a free port for the c10d store); then one task per bundle runs its node of the run. Ray's
own retry is off: a node lost mid-step fails the run (polar train --resume continues from the last
checkpoint). Events, one JSON object per line on stdout:
  {"event": "nodes", "nodes": [{"rank", "ip", "ifname"}], "endpoint"}
  {"event": "node", "rank", "ip", "exit_code", "stderr_tail"}
  {"event": "error", "kind", "message"}   no cluster, or no placement for the bundles
  {"event": "done", "ok"}
Exit code: 0 when every node's polar train exited 0.
"""
import argparse
import json
import os
import shlex
import signal
import sys
import uuid

from .nodes import tail, train_argv
from .srun_torchrun import default_polar


def emit(event: dict) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


# src/train/worker, which holds polar_train: at the same path on every node (docs/cluster.md), put on a
# Ray worker's sys.path by the tasks themselves (a task run as `python -m` is pickled by value, but what it
# imports from polar_train is imported on the node)
WORKER_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _on_path(worker_dir: str) -> None:
    if worker_dir not in sys.path:
        sys.path.insert(0, worker_dir)


def where(want_port: bool, worker_dir: str) -> dict:
    import ray

    _on_path(worker_dir)
    from polar_train.cluster.nodes import free_port, interface_of

    ip = ray.util.get_node_ip_address()
    return {"ip": ip, "ifname": interface_of(ip), **({"port": free_port(ip)} if want_port else {})}


def run_node(argv, cwd, worker_dir: str) -> dict:
    import ctypes
    import subprocess

    import ray

    _on_path(worker_dir)
    from polar_train.cluster.nodes import tail as tail_of

    def die_with_parent():  # polar train stops when its Ray worker does
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:
            pass

    proc = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          preexec_fn=die_with_parent, check=False)
    return {"ip": ray.util.get_node_ip_address(), "exit_code": proc.returncode,
            "stderr_tail": tail_of(proc.stderr)}


def drive(args, train) -> int:
    import ray
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    try:
        ray.init(address=args.address, log_to_driver=False, include_dashboard=False, logging_level="ERROR",
                 configure_logging=True)
    except Exception as exc:
        emit({"event": "error", "kind": "connect", "message": f"{type(exc).__name__}: {exc}"})
        return 4
    bundle = {"CPU": args.cpus, **({"GPU": args.gpus} if args.gpus else {}),
              **({"memory": args.memory} if args.memory else {})}
    pg = placement_group([dict(bundle) for _ in range(args.nnodes)], strategy="STRICT_SPREAD")
    ready, _ = ray.wait([pg.ready()], timeout=args.placement_timeout)
    if not ready:
        alive = [n for n in ray.nodes() if n.get("Alive")]
        emit({"event": "error", "kind": "placement",
              "message": f"no placement of {args.nnodes} bundles {bundle} on distinct nodes in "
                         f"{args.placement_timeout:g} s ({len(alive)} nodes alive)"})
        return 4

    def on(rank: int) -> dict:
        """A task's options: the bundle's resources, in bundle `rank`, no retry by Ray."""
        return dict(num_cpus=args.cpus, num_gpus=args.gpus, max_retries=0,
                    scheduling_strategy=PlacementGroupSchedulingStrategy(
                        placement_group=pg, placement_group_bundle_index=rank))

    locate, task = ray.remote(where), ray.remote(run_node)
    places = ray.get([locate.options(**on(r)).remote(r == 0, WORKER_DIR) for r in range(args.nnodes)])
    port = args.port or places[0]["port"]
    endpoint = f"{places[0]['ip']}:{port}"
    emit({"event": "nodes", "endpoint": endpoint,
          "nodes": [{"rank": r, "ip": p["ip"], "ifname": p["ifname"]} for r, p in enumerate(places)]})
    run_id = f"ray-{uuid.uuid4().hex[:12]}"
    polar = shlex.split(args.polar) if args.polar else default_polar()
    refs = {task.options(**on(r)).remote(
        train_argv(polar, train, args.nnodes, r, endpoint, p["ip"], p["ifname"], run_id), args.cwd, WORKER_DIR): r
        for r, p in enumerate(places)}
    ok = True
    while refs:
        done, _ = ray.wait(list(refs), num_returns=1)
        for ref in done:
            rank = refs.pop(ref)
            try:
                result = ray.get(ref)
            except ray.exceptions.RayError as exc:  # its node or worker was lost
                result = {"ip": places[rank]["ip"], "exit_code": None,
                          "stderr_tail": tail(f"{type(exc).__name__}: {exc}", 3)}
            ok = ok and result["exit_code"] == 0
            emit({"event": "node", "rank": rank, **result})
            if result["exit_code"] != 0:
                for other in refs:  # the others would wait on the rendezvous for the lost one
                    ray.cancel(other, force=True)
    emit({"event": "done", "ok": ok})
    return 0 if ok else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="polar_train.cluster.ray_torchrun")
    parser.add_argument("--address", default=os.environ.get("RAY_ADDRESS", "auto"), help="HOST:PORT or auto")
    parser.add_argument("--nnodes", type=int, required=True, help="nodes, one bundle each")
    parser.add_argument("--cpus", type=float, default=1, help="CPUs of each bundle")
    parser.add_argument("--gpus", type=float, default=0, help="GPUs of each bundle (polar train's --gpus on that node)")
    parser.add_argument("--memory", type=int, default=0, help="bytes of each bundle (0: not asked)")
    parser.add_argument("--port", type=int, default=0, help="the rendezvous port (0: a free one on node 0)")
    parser.add_argument("--placement-timeout", type=float, default=120, help="seconds to wait for the bundles")
    parser.add_argument("--polar", help="how to start polar (default: node and bin/polar of this checkout)")
    parser.add_argument("--cwd", default=os.getcwd(), help="where each node runs polar train")
    parser.add_argument("train", nargs=argparse.REMAINDER, help="-- then polar train's arguments")
    args = parser.parse_args(argv)
    if args.nnodes < 1:
        parser.error("--nnodes: expected 1 or more")
    train = args.train[1:] if args.train[:1] == ["--"] else args.train
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    return drive(args, train)


if __name__ == "__main__":
    sys.exit(main())
