"""Warm-up for the "the loop learns" test (test/e2e/loop-learns.test.ts): a few plain supervised steps that
give a tiny random Qwen3 a chosen answer distribution on recorded prompts, then a Hugging Face checkpoint
directory that `polar loop --model` starts from.

    python warmup.py --spec tiny:arch=qwen3,... --data warmup.json --out DIR [--tokenizer DIR] [--steps N]

warmup.json: {"prompts": [[ids...], ...], "answers": [{"ids": [...], "weight": 0.7}, ...]}. The loss is
the weighted cross-entropy of every answer after every prompt, so its minimum puts probability `weight`
(normalised) on each answer: a mixture, not the most frequent answer. Printed on stdout as JSON lines:
each step's loss, then each answer's mean probability on the prompts after the last step.
Deterministic: the model is the spec's seeded weights and the steps are full-batch Adam on CPU.
"""
import argparse
import json
import os
import shutil
import sys

import torch


def answer_logprobs(model, prompt, answers):
    """log p(answer | prompt) under `model` for each of `answers` (all of one length): one batched forward."""
    ids = torch.tensor([prompt + a for a in answers])
    n = len(answers[0])
    # only the positions that predict the answer: the full [S, vocab] logits of a 151k vocabulary are ~1 GB
    logits = model(input_ids=ids, logits_to_keep=n + 1).logits[:, :-1].float()
    picked = torch.log_softmax(logits, dim=-1).gather(2, torch.tensor(answers)[:, :, None])
    return picked.sum(dim=(1, 2))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spec", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer", help="a directory whose tokenizer files the checkpoint carries")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--lr", type=float, default=0.02)
    a = ap.parse_args(argv)
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src", "train", "worker"))
    from polar_train.tiny import build_tiny  # noqa: E402

    data = json.load(open(a.data))
    prompts, answers = data["prompts"], data["answers"]
    total = sum(float(x["weight"]) for x in answers)
    if len({len(x["ids"]) for x in answers}) != 1:
        sys.exit("warmup.py: every answer must have the same number of tokens (they run as one batch)")
    ids = [x["ids"] for x in answers]
    weights = torch.tensor([float(x["weight"]) / total for x in answers])
    # one thread: on 2 loaded cores torch's second thread spins waiting for the first (measured: 40 steps
    # took 11m41 wall, 3m20 CPU with 2 threads next to other work; 1m54 wall, 37 s CPU with 1), and the
    # result is the same (p(tails) 0.3256 either way); on a quiet machine 1 thread costs little
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = build_tiny(a.spec)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    for step in range(a.steps):
        opt.zero_grad()
        loss = torch.zeros(())
        for p in prompts:
            loss = loss - (weights * answer_logprobs(model, p, ids)).sum()
        loss = loss / len(prompts)
        loss.backward()
        opt.step()
        print(json.dumps({"step": step + 1, "loss": round(loss.item(), 5)}), flush=True)
    with torch.no_grad():
        probs = torch.stack([answer_logprobs(model, p, ids).exp() for p in prompts]).mean(dim=0)
        for x, prob in zip(answers, probs.tolist()):
            print(json.dumps({"answer": x["ids"], "probability": prob}), flush=True)
    os.makedirs(a.out, exist_ok=True)
    model.save_pretrained(a.out)
    if a.tokenizer:
        for name in ("tokenizer.json", "tokenizer_config.json"):
            if os.path.exists(os.path.join(a.tokenizer, name)):
                shutil.copy2(os.path.join(a.tokenizer, name), os.path.join(a.out, name))


if __name__ == "__main__":
    main()
