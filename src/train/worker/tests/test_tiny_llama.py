"""The tiny Llama (tiny:arch=llama,...): spec, packing, the KV-cache decoder the exporter traces, training,
checkpoints, LoRA merge, and the exporter's files. ONNX Runtime checks live in test/unit/export/ (node)."""
import io
import json
import os
import tempfile
import unittest
from contextlib import redirect_stdout

import torch

import helpers
from polar_train import export as X
from polar_train.model import load_policy, parse_tiny_spec
from polar_train.tiny_llama import TinyLlamaLM
from polar_train.trainer import Trainer

SPEC = "tiny:arch=llama,vocab=48,dim=16,layers=2,heads=4,kv_heads=2,seed=3"
CPU = torch.device("cpu")


class Model(unittest.TestCase):
    def test_spec(self):
        cfg = parse_tiny_spec(SPEC)
        self.assertEqual((cfg["arch"], cfg["vocab"], cfg["kv_heads"]), ("llama", 48, 2))
        with self.assertRaisesRegex(ValueError, "unknown key 'width'"):
            parse_tiny_spec("tiny:arch=llama,width=3")
        with self.assertRaisesRegex(ValueError, "arch must be"):
            parse_tiny_spec("tiny:arch=mamba")
        self.assertNotIn("arch", parse_tiny_spec(helpers.TINY))  # the original model is unchanged

    def test_same_spec_same_weights_and_seed_matters(self):
        a, b = load_policy(SPEC, CPU, False), load_policy(SPEC, CPU, False)
        c = load_policy(SPEC.replace("seed=3", "seed=4"), CPU, False)
        for (n, x), y, z in zip(a.state_dict().items(), b.state_dict().values(), c.state_dict().values()):
            self.assertTrue(torch.equal(x, y), n)
        self.assertFalse(torch.equal(a.lm.embed.weight, c.lm.embed.weight))

    def test_packed_row_equals_separate_sequences(self):
        lm = load_policy(SPEC, CPU, False).lm
        s1, s2 = torch.randint(0, 48, (7,)), torch.randint(0, 48, (5,))
        packed = lm.hidden(torch.cat([s1, s2]), torch.cat([torch.arange(7), torch.arange(5)]), [7, 5])
        alone = torch.cat([lm.hidden(s1, torch.arange(7), [7]), lm.hidden(s2, torch.arange(5), [5])])
        self.assertTrue(torch.allclose(packed, alone, atol=1e-5))

    def test_cached_decoder_equals_full_forward(self):
        lm = load_policy(SPEC, CPU, False).lm.eval()
        dec = X.TinyLlamaDecoder(lm)
        ids = torch.randint(0, 48, (9,))
        full = torch.log_softmax(lm.logits(ids), -1)
        ref = X.reference(lm, [ids[:4].tolist()], 0)[0]
        self.assertTrue(torch.allclose(torch.tensor(ref["next_logprobs"], dtype=torch.float64),
                                       full[:3].gather(1, ids[1:4, None])[:, 0].double(), atol=1e-5))
        # prefill 4 tokens, then one token at a time through the cache
        empty = [torch.zeros(1, 2, 0, 4) for _ in range(4)]
        with torch.no_grad():
            out = dec(ids[None, :4], torch.ones(1, 4, dtype=torch.long), torch.arange(4)[None], torch.tensor(1), *empty)
            self.assertEqual(tuple(out[0].shape), (1, 1, 48))  # num_logits_to_keep 1
            past = list(out[1:])
            for t in range(4, 9):
                out = dec(ids[None, t:t + 1], torch.ones(1, t + 1, dtype=torch.long), torch.tensor([[t]]),
                          torch.tensor(1), *past)
                past = list(out[1:])
                self.assertTrue(torch.allclose(torch.log_softmax(out[0][0, -1], -1), full[t], atol=1e-5), t)
        self.assertEqual(tuple(past[0].shape), (1, 2, 9, 4))

    def test_left_padding_in_a_batch(self):
        lm = load_policy(SPEC, CPU, False).lm.eval()
        dec = X.TinyLlamaDecoder(lm)
        ids = torch.randint(0, 48, (5,))
        batch = torch.stack([torch.cat([torch.zeros(2, dtype=torch.long), ids[:3]]), ids])
        am = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
        pos = (am.cumsum(-1) - 1).clamp(min=0)
        empty = [torch.zeros(2, 2, 0, 4) for _ in range(4)]
        with torch.no_grad():
            out = dec(batch, am, pos, torch.tensor(0), *empty)
        self.assertTrue(torch.isfinite(out[0]).all())
        self.assertTrue(torch.allclose(out[0][0, 2:], lm.logits(ids[:3]), atol=1e-5))
        self.assertTrue(torch.allclose(out[0][1], lm.logits(ids), atol=1e-5))


class Training(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def train(self, out, **cfg):
        path = helpers.write_jsonl(os.path.join(self.dir, "traj.jsonl"), helpers.random_records(vocab=48))
        config = {"trajectories": path, "model": SPEC, "out": out, "device": "cpu", "lr": 5e-2, "weight_decay": 0.0,
                  "save_every": 0, "batch_rollouts": 8, "max_steps": 2}
        config.update(cfg)
        t = Trainer(config, lambda e: None)
        t.setup()
        t.train()
        return t

    def test_trains_and_the_checkpoint_reloads_exactly(self):
        t = self.train(os.path.join(self.dir, "full"))
        step = os.path.join(self.dir, "full", "step-2")
        with open(os.path.join(step, "polar_tiny.json")) as fh:
            self.assertEqual(json.load(fh)["arch"], "llama")
        again = load_policy(step, CPU, False)
        self.assertIsInstance(again.lm, TinyLlamaLM)
        ids = torch.arange(10) % 48
        with torch.no_grad():
            self.assertTrue(torch.allclose(again.lm.logits(ids), t.policy.lm.logits(ids), atol=1e-6))
            start = load_policy(SPEC, CPU, False)
            self.assertFalse(torch.allclose(start.lm.logits(ids), t.policy.lm.logits(ids), atol=1e-3))

    def test_lora_merges_into_a_plain_checkpoint(self):
        t = self.train(os.path.join(self.dir, "lora"), lora=True, lora_r=4)
        merged = load_policy(os.path.join(self.dir, "lora", "step-2"), CPU, False)
        ids = torch.arange(12) % 48
        with torch.no_grad():
            self.assertTrue(torch.allclose(merged.lm.logits(ids), t.policy.lm.logits(ids), atol=1e-5))


class Export(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name
        self.tok = os.path.join(self.dir, "tok")
        os.makedirs(self.tok)
        added = [{"id": 46, "content": "<|endoftext|>"}, {"id": 47, "content": "<|im_end|>"}]
        with open(os.path.join(self.tok, "tokenizer.json"), "w") as fh:
            json.dump({"model": {"vocab": {"t%d" % i: i for i in range(46)}}, "added_tokens": added}, fh)
        with open(os.path.join(self.tok, "tokenizer_config.json"), "w") as fh:
            json.dump({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None}, fh)

    def tearDown(self):
        self._tmp.cleanup()

    def export(self, *args):
        buf = io.StringIO()
        with redirect_stdout(buf):
            code = X.main(list(args))
        return code, json.loads(buf.getvalue().strip().splitlines()[-1])

    def test_writes_the_model_directory(self):
        out = os.path.join(self.dir, "m")
        code, ev = self.export("--checkpoint", SPEC, "--onnx", out, "--tokenizer", self.tok, "--quantize", "int8")
        self.assertEqual(code, 0, ev)
        self.assertEqual(ev["files"], ["config.json", "generation_config.json", "onnx/model.onnx",
                                       "onnx/model_quantized.onnx", "tokenizer.json", "tokenizer_config.json"])
        with open(os.path.join(out, "config.json")) as fh:
            cfg = json.load(fh)
        self.assertEqual((cfg["model_type"], cfg["num_key_value_heads"], cfg["head_dim"]), ("llama", 2, 4))
        self.assertEqual(cfg["eos_token_id"], [47, 46])
        # exporting again replaces the directory in place, leaving no temporary files
        code, _ = self.export("--checkpoint", SPEC, "--onnx", out, "--tokenizer", self.tok)
        self.assertEqual(code, 0)
        self.assertFalse(os.path.exists(os.path.join(out, "onnx", "model_quantized.onnx")))
        self.assertEqual(sorted(os.listdir(self.dir)), ["m", "tok"])

    def test_refusals(self):
        code, ev = self.export("--checkpoint", SPEC.replace("vocab=48", "vocab=40"), "--onnx",
                               os.path.join(self.dir, "small"), "--tokenizer", self.tok)
        self.assertEqual((code, ev["kind"]), (1, "export"))
        self.assertIn("smaller than the tokenizer's (48 ids", ev["message"])
        code, ev = self.export("--checkpoint", helpers.TINY, "--onnx", os.path.join(self.dir, "g"), "--tokenizer", self.tok)
        self.assertIn("no KV-cache form", ev["message"])
        self.assertEqual(sorted(os.listdir(self.dir)), ["tok"])

    def test_int8_rows(self):
        w = torch.randn(5, 7)
        q, s = X.quantize_rows(w)
        self.assertEqual(q.dtype, torch.int8)
        self.assertTrue(torch.allclose(q.float() * s[:, None], w, atol=float(s.max()) / 2 + 1e-7))
        self.assertEqual(int(q.abs().max()), 127)


if __name__ == "__main__":
    unittest.main()
