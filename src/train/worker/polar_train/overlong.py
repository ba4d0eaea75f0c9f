"""Overlong traces (issue 30, part 3): what a trace cut by a length limit trains, applied to the records
before the advantages and the samples are made (trainer.py). The build flags each trace (`length_stopped`:
calls that ended at their max tokens; `truncated`: cut by --max-trace-tokens; `headroom`: the fewest
tokens left under a limit in force, negative when cut) and records its --overlong choice in the record
(`overlong: {mode, buffer}`); polar train's `overlong` / `overlong_buffer`, when set, replace it. The
modes, the fallback mode and buffer come from schema.json (src/options/defaults.ts); the same rule in
TypeScript is src/trajectory/overlong.ts (build's verl rows and counts, the launcher's pre-check).

- mask: every token of an overlong trace gets loss mask 0, so the loss (loss.py) never sees it; the
  rollout's reward still counts in its group's statistics (DAPO's overlong filtering).
- penalty: DAPO's soft overlong punishment (Yu et al. 2025, arXiv:2503.14476, eq. 13) added to the
  reward before the advantages: with h = L_max - |y| and L_cache the buffer,
  R_length = 0 if h >= L_cache; (h - L_cache) / L_cache if 0 <= h < L_cache; -1 if h < 0.
  A rollout of several calls and traces gets the penalty of its least headroom.
- keep: nothing changes.
"""
from typing import Dict, Optional, Sequence, Tuple

from .schema import SCHEMA

_O = SCHEMA["overlong"]
MODES = tuple(_O["modes"])
DEFAULT_MODE = _O["default"]
DEFAULT_BUFFER = int(_O["buffer"])


def penalty(headroom: Optional[int], buffer: int) -> float:
    """R_length from the headroom h = L_max - |y| (None: no limit known) and the buffer L_cache."""
    if headroom is None or headroom >= buffer:
        return 0.0
    if headroom < 0:
        return -1.0
    return (headroom - buffer) / buffer


def length_reward(length: int, max_length: int, buffer: int) -> float:
    """DAPO eq. 13 as written: R_length(y) for |y| = length, L_max = max_length, L_cache = buffer."""
    return penalty(max_length - length, buffer)


def is_overlong(trace: dict) -> bool:
    return int(trace.get("length_stopped") or 0) > 0 or trace.get("truncated") is True


def rollout_headroom(traces: Sequence[dict]) -> Optional[int]:
    rooms = [int(t["headroom"]) for t in traces if t.get("headroom") is not None]
    return min(rooms) if rooms else None


def resolve(record: dict, cfg: dict) -> Tuple[str, int]:
    """The mode and buffer for one record: the config's when set, else the record's, else schema.json's."""
    own = record.get("overlong") or {}
    mode = cfg.get("overlong") or own.get("mode") or DEFAULT_MODE
    buffer = cfg.get("overlong_buffer") or own.get("buffer") or DEFAULT_BUFFER
    if mode not in MODES:
        raise ValueError("line %s: overlong mode %r is not one of %s" % (record.get("_line"), mode, ", ".join(MODES)))
    return mode, int(buffer)


def apply(records: Sequence[dict], cfg: dict) -> Dict[str, int]:
    """Applies each record's mode in place: mask zeroes the loss mask of its overlong traces, penalty adds
    R_length to its reward. Returns the counts (traces masked, rollouts penalised)."""
    counts = {"masked": 0, "penalised": 0}
    for rec in records:
        mode, buffer = resolve(rec, cfg)
        if mode == "mask":
            for tr in rec["traces"]:
                if is_overlong(tr):
                    tr["loss_mask"] = [0] * len(tr["loss_mask"])
                    counts["masked"] += 1
        elif mode == "penalty" and rec.get("reward") is not None:
            r = penalty(rollout_headroom(rec["traces"]), buffer)
            if r < 0:
                rec["reward"] = float(rec["reward"]) + r
                counts["penalised"] += 1
    return counts
