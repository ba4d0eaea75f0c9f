"""Correctness of the worker on real transformers classes (tiny random Qwen3, Qwen3.5 and Llama built from a
config): logprobs against a plain forward, zero gradient on mask-0 tokens, checkpoints that transformers and
peft load, the LoRA reference and resume (data parallel through torchrun: test_checkpoint_processes.py)."""
import os
import tempfile
import unittest

import torch

import helpers
from polar_train import advantage as A
from polar_train import data as D
from polar_train.loss import policy_loss
from polar_train.model import load_policy
from polar_train.trainer import Trainer

CPU = torch.device("cpu")
QWEN3 = "tiny:arch=qwen3,vocab=64,dim=32,layers=2,heads=4,kv_heads=2,seed=1"
QWEN3_5 = "tiny:arch=qwen3_5,vocab=64,dim=32,layers=2,heads=2,kv_heads=1,seed=2"


def micro_batches(records, vocab, budget):
    records = [dict(r, _line=i + 1) for i, r in enumerate(records)]
    rollouts = D.build_rollouts(records, A.compute_advantages(records, "rloo")[0], False, vocab)
    return D.pack([s for r in rollouts for s in r.samples], budget)


def plain_logprobs(model, sample):
    """log p(target) from one plain transformers forward of the sequence (full logits, no packing)."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([sample.input_ids])).logits[0].float()
    return torch.log_softmax(logits, -1)[torch.tensor(sample.sel_pos), torch.tensor(sample.sel_tgt)]


def policy_logprobs(policy, mb, chunk):
    return policy(mb.input_ids, mb.position_ids, mb.seg_lens, mb.sel_pos, mb.sel_tgt, chunk)[0]


class Logprobs(unittest.TestCase):
    def check(self, spec):
        recs = helpers.random_records(n_groups=2, group_size=2, vocab=64, logprobs=False, resp_len=10)
        for i, r in enumerate(recs):  # different lengths
            r["traces"][0]["prompt_ids"] = r["traces"][0]["prompt_ids"][: 3 + i]
        policy = load_policy(spec, CPU, False)
        expected = {id(s): plain_logprobs(policy.model, s) for mb in micro_batches(recs, 64, 10 ** 6) for s in mb.samples}
        for budget, chunk, ckpt in ((10 ** 6, 1024, False), (10 ** 6, 3, True), (20, 5, False), (20, 1, True)):
            if ckpt:
                policy.enable_gradient_checkpointing()
            policy.train(ckpt)  # checkpointing acts in train mode; dropout is 0 in these configs
            micros = micro_batches(recs, 64, budget)
            self.assertEqual(len(micros) == 1, budget > 100)  # one packed row, or several micro-batches
            for mb in micros:
                with torch.set_grad_enabled(ckpt):
                    got = policy_logprobs(policy, mb, chunk)
                want = torch.cat([expected[id(s)] for s in mb.samples]) if False else None
                # samples are re-created per pack: match by content
                want = torch.cat([plain_logprobs(policy.model, s) for s in mb.samples])
                self.assertEqual(got.shape, want.shape)
                self.assertTrue(torch.allclose(got.detach(), want, atol=1e-5, rtol=0),
                                "%s budget=%d chunk=%d ckpt=%s: max diff %g"
                                % (spec, budget, chunk, ckpt, float((got.detach() - want).abs().max())))
        self.assertTrue(expected)

    def test_qwen3(self):
        self.check(QWEN3)

    def test_qwen3_5_hybrid_linear_attention(self):
        policy = load_policy(QWEN3_5, CPU, False)
        self.assertEqual(type(policy.model).__name__, "Qwen3_5ForCausalLM")
        self.assertEqual(policy.model.config.layer_types, ["linear_attention", "full_attention"])
        self.check(QWEN3_5)

    def test_mask_zero_tokens_get_zero_gradient(self):
        recs = helpers.random_records(n_groups=1, group_size=2, vocab=64, logprobs=False)
        policy = load_policy(QWEN3, CPU, False)
        (mb,) = micro_batches(recs, 64, 10 ** 6)
        final = {}
        norm = policy._backbone().norm  # the last module before the head: one hidden state per position

        def keep(module, inputs, output):
            output.retain_grad()
            final[len(final)] = output

        handle = norm.register_forward_hook(keep)
        lp = policy_logprobs(policy, mb, 4)
        handle.remove()
        loss, _ = policy_loss(lp, lp.detach(), mb.advantages, torch.full_like(lp, 1.0 / lp.shape[0]))
        loss.backward()
        h_grad = torch.cat([final[k].grad[0] for k in sorted(final)])  # [T, D], sequences in pack order
        trained = set(mb.sel_pos.tolist())
        other = [i for i in range(h_grad.shape[0]) if i not in trained]
        self.assertTrue(other)
        self.assertTrue(torch.equal(h_grad[other], torch.zeros_like(h_grad[other])))
        self.assertGreater(float(h_grad[sorted(trained)].abs().sum()), 0.0)


class Checkpoints(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name
        self.events = []

    def tearDown(self):
        self._tmp.cleanup()

    def train(self, records, **cfg):
        path = helpers.write_jsonl(os.path.join(self.dir, "traj.jsonl"), records)
        config = {"trajectories": path, "out": os.path.join(self.dir, "out"), "device": "cpu", "lr": 5e-2,
                  "weight_decay": 0.0, "save_every": 0, "batch_rollouts": 4, "tis": False}
        config.update(cfg)
        t = Trainer(config, self.events.append)
        t.setup()
        t.train()
        return t

    def real_vocab_records(self):
        from transformers import AutoTokenizer  # type: ignore

        tok = AutoTokenizer.from_pretrained(helpers.QWEN3_TOKENIZER)
        prompt = tok.apply_chat_template([{"role": "user", "content": "Say yes or no."}], tokenize=True,
                                         add_generation_prompt=True, enable_thinking=False)
        prompt = list(prompt["input_ids"] if isinstance(prompt, dict) or hasattr(prompt, "keys") else prompt)
        out = []
        for k, word in enumerate(["yes", "no", "yes", "no"]):
            resp = tok.encode(word) + [tok.convert_tokens_to_ids("<|im_end|>")]
            out.append(helpers.record("r%d" % k, [helpers.trace(prompt, resp, [1] * len(resp))], reward=float(word == "yes")))
        return out

    def check_hf_checkpoint(self, step_dir, policy, records):
        """transformers loads the checkpoint as is, it generates, and its logprobs are the trainer's."""
        from transformers import AutoModelForCausalLM, AutoTokenizer  # type: ignore

        for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
            self.assertTrue(os.path.exists(os.path.join(step_dir, name)), name)
        model = AutoModelForCausalLM.from_pretrained(step_dir).eval()
        tok = AutoTokenizer.from_pretrained(step_dir)
        self.assertTrue(tok.chat_template)
        ids = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True,
                                      return_tensors="pt", return_dict=True)["input_ids"]
        out = model.generate(ids, max_new_tokens=3, do_sample=False)
        self.assertEqual(out.shape[1], ids.shape[1] + 3)
        (mb,) = micro_batches(records[:1], helpers.QWEN3_VOCAB, 10 ** 6)
        policy.eval()
        with torch.no_grad():
            self.assertTrue(torch.allclose(plain_logprobs(model, mb.samples[0]), policy_logprobs(policy, mb, 64),
                                           atol=1e-5))
        return model

    def test_full_fine_tune_checkpoint_loads_generates_and_carries_the_tokenizer(self):
        src = helpers.hf_model_dir(os.path.join(self.dir, "base"), "tiny:arch=qwen3,vocab=%d,dim=16,layers=1,heads=2,seed=0"
                                   % helpers.QWEN3_VOCAB)
        recs = self.real_vocab_records()
        t = self.train(recs, model=src, max_steps=1)
        step = os.path.join(self.dir, "out", "step-1")
        self.check_hf_checkpoint(step, t.policy, recs)

    def test_lora_adapter_loads_with_peft_and_the_reference_is_the_base(self):
        from peft import PeftModel  # type: ignore
        from transformers import AutoModelForCausalLM  # type: ignore

        spec = "tiny:arch=qwen3,vocab=%d,dim=16,layers=1,heads=2,seed=0" % helpers.QWEN3_VOCAB
        src = helpers.hf_model_dir(os.path.join(self.dir, "base"), spec)
        recs = self.real_vocab_records()
        t = self.train(recs, model=src, max_steps=2, lora=True, lora_r=4, kl_coef=0.1)
        self.assertTrue(all(("lora_" in n) == p.requires_grad for n, p in t.policy.named_parameters()))
        step = os.path.join(self.dir, "out", "step-2")
        merged = self.check_hf_checkpoint(step, t.policy, recs)
        # the adapter alone, on the untouched base, gives the same model
        adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(src), os.path.join(step, "adapter")).eval()
        (mb,) = micro_batches(recs[:1], helpers.QWEN3_VOCAB, 10 ** 6)
        s = mb.samples[0]
        self.assertTrue(torch.allclose(plain_logprobs(adapted, s), plain_logprobs(merged, s), atol=1e-5))
        base = AutoModelForCausalLM.from_pretrained(src).eval()
        self.assertGreater(float((plain_logprobs(merged, s) - plain_logprobs(base, s)).abs().max()), 1e-4)
        # the KL reference: adapters off = the base
        with torch.no_grad(), t.policy.reference():
            self.assertTrue(torch.allclose(policy_logprobs(t.policy, mb, 64), plain_logprobs(base, s), atol=1e-5))
        steps = [e for e in self.events if e["event"] == "step"]
        self.assertGreater(steps[-1]["kl"], 0.0)

    def test_resume_is_bit_exact(self):
        recs = helpers.random_records(n_groups=2, group_size=4, vocab=64)
        common = dict(model=QWEN3, tis=True, batch_rollouts=2, ppo_epochs=2, mini_batches=2, schedule="cosine",
                      warmup_steps=1, lr=1e-2, sampling_gap_limit=0)  # made-up logprobs
        full = self.train(recs, out=os.path.join(self.dir, "full"), save_every=1, **common)
        resumed = self.train(recs, out=os.path.join(self.dir, "resumed"),
                             resume=os.path.join(self.dir, "full", "step-2"), **common)
        self.assertEqual(full.global_step, resumed.global_step)
        for (n, a), b in zip(full.policy.state_dict().items(), resumed.policy.state_dict().values()):
            self.assertTrue(torch.equal(a, b), n)


if __name__ == "__main__":
    unittest.main()
