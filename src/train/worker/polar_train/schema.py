"""The worker's half of the one source of truth: schema.json beside this file, generated from the
TypeScript launcher's schema (src/train/options.ts, src/train/schema.ts) by scripts/gen-train-schema.ts.
Defaults, enums and checkpoint file names come from there; nothing here repeats them.
"""
import json
import os

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "schema.json")) as _fh:
    SCHEMA = json.load(_fh)

#: every option's default, as the launcher resolves it (the launcher writes every key; these serve
#: direct `python -m polar_train` use and tests), plus the worker-only keys
DEFAULTS = dict(SCHEMA["defaults"], resume=None, debug_inject_nan_step=None, fsdp=False)

AGGREGATIONS = tuple(SCHEMA["enums"]["loss_agg"])
ADVANTAGES = tuple(SCHEMA["enums"]["advantage"])
SCHEDULES = tuple(SCHEMA["enums"]["schedule"])

_FILES = SCHEMA["files"]
STATE_FILE = _FILES["state"]
CHECKPOINT_META = _FILES["meta"]
LATEST = _FILES["latest"]
CONFIG_COPY = _FILES["configCopy"]
METRICS = _FILES["metrics"]
ADAPTER_DIR = _FILES["adapter"]
