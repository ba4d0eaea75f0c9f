"""The quickstart's warm-up (examples/quickstart/run.sh; also test/e2e/loop-learns*.ts): a few plain
supervised steps that give a tiny random Qwen3 a chosen answer distribution on the prompts Pi really sends,
then a Hugging Face checkpoint directory that `polar loop --model` starts from. A random model answers
noise, and a policy that never says the rewarded word has nothing to learn from: after the warm-up it says
"heads" about 70% and "tails" about 30% of the time, and RL has a reward that varies within a group.

    python warmup.py --spec tiny:arch=qwen3,... --verl prompts.jsonl --tokenizer DIR \\
        --answer heads=0.7 --answer tails=0.3 --out DIR [--steps N] [--lr X]

--verl: the prompts, a `polar build --format verl` file (each row's input_ids[:prompt_length]).
--answer WORD=WEIGHT: an answer (the word's tokens, then <|im_end|>) and its share. The loss is the
weighted cross-entropy of every answer after every prompt, so its minimum puts probability `weight`
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


def read_prompts(path):
    """The prompts of a verl-format file: each row's input_ids up to its prompt_length."""
    prompts = []
    with open(path) as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                prompts.append(row["input_ids"][: row["prompt_length"]])
    if not prompts:
        sys.exit("warmup.py: %s holds no rows" % path)
    return prompts


def read_answers(specs, tokenizer_dir):
    """WORD=WEIGHT -> ([token ids of WORD, <|im_end|>], weight), tokenized with the model's tokenizer."""
    from transformers import AutoTokenizer  # type: ignore

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    end = tok.convert_tokens_to_ids("<|im_end|>")
    out = []
    for spec in specs:
        word, _, weight = spec.partition("=")
        if not word or not weight:
            sys.exit("warmup.py: --answer %r: expected WORD=WEIGHT" % spec)
        out.append((word, tok.encode(word, add_special_tokens=False) + [end], float(weight)))
    if len({len(ids) for _, ids, _ in out}) != 1:
        sys.exit("warmup.py: every answer must have the same number of tokens (they run as one batch)")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spec", required=True)
    ap.add_argument("--verl", required=True, help="the prompts: a polar build --format verl file")
    ap.add_argument("--answer", action="append", required=True, help="WORD=WEIGHT (repeatable)")
    ap.add_argument("--tokenizer", required=True, help="a directory with the model's tokenizer files")
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--lr", type=float, default=0.02)
    a = ap.parse_args(argv)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "src", "train", "worker"))
    from polar_train.tiny import build_tiny  # noqa: E402

    prompts = read_prompts(a.verl)
    answers = read_answers(a.answer, a.tokenizer)
    total = sum(w for _, _, w in answers)
    ids = [x for _, x, _ in answers]
    weights = torch.tensor([w / total for _, _, w in answers])
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
        for (word, x, _), prob in zip(answers, probs.tolist()):
            print(json.dumps({"answer": x, "word": word, "probability": prob}), flush=True)
    os.makedirs(a.out, exist_ok=True)
    model.save_pretrained(a.out)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if os.path.exists(os.path.join(a.tokenizer, name)):
            shutil.copy2(os.path.join(a.tokenizer, name), os.path.join(a.out, name))


if __name__ == "__main__":
    main()
