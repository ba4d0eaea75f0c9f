"""Prints the quickstart run's reward curve (examples/quickstart/run.sh): for each loop step, the mean reward
of the rollouts it trained on (step-N/train/metrics.jsonl, `reward_mean`), and the held-out pass@1 of the
starting policy and of the last step (step-0/heldout, step-N/heldout)."""
import json
import os
import sys


def main(run: str) -> None:
    steps = sorted(int(d[5:]) for d in os.listdir(run) if d.startswith("step-") and d[5:].isdigit())
    print("step  rollout reward (metrics.jsonl)  held-out pass@1")
    for n in steps:
        rewards = []
        metrics = os.path.join(run, "step-%d" % n, "train", "metrics.jsonl")
        if os.path.exists(metrics):
            with open(metrics) as fh:
                rewards = [json.loads(line)["reward_mean"] for line in fh if line.strip()]
        heldout = os.path.join(run, "step-%d" % n, "heldout", "report.json")
        held = ""
        if os.path.exists(heldout):
            with open(heldout) as fh:
                held = "%.2f" % json.load(fh)["pass_at_1"]["mean"]
        reward = ", ".join("%.2f" % r for r in rewards if r is not None) or "-"
        print("%4d  %-31s %s" % (n, reward, held))


if __name__ == "__main__":
    main(sys.argv[1])
