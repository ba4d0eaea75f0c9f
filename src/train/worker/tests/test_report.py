"""The tracking writer (polar_train/report.py), read back with the libraries' own readers: TensorBoard's
EventAccumulator finds each scalar at its step, a resumed writer's purge_step replaces what a cut-short
process wrote, a missing package is named, and a training run through the worker's entry point imports
neither tracker (a run without --report-to never starts the writer).
"""
import io
import json
import logging
import os
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

import helpers
from polar_train import report


def _has(name):
    try:
        __import__(name)
        return True
    except ImportError:
        return False


def run_writer(lines):
    """report.main over these JSON lines; returns its exit code and its stdout events."""
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = report.main(io.StringIO("".join(json.dumps(x) + "\n" for x in lines)))
    return code, [json.loads(line) for line in buf.getvalue().splitlines()]


def scalars(logdir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    # the reader says so on stderr when it drops purged steps: kept off the unittest result lines
    logging.getLogger("tensorboard").setLevel(logging.ERROR)
    acc = EventAccumulator(logdir)
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


@unittest.skipUnless(_has("tensorboard"), "tensorboard is not installed (npm run setup installs the tracking group)")
class TensorBoard(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tb = os.path.join(self._tmp.name, "tb")

    def tearDown(self):
        self._tmp.cleanup()

    def open(self, purge=None):
        return {"type": "open", "tensorboard": {"dir": self.tb, "purge_step": purge}, "wandb": None}

    def test_each_scalar_at_its_step_and_axis(self):
        code, events = run_writer([
            self.open(),
            {"type": "log", "axis": "train", "step": 1, "values": {"train/loss": 0.5, "train/kl": 0.25}},
            {"type": "log", "axis": "loop", "step": 1, "values": {"rollout/reward_mean": 0.75}},
            {"type": "log", "axis": "train", "step": 2, "values": {"train/loss": -1.5, "train/kl": None}},
        ])
        self.assertEqual(code, 0)
        self.assertEqual(events, [{"event": "ready", "wandb": None}])
        got = scalars(self.tb)
        self.assertEqual(got["train/loss"], [(1, 0.5), (2, -1.5)])
        # a null (a non-finite value in metrics.jsonl) is left out, not written as 0
        self.assertEqual(got["train/kl"], [(1, 0.25)])
        self.assertEqual(got["rollout/reward_mean"], [(1, 0.75)])

    def test_a_resumed_writer_replaces_the_steps_from_purge_step_on(self):
        run_writer([self.open()] + [
            {"type": "log", "axis": "loop", "step": n, "values": {"rollout/pass_at_1": n / 10}} for n in (1, 2, 3)
        ])
        code, _ = run_writer([self.open(purge=2),
                              {"type": "log", "axis": "loop", "step": 2, "values": {"rollout/pass_at_1": 0.875}}])
        self.assertEqual(code, 0)
        got = scalars(self.tb)["rollout/pass_at_1"]
        self.assertEqual([s for s, _ in got], [1, 2])
        self.assertAlmostEqual(got[0][1], 0.1, places=6)
        self.assertEqual(got[1][1], 0.875)


class Failures(unittest.TestCase):
    def test_a_package_that_cannot_be_imported_is_named(self):
        saved = sys.modules.get("wandb", "absent")
        sys.modules["wandb"] = None  # `import wandb` raises ImportError
        try:
            with tempfile.TemporaryDirectory() as d:
                code, events = run_writer([{"type": "open", "tensorboard": None,
                                            "wandb": {"project": "p", "name": "n", "id": "abc12345", "dir": d}}])
        finally:
            if saved == "absent":
                del sys.modules["wandb"]
            else:
                sys.modules["wandb"] = saved
        self.assertEqual(code, 1)
        self.assertEqual(events[-1]["kind"], "missing_package")
        self.assertEqual(events[-1]["package"], "wandb")

    def test_a_log_line_before_the_open_line_is_an_error(self):
        code, events = run_writer([{"type": "log", "axis": "train", "step": 1, "values": {"train/loss": 1}}])
        self.assertEqual(code, 1)
        self.assertIn("before the open line", events[-1]["message"])


class NoTrackerImported(unittest.TestCase):
    def test_a_training_run_imports_neither_tracker(self):
        with tempfile.TemporaryDirectory() as d:
            traj = helpers.write_jsonl(os.path.join(d, "t.jsonl"), helpers.random_records(n_groups=1))
            config = os.path.join(d, "config.json")
            with open(config, "w") as fh:
                json.dump({"trajectories": traj, "model": helpers.TINY, "out": os.path.join(d, "o"),
                           "device": "cpu", "sampling_gap_limit": 0}, fh)
            code = (
                "import io, json, sys\n"
                "from contextlib import redirect_stdout\n"
                "from polar_train import __main__ as entry\n"
                "with redirect_stdout(io.StringIO()):\n"
                "    rc = entry.main(['--config', sys.argv[1]])\n"
                "print(json.dumps({'rc': rc, 'loaded': sorted(m for m in sys.modules\n"
                "    if m.split('.')[0] in ('tensorboard', 'wandb', 'tensorboardX')\n"
                "    or m.startswith('torch.utils.tensorboard'))}))\n"
            )
            r = subprocess.run([sys.executable, "-c", code, config], capture_output=True, text=True,
                               env=dict(os.environ, PYTHONPATH=helpers.WORKER), timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            out = json.loads(r.stdout.strip().splitlines()[-1])
            self.assertEqual(out["rc"], 0)
            self.assertEqual(out["loaded"], [])


if __name__ == "__main__":
    unittest.main()
