"""`polar eval|loop --cluster ray`: one Ray task per sample, each a `polar eval` of that one sample on its
node (in that node's runtime), its run folder sent back whole (or left on a shared path). A sample's polar
reads its rollout job on stdin (src/rollout/executors/job.ts): the spec's job of the sample, with the two
fields only this driver knows added, `out` (the task's folder) and `backendUrl` (the server it picked).

Started by src/rollout/executors/ray.ts as `python -m polar_train.cluster.ray_rollouts --spec FILE`.
Events, one JSON object per line on stdout:
  {"event": "cluster", "nodes": [...], "slots": N}          the cluster as the driver found it
  {"event": "sample", "key", "node", "node_id", "attempt", "dir", "exit_code", "stderr_tail", "backend_url"}
  {"event": "retry", "key", "attempt", "reason"}             a task lost with its node or worker: runs again
  {"event": "lost", "key", "attempts", "reason"}             lost more often than the spec allows
  {"event": "error", "kind", "message"}                      nothing can run (no cluster, no polar_slot)
  {"event": "done"}

Scheduling, as NeMo RL and verl use Ray (read conceptually, nothing copied): attach to a running cluster
(address "auto" or HOST:PORT, as NeMo RL's init_ray in nemo_rl/distributed/virtual_cluster.py), gate
work by resources the nodes declare when they start (NeMo RL registers custom resources per node in
ray.sub; here `polar_slot` is one sandbox slot), and keep scheduling in the driver. Ray's own task retry is
off (max_retries=0): a task lost with its node is submitted again by this driver under a new attempt
number, so a retry is seen, counted and never a second result. The driver keeps at most as many tasks in
flight as the cluster has slots, so it can give each new sample the inference server with the fewest
samples running (one server per rollout, its prefix cache warm), as polar gym's BackendPool does.
"""
import argparse
import json
import os
import shutil
import signal
import sys
import time
from collections import deque


def emit(event: dict) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def _tail(text: str, lines: int = 8) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run_sample(item: dict, common: dict) -> dict:
    """The Ray task: `polar job -` of one sample into a fresh folder; the folder (or its path) comes back."""
    import ctypes
    import subprocess
    import tempfile
    import uuid

    import ray

    node = ray.util.get_node_ip_address()
    node_id = ray.get_runtime_context().get_node_id()
    base = common.get("shared") or tempfile.gettempdir()
    os.makedirs(base, exist_ok=True)
    work = os.path.join(base, f"polar-{item['key']}-{item['attempt']}-{uuid.uuid4().hex[:8]}")
    out = os.path.join(work, "out")
    os.makedirs(work)
    argv = [*common["polar"], *item["argv"]]
    job = dict(item["job"], out=out)
    if item.get("backend_url"):
        job["backendUrl"] = item["backend_url"]

    def die_with_parent():  # the sample stops when its Ray worker does (a killed worker, a cancelled task)
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:
            pass

    env = dict(os.environ, **common.get("env", {}), POLAR_CLUSTER_NODE=node)
    proc = subprocess.run(argv, cwd=common["cwd"], env=env, input=json.dumps(job), capture_output=True,
                          text=True, preexec_fn=die_with_parent, check=False)
    result = {"key": item["key"], "node": node, "node_id": node_id, "attempt": item["attempt"],
              "exit_code": proc.returncode, "stderr_tail": _tail(proc.stderr)}
    if common.get("shared"):
        result["dir"] = out
        return result
    files = {}
    for root, _dirs, names in os.walk(out):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as fh:
                files[os.path.relpath(path, out)] = fh.read()
    shutil.rmtree(work, ignore_errors=True)
    result["files"] = files
    return result


def _stage(result: dict, stage: str) -> str:
    """Writes a returned folder under the stage dir on the driver's machine; returns its path."""
    target = os.path.join(stage, f"{result['key']}.{result['attempt']}")
    shutil.rmtree(target, ignore_errors=True)
    for rel, data in result.pop("files").items():
        path = os.path.normpath(os.path.join(target, rel))
        if not path.startswith(target + os.sep):
            continue  # a name that climbs out of the folder is not written
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(data)
    os.makedirs(target, exist_ok=True)
    return target


class Servers:
    """The inference servers and the samples running on each: a new sample gets the least loaded."""

    def __init__(self, urls):
        self.urls = list(urls)
        self.running = [0] * len(self.urls)
        self.next = 0

    def acquire(self):
        if not self.urls:
            return None
        n = len(self.urls)
        best = min(((self.next + k) % n for k in range(n)), key=lambda i: (self.running[i], (i - self.next) % n))
        self.next = (best + 1) % n
        self.running[best] += 1
        return best

    def release(self, index):
        if index is not None:
            self.running[index] -= 1


def _slots(ray, name: str) -> int:
    return int(ray.cluster_resources().get(name, 0))


def drive(spec: dict) -> int:
    import ray

    try:
        ray.init(address=spec.get("address") or "auto", log_to_driver=False, include_dashboard=False,
                 logging_level="ERROR", configure_logging=True)
    except Exception as exc:  # no cluster at that address
        emit({"event": "error", "kind": "connect", "message": f"{type(exc).__name__}: {exc}"})
        return 4
    res = spec["resources"]
    slot = res["slot"]
    alive = [n for n in ray.nodes() if n.get("Alive")]
    nodes = [{"node_id": n["NodeID"], "ip": n["NodeManagerAddress"], "slots": int(n["Resources"].get(slot, 0)),
              "cpus": n["Resources"].get("CPU", 0), "memory": n["Resources"].get("memory", 0)} for n in alive]
    emit({"event": "cluster", "nodes": nodes, "slots": _slots(ray, slot)})
    if _slots(ray, slot) == 0:
        emit({"event": "error", "kind": "no_slots",
              "message": f"no node of the cluster offers the resource {slot}"})
        return 4
    # a sample no node can hold would wait in Ray's queue forever: said now, with what each node has
    fits = [n for n in nodes if n["slots"] >= 1 and n["cpus"] >= res["cpus"] and n["memory"] >= res["memory"]]
    if not fits:
        have = ", ".join(f"{n['ip']}: {n['cpus']:g} CPU, {n['memory'] / 2**30:.2f} GiB" for n in nodes if n["slots"])
        emit({"event": "error", "kind": "infeasible",
              "message": f"no node with {slot} can hold a sample ({res['cpus']} CPU, "
                         f"{res['memory'] / 2**30:.2f} GiB): {have}"})
        return 4
    task = ray.remote(run_sample).options(num_cpus=res["cpus"], memory=res["memory"], resources={slot: 1},
                                          max_retries=0, scheduling_strategy="SPREAD")
    common = {k: spec[k] for k in ("polar", "cwd", "env", "shared") if k in spec}
    common_ref = ray.put(common)
    servers = Servers(spec.get("backend_urls") or [])
    pending = deque({**s, "attempt": 1} for s in spec["samples"])
    inflight = {}
    retries = int(spec.get("retries", 3))
    while pending or inflight:
        window = max(1, _slots(ray, slot))
        while pending and len(inflight) < window:
            item = pending.popleft()
            server = servers.acquire()
            url = servers.urls[server] if server is not None else None
            ref = task.remote({**item, "backend_url": url}, common_ref)
            inflight[ref] = (item, server)
        ready, _ = ray.wait(list(inflight), num_returns=1, timeout=1.0)
        for ref in ready:
            item, server = inflight.pop(ref)
            servers.release(server)
            try:
                result = ray.get(ref)
            except ray.exceptions.RayError as exc:  # the node or worker was lost: no result, run it again
                reason = _tail(f"{type(exc).__name__}: {exc}", 3)
                if item["attempt"] > retries:
                    emit({"event": "lost", "key": item["key"], "attempts": item["attempt"], "reason": reason})
                else:
                    emit({"event": "retry", "key": item["key"], "attempt": item["attempt"] + 1, "reason": reason})
                    pending.appendleft({**item, "attempt": item["attempt"] + 1})
                continue
            if "files" in result:
                result["dir"] = _stage(result, spec["stage"])
            result["backend_url"] = servers.urls[server] if server is not None else None
            emit({"event": "sample", **result})
    emit({"event": "done"})
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="polar_train.cluster.ray_rollouts")
    parser.add_argument("--spec", required=True,
                        help="the run's samples and resources (JSON, src/rollout/executors/ray.ts)")
    args = parser.parse_args(argv)
    with open(args.spec) as fh:
        spec = json.load(fh)
    # SIGTERM from polar (Ctrl-C, --resume later): leave at once; Ray stops this driver's tasks with it
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    started = time.time()
    code = drive(spec)
    sys.stderr.write(f"ray_rollouts: {time.time() - started:.1f} s\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
