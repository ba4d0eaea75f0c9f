#!/usr/bin/env python3
"""Publish-time benchmark: a 0.6B model's new weights into a running vLLM, by a restart against in place.

On a GPU machine with vLLM installed and the model on local disk (no hub on the lent machines):

    python bench/publish_gpu.py --model /models/Qwen3-0.6B          # alternated rounds, raw table, medians;
                                                                    # writes bench/out/publish_gpu.json

Without a GPU it checks its arguments and prints the plan (`--dry-run`).

Each round publishes a checkpoint (a copy of the model with one tensor perturbed, so the weights really
change) and times it until the server answers a one-token completion again, both ways, alternated:
- restart: the server is stopped (SIGTERM to the process group this script started, SIGKILL after 60 s)
  and `vllm serve CHECKPOINT` started with the same flags (what `polar loop --reload-cmd` does);
- in place, disk: vLLM's weight-transfer control plane in the order src/loop/publish-vllm.ts follows:
  `POST /pause?mode=wait&wait_for_inflight_requests=true`, `/start_weight_update`, `/update_weights
  {"update_info": {"path": CHECKPOINT}}`, `/finish_weight_update {"weight_version": N}`, `/resume` (the
  server started with VLLM_SERVER_DEV_MODE=1 and --weight-transfer-config '{"backend": "disk"}'; the disk
  backend is in no vLLM release yet: with a vLLM without it this row is reported as not run);
- in place, reload (a vLLM without the disk backend, which then refuses to start with it): the same
  server started with '{"backend": "nccl"}', and `POST /collective_rpc {"method": "reload_weights"}`: the
  workers read the served model's safetensors again through the default loader, the loading work of the
  disk path on a released vLLM (it reloads the configured folder, so the perturbed copy is served by
  restarts only; the row times the reload, not a new checkpoint).
The NCCL path needs a second GPU for the trainer's side (NCCL puts no two ranks on one GPU) and is not
measured here. The server's first start (cold) is reported apart. Figures are wall seconds on this
machine; run it on a quiet one.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
LOG = os.path.join(tempfile.gettempdir(), "publish_gpu_vllm.log")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="the model folder (safetensors), about 0.6B parameters")
    p.add_argument("--rounds", type=int, default=3, help="alternated rounds of each way")
    p.add_argument("--port", type=int, default=0, help="the server's port (default: a free one)")
    p.add_argument("--vllm", default="vllm", help="the vllm command")
    p.add_argument("--serve-args", default="--gpu-memory-utilization 0.5 --max-model-len 4096",
                   help="extra vllm serve flags, the same for every start")
    p.add_argument("--ready-timeout", type=float, default=900.0, help="seconds a start may take")
    p.add_argument("--out", default=os.path.join(HERE, "out", "publish_gpu.json"))
    p.add_argument("--dry-run", action="store_true", help="check the arguments and print the plan")
    return p.parse_args(argv)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, timeout=900):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class Server:
    def __init__(self, args, backend, gpu):
        self.args, self.backend, self.gpu = args, backend, gpu
        self.port = args.port or free_port()
        self.root = "http://127.0.0.1:%d" % self.port
        self.proc = None
        self.initialized = False

    def start(self, model):
        env = dict(os.environ, VLLM_SERVER_DEV_MODE="1", CUDA_VISIBLE_DEVICES=str(self.gpu))
        cmd = [self.args.vllm, "serve", model, "--port", str(self.port), "--served-model-name", "policy",
               "--weight-transfer-config", json.dumps({"backend": self.backend})] + self.args.serve_args.split()
        t0 = time.perf_counter()
        self.initialized = False
        with open(LOG, "a") as log:
            self.proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
        self.ready(t0)
        return time.perf_counter() - t0

    def ready(self, t0):
        while time.perf_counter() - t0 < self.args.ready_timeout:
            if self.proc.poll() is not None:
                raise RuntimeError("vllm serve exited (%s); its log: %s" % (self.proc.returncode, LOG))
            try:
                if self.complete():
                    return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.25)
        raise RuntimeError("vllm serve was not ready within %ss" % self.args.ready_timeout)

    def complete(self):
        status, _ = http("POST", self.root + "/v1/completions",
                         {"model": "policy", "prompt": "Hello", "max_tokens": 1, "temperature": 0}, timeout=60)
        return status == 200

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def post(self, path, body=None):
        status, text = http("POST", self.root + path, {} if body is None else body)
        if status != 200:
            raise RuntimeError("POST %s: %s %s" % (path, status, text[:300]))
        return text


def perturbed_copy(model, directory, k):
    """The model with one tensor nudged (checkpoint k): the weights a publish really changes."""
    from safetensors.torch import load_file, save_file

    os.makedirs(directory, exist_ok=True)
    for name in os.listdir(model):
        src = os.path.join(model, name)
        if os.path.isfile(src) and not name.endswith(".safetensors"):
            shutil.copy(src, os.path.join(directory, name))
    for name in sorted(n for n in os.listdir(model) if n.endswith(".safetensors")):
        tensors = load_file(os.path.join(model, name))
        first = sorted(tensors)[0]
        tensors[first] = tensors[first] + 1e-3 * k
        save_file(tensors, os.path.join(directory, name), metadata={"format": "pt"})
    return directory


def in_place_reload(server):
    t0 = time.perf_counter()
    server.post("/pause?mode=wait&wait_for_inflight_requests=true")
    server.post("/collective_rpc", {"method": "reload_weights"})
    server.post("/resume")
    server.ready(time.perf_counter())
    return time.perf_counter() - t0


def in_place_disk(server, checkpoint, version):
    if not server.initialized:  # once per server process, as polar's prepare does (not timed)
        server.post("/init_weight_transfer_engine", {"init_info": {}})
        server.initialized = True
    t0 = time.perf_counter()
    server.post("/pause?mode=wait&wait_for_inflight_requests=true")
    server.post("/start_weight_update")
    server.post("/update_weights", {"update_info": {"path": checkpoint}})
    server.post("/finish_weight_update", {"weight_version": str(version)})
    server.post("/resume")
    server.ready(time.perf_counter())
    return time.perf_counter() - t0


def main(argv=None):
    args = parse_args(argv)
    if not os.path.isdir(args.model):
        sys.exit("--model %s is not a folder" % args.model)
    try:
        import torch

        gpus = torch.cuda.device_count()
    except ImportError:
        gpus = 0
    plan = ["cold start", "restart x%d" % args.rounds, "in place (disk, else reload) x%d" % args.rounds]
    print("publish_gpu: %s; %d GPU(s); %s" % (args.model, gpus, ", ".join(plan)))
    if args.dry_run or gpus == 0:
        if gpus == 0:
            print("publish_gpu: no GPU here: nothing measured (the plan above is what a GPU machine runs)")
        return 0
    work = tempfile.mkdtemp(prefix="publish-gpu-")
    rows = []
    server = Server(args, "disk", 0)
    try:
        try:
            cold = server.start(args.model)
        except RuntimeError as e:
            # a vLLM without the disk backend refuses the flag: the nccl backend (released) and a reload
            print("publish_gpu: no disk backend in this vLLM (%s): in place is timed as a reload" % e)
            server.stop()
            server.backend = "nccl"
            cold = server.start(args.model)
        rows.append({"way": "cold start", "round": 0, "seconds": cold})
        disk = server.backend == "disk"
        for r in range(1, args.rounds + 1):
            ckpt = perturbed_copy(args.model, os.path.join(work, "ckpt-%d" % r), r)
            if disk:
                try:
                    rows.append({"way": "in place (disk)", "round": r, "seconds": in_place_disk(server, ckpt, r)})
                except RuntimeError as e:
                    # a vLLM that takes the flag but has no disk engine refuses the update: a reload instead
                    print("publish_gpu: the disk update failed (%s): in place is timed as a reload" % e)
                    disk = False
                    http("POST", server.root + "/resume", {})
            if not disk:
                try:
                    rows.append({"way": "in place (reload)", "round": r, "seconds": in_place_reload(server)})
                except RuntimeError as e:
                    rows.append({"way": "in place (reload)", "round": r, "seconds": None, "error": str(e)})
            t0 = time.perf_counter()
            server.stop()
            server.start(ckpt)
            rows.append({"way": "restart", "round": r, "seconds": time.perf_counter() - t0})
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    print("\n%-18s %5s %10s" % ("way", "round", "seconds"))
    for row in rows:
        print("%-18s %5d %10s" % (row["way"], row["round"], "-" if row["seconds"] is None else "%.2f" % row["seconds"]))
    summary = {}
    for way in ("restart", "in place (disk)", "in place (reload)"):
        xs = [r["seconds"] for r in rows if r["way"] == way and r["seconds"] is not None]
        if xs:
            summary[way] = statistics.median(xs)
            print("median %-18s %.2f s" % (way, summary[way]))
    for way in ("in place (disk)", "in place (reload)"):
        if "restart" in summary and way in summary:
            print("%s is %.1fx faster than a restart" % (way, summary["restart"] / summary[way]))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"model": args.model, "rows": rows, "median": summary}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
