"""`polar train` across the nodes of a Slurm allocation, one srun task per node:

    srun -N 2 --ntasks-per-node=1 python -m polar_train.cluster.srun_torchrun [--port 29400] -- TRAIN ARGS

Each task is node SLURM_NODEID of SLURM_NNODES and runs `polar train TRAIN ARGS --nnodes N --node-rank R
--rdzv-endpoint ADDR0:PORT --local-addr ADDR` (polar train starts torchrun with them, src/train/launch.ts):
the first node of the step (`scontrol show hostnames $SLURM_STEP_NODELIST`) hosts the c10d rendezvous at
its NodeAddr, each node talks from its own NodeAddr (`scontrol show node`: the address Slurm itself
reaches it at, not what its hostname resolves to) over the interface that holds it (GLOO_SOCKET_IFNAME /
NCCL_SOCKET_IFNAME). The task becomes polar train (exec): srun's signals and exit code are its own.
"""
import argparse
import os
import shlex
import socket
import subprocess
import sys

from .nodes import interface_of, train_argv

HERE = os.path.dirname(os.path.abspath(__file__))
# bin/polar of the checkout this package belongs to (src/train/worker/polar_train/cluster -> repo root)
REPO_POLAR = os.path.normpath(os.path.join(HERE, "..", "..", "..", "..", "..", "bin", "polar"))


def default_polar():
    if os.path.exists(REPO_POLAR):
        return ["node", REPO_POLAR]
    return ["polar"]


def scontrol(*args: str) -> str:
    r = subprocess.run(["scontrol", *args], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"srun_torchrun: scontrol {' '.join(args)} failed: {r.stderr.strip()}")
    return r.stdout


def node_addr(name: str) -> str:
    """The address Slurm reaches node `name` at (its NodeAddr), else what its name resolves to."""
    for field in scontrol("show", "node", "-o", name).split():
        if field.startswith("NodeAddr="):
            return field.split("=", 1)[1]
    return socket.gethostbyname(name)


def env_int(*names: str) -> int:
    for name in names:
        if os.environ.get(name):
            return int(os.environ[name])
    raise SystemExit(f"srun_torchrun: none of {', '.join(names)} is set: run it as an srun task "
                     "(srun -N N --ntasks-per-node=1 python -m polar_train.cluster.srun_torchrun -- ...)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="polar_train.cluster.srun_torchrun")
    parser.add_argument("--port", type=int, default=29400, help="the rendezvous port on the first node")
    parser.add_argument("--polar", help="how to start polar (default: node and bin/polar of this checkout)")
    parser.add_argument("train", nargs=argparse.REMAINDER, help="-- then polar train's arguments")
    args = parser.parse_args(argv)
    train = args.train[1:] if args.train[:1] == ["--"] else args.train
    nnodes = env_int("SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES")
    rank = env_int("SLURM_NODEID")
    if os.environ.get("SLURM_STEP_TASKS_PER_NODE", "1").split("(")[0] != "1":
        raise SystemExit("srun_torchrun: one task per node (srun --ntasks-per-node=1): "
                         "polar train starts the node's processes itself (--gpus, --nproc)")
    nodelist = os.environ.get("SLURM_STEP_NODELIST") or os.environ.get("SLURM_JOB_NODELIST")
    if not nodelist:
        raise SystemExit("srun_torchrun: no SLURM_STEP_NODELIST: run it as an srun task")
    first = scontrol("show", "hostnames", nodelist).split()[0]
    me = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    local = node_addr(me)
    run_id = f"slurm-{os.environ.get('SLURM_JOB_ID', '0')}-{os.environ.get('SLURM_STEP_ID', '0')}"
    polar = shlex.split(args.polar) if args.polar else default_polar()
    command = train_argv(polar, train, nnodes, rank, f"{node_addr(first)}:{args.port}", local,
                         interface_of(local), run_id)
    sys.stderr.write(f"srun_torchrun: node {rank} of {nnodes} ({me}, {local}): {shlex.join(command)}\n")
    sys.stderr.flush()
    os.execvp(command[0], command)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
