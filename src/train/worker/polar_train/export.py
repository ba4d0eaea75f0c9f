"""`python -m polar_train.export`: a checkpoint -> an ONNX model directory that Transformers.js and polar's
embedded backend load (launched by `polar export`, src/export/; see docs/export.md).

    python -m polar_train.export --checkpoint DIR|tiny:arch=llama,... --onnx OUT [--quantize int8]
        [--tokenizer DIR] [--default-tokenizer DIR] [--opset 17]
        [--reference PROMPTS.json --reference-out OUT.json]

Writes OUT/config.json, OUT/generation_config.json, the tokenizer files, OUT/onnx/model.onnx and, with
--quantize int8, OUT/onnx/model_quantized.onnx. The graph is a decoder with a KV cache:

    inputs   input_ids [batch, seq] int64, attention_mask [batch, total] int64, position_ids [batch, seq]
             int64, num_logits_to_keep [] int64 (0: every position, k: the last k),
             past_key_values.{i}.key / .value [batch, kv_heads, past, head_dim] float32
    outputs  logits [batch, kept, vocab] float32, present.{i}.key / .value [batch, kv_heads, total, head_dim]

Models: the tiny Llama (`tiny:arch=llama,...` or a checkpoint whose polar_tiny.json says arch llama),
exported with polar's own graph; a Hugging Face checkpoint (transformers needed) through a thin wrapper
that feeds the cache to the model (GPU machine path, not run in CI). The original `tiny:` model has no
KV-cache form and is refused.

--quantize int8: weight-only int8 with one symmetric scale per output row (per token for the embedding);
the graph dequantises (Cast + Mul) before each MatMul/Gather, so it computes in fp32 and the file is about
4x smaller. --reference writes the PyTorch model's next-token logprobs, top-5 at the last position and a
greedy continuation for the given prompts (and the same for the int8 model): what the tests compare the
ONNX model against.

One JSON event per line on stdout ({"event": "log" | "done" | "error", ...}), like the training worker.
"""
import argparse
import copy
import inspect
import json
import os
import shutil
import sys
import traceback
from typing import Dict, List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from .model import CHECKPOINT_META, TINY_CONFIG, TOKENIZER_FILES, has_module, load_tiny
from .tiny_llama import RMS_EPS, TinyLlamaLM

DEFAULT_OPSET = 17


class ExportError(RuntimeError):
    kind = "export"


def emit(event: dict) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------- int8 weight-only quantisation


def quantize_rows(w: torch.Tensor):
    """Symmetric int8 per row: w ~= q * scale[:, None]."""
    scale = w.detach().abs().amax(dim=1).clamp(min=1e-12) / 127.0
    q = torch.round(w.detach() / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scale.float()


class QLinear(nn.Module):
    def __init__(self, lin: nn.Linear):
        super().__init__()
        q, s = quantize_rows(lin.weight)
        self.register_buffer("qweight", q)
        self.register_buffer("scale", s)
        self.in_features = lin.in_features

    def forward(self, x):
        return F.linear(x, self.qweight.float() * self.scale[:, None])


class QEmbedding(nn.Module):
    def __init__(self, emb: nn.Embedding):
        super().__init__()
        q, s = quantize_rows(emb.weight)
        self.register_buffer("qweight", q)
        self.register_buffer("scale", s)

    def forward(self, ids):
        return self.qweight[ids].float() * self.scale[ids].unsqueeze(-1)

    def head(self, h):  # tied head: logits[v] = scale[v] * (h . q[v])
        return (h @ self.qweight.float().t()) * self.scale


def quantized_copy(lm: TinyLlamaLM) -> TinyLlamaLM:
    q = copy.deepcopy(lm)
    for block in q.blocks:
        for name in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"):
            setattr(block, name, QLinear(getattr(block, name)))
    q.embed = QEmbedding(lm.embed)
    return q


# ---------------------------------------------------------------- the tiny Llama as an ONNX decoder


class TinyLlamaDecoder(nn.Module):
    """Batched forward with a KV cache over TinyLlamaLM's own blocks (the same code the trainer runs)."""

    def __init__(self, lm: TinyLlamaLM):
        super().__init__()
        self.lm = lm
        self.n_layers = len(lm.blocks)

    def embed(self, ids):
        return self.lm.embed(ids)

    def head(self, h):
        if isinstance(self.lm.embed, QEmbedding):
            return self.lm.embed.head(h)
        return h @ self.lm.embed.weight.t()

    def forward(self, input_ids, attention_mask, position_ids, num_logits_to_keep, *past):
        s = input_ids.shape[1]
        t = attention_mask.shape[1]
        q_pos = torch.arange(s, device=input_ids.device) + (t - s)  # absolute index of each query
        k_pos = torch.arange(t, device=input_ids.device)
        causal = k_pos.unsqueeze(0) <= q_pos.unsqueeze(1)  # [S, T]
        mask = causal[None, None] & (attention_mask[:, None, None, :] > 0)  # [B, 1, S, T]
        cos, sin = self.lm.rope(position_ids)
        h, presents = self.lm.run_blocks(self.embed(input_ids), cos, sin, mask, list(past))
        # num_logits_to_keep: 0 keeps every position, k > 0 the last k
        start = (s - num_logits_to_keep) * (num_logits_to_keep > 0).to(num_logits_to_keep.dtype)
        positions = torch.arange(s, device=input_ids.device)
        h = h.index_select(1, positions[positions >= start])
        return (self.head(h), *presents)


def tiny_llama_config(lm: TinyLlamaLM, special: dict) -> dict:
    c = lm.config
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": c["vocab"],
        "hidden_size": c["dim"],
        "intermediate_size": c["ffn"],
        "num_hidden_layers": c["layers"],
        "num_attention_heads": c["heads"],
        "num_key_value_heads": c["kv_heads"],
        "head_dim": c["head_dim"],
        "max_position_embeddings": c["max_pos"],
        "rms_norm_eps": RMS_EPS,
        "rope_theta": float(c["rope_theta"]),
        "rope_scaling": None,
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
        **special,
    }


def onnx_names(n_layers: int):
    inputs = ["input_ids", "attention_mask", "position_ids", "num_logits_to_keep"]
    outputs = ["logits"]
    axes = {
        "input_ids": {0: "batch_size", 1: "sequence_length"},
        "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
        "position_ids": {0: "batch_size", 1: "sequence_length"},
        "logits": {0: "batch_size", 1: "logits_length"},
    }
    for i in range(n_layers):
        for kind in ("key", "value"):
            pin, pout = "past_key_values.%d.%s" % (i, kind), "present.%d.%s" % (i, kind)
            inputs.append(pin)
            outputs.append(pout)
            axes[pin] = {0: "batch_size", 2: "past_sequence_length"}
            axes[pout] = {0: "batch_size", 2: "total_sequence_length"}
    return inputs, outputs, axes


def torch_onnx_export(module, args, path, inputs, outputs, axes, opset, fold=True):
    kwargs = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False  # torch >= 2.9 defaults to the dynamo exporter; polar's graph is traced
    with torch.no_grad():
        torch.onnx.export(module, args, path, input_names=inputs, output_names=outputs, dynamic_axes=axes,
                          opset_version=opset, do_constant_folding=fold, **kwargs)


def dummy_inputs(n_layers: int, kv_heads: int, head_dim: int, vocab: int):
    b, s, p = 2, 3, 4
    ids = torch.randint(0, min(vocab, 1000), (b, s))
    am = torch.ones(b, p + s, dtype=torch.long)
    pos = torch.arange(p, p + s).unsqueeze(0).expand(b, s).contiguous()
    past = [torch.zeros(b, kv_heads, p, head_dim) for _ in range(2 * n_layers)]
    return (ids, am, pos, torch.tensor(0, dtype=torch.long), *past)


def export_tiny_llama(lm: TinyLlamaLM, onnx_dir: str, quantize: Optional[str], opset: int) -> List[str]:
    lm = lm.eval()
    c = lm.config
    inputs, outputs, axes = onnx_names(c["layers"])
    args = dummy_inputs(c["layers"], c["kv_heads"], c["head_dim"], c["vocab"])
    files = []
    path = os.path.join(onnx_dir, "model.onnx")
    # no constant folding: it would store the tied embedding twice (a folded transposed copy for the head)
    torch_onnx_export(TinyLlamaDecoder(lm), args, path, inputs, outputs, axes, opset, fold=False)
    files.append(path)
    if quantize == "int8":
        qpath = os.path.join(onnx_dir, "model_quantized.onnx")
        # likewise: folding would turn Cast(int8) * scale back into fp32 weights
        torch_onnx_export(TinyLlamaDecoder(quantized_copy(lm)).eval(), args, qpath, inputs, outputs, axes, opset,
                          fold=False)
        files.append(qpath)
    return files


# ---------------------------------------------------------------- Hugging Face checkpoints (GPU machine; untested in CI)


class HFDecoder(nn.Module):  # pragma: no cover - needs transformers
    """past_key_values in and out around an AutoModelForCausalLM (attention-only decoders: Llama, Qwen2/3)."""

    def __init__(self, model, n_layers: int):
        super().__init__()
        self.model = model
        self.n_layers = n_layers

    def forward(self, input_ids, attention_mask, position_ids, num_logits_to_keep, *past):
        from transformers import DynamicCache  # type: ignore

        legacy = tuple((past[2 * i], past[2 * i + 1]) for i in range(self.n_layers))
        cache = DynamicCache.from_legacy_cache(legacy)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         past_key_values=cache, use_cache=True)
        pkv = out.past_key_values
        pkv = pkv.to_legacy_cache() if hasattr(pkv, "to_legacy_cache") else pkv
        s = input_ids.shape[1]
        start = (s - num_logits_to_keep) * (num_logits_to_keep > 0).to(num_logits_to_keep.dtype)
        positions = torch.arange(s, device=input_ids.device)
        logits = out.logits.index_select(1, positions[positions >= start])
        return (logits.float(), *[t for kv in pkv for t in kv])


def export_hf(source: str, onnx_dir: str, out_dir: str, opset: int) -> List[str]:  # pragma: no cover
    if not has_module("transformers"):
        raise ExportError("%s is a Hugging Face checkpoint: exporting it needs transformers (pip install transformers)"
                          % source)
    from transformers import AutoModelForCausalLM  # type: ignore

    model = AutoModelForCausalLM.from_pretrained(source, torch_dtype=torch.float32).eval()
    model.config.use_cache = True
    cfg = model.config
    layers = cfg.num_hidden_layers
    kv = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    inputs, outputs, axes = onnx_names(layers)
    path = os.path.join(onnx_dir, "model.onnx")
    torch_onnx_export(HFDecoder(model, layers), dummy_inputs(layers, kv, hd, cfg.vocab_size), path, inputs, outputs,
                      axes, opset)
    cfg.save_pretrained(out_dir)
    return [path]


# ---------------------------------------------------------------- checkpoint, tokenizer, references


def resolve_checkpoint(src: str) -> str:
    """A spec, a step directory, or a run's --out directory (follows its `latest` file)."""
    if src.startswith("tiny:"):
        return src
    if not os.path.isdir(src):
        raise ExportError("checkpoint %s: no such directory" % src)
    latest = os.path.join(src, "latest")
    # a run directory holds `latest` (and the launcher's config.json) but no checkpoint of its own
    if os.path.exists(latest) and not os.path.exists(os.path.join(src, CHECKPOINT_META)) \
            and not os.path.exists(os.path.join(src, TINY_CONFIG)):
        with open(latest) as fh:
            return os.path.join(src, fh.read().strip())
    return src


def tokenizer_vocab(tok_dir: str) -> int:
    with open(os.path.join(tok_dir, "tokenizer.json")) as fh:
        tok = json.load(fh)
    ids = list(tok.get("model", {}).get("vocab", {}).values()) + [t["id"] for t in tok.get("added_tokens", [])]
    return max(ids) + 1


def special_ids(tok_dir: str) -> dict:
    """bos/eos/pad ids for config.json from tokenizer_config.json + tokenizer.json's added tokens."""
    try:
        with open(os.path.join(tok_dir, "tokenizer.json")) as fh:
            added = {t["content"]: t["id"] for t in json.load(fh).get("added_tokens", [])}
        with open(os.path.join(tok_dir, "tokenizer_config.json")) as fh:
            tc = json.load(fh)
    except Exception:
        return {}

    def tid(v):
        if isinstance(v, dict):
            v = v.get("content")
        return added.get(v) if isinstance(v, str) else None

    eos = [i for i in (tid(tc.get("eos_token")), added.get("<|endoftext|>")) if i is not None]
    eos = sorted(set(eos), key=eos.index)
    out = {"bos_token_id": tid(tc.get("bos_token")) or added.get("<|endoftext|>"),
           "pad_token_id": tid(tc.get("pad_token"))}
    if eos:
        out["eos_token_id"] = eos if len(eos) > 1 else eos[0]
    return out


def pick_tokenizer(checkpoint: str, explicit: Optional[str], default: Optional[str]) -> str:
    if explicit:
        return explicit
    if os.path.isdir(checkpoint) and os.path.exists(os.path.join(checkpoint, "tokenizer.json")):
        return checkpoint
    if default:
        return default
    raise ExportError("no tokenizer: the checkpoint has no tokenizer.json; pass --tokenizer DIR")


@torch.no_grad()
def reference(lm: TinyLlamaLM, prompts: List[List[int]], greedy: int) -> List[dict]:
    """Teacher-forced next-token logprobs, last-position top-5, and a cached greedy continuation."""
    dec = TinyLlamaDecoder(lm).eval()
    out = []
    c = lm.config
    for ids in prompts:
        x = torch.tensor([ids])
        n = len(ids)
        empty = [torch.zeros(1, c["kv_heads"], 0, c["head_dim"]) for _ in range(2 * c["layers"])]
        res = dec(x, torch.ones(1, n, dtype=torch.long), torch.arange(n)[None], torch.tensor(0), *empty)
        lp = torch.log_softmax(res[0][0].double(), dim=-1)
        nxt = [float(lp[i, ids[i + 1]]) for i in range(n - 1)]
        top = torch.topk(lp[-1], 5)
        # greedy with the cache, one token at a time (what the embedded backend does)
        past = list(res[1:])
        last = lp[-1]
        gen_ids, gen_lp = [], []
        for step in range(greedy):
            tok = int(torch.argmax(last))
            gen_ids.append(tok)
            gen_lp.append(float(last[tok]))
            if step == greedy - 1:
                break
            total = n + len(gen_ids)
            r = dec(torch.tensor([[tok]]), torch.ones(1, total, dtype=torch.long), torch.tensor([[total - 1]]),
                    torch.tensor(1), *past)
            past = list(r[1:])
            last = torch.log_softmax(r[0][0, -1].double(), dim=-1)
        out.append({"prompt": ids, "next_logprobs": nxt, "top_ids": [int(i) for i in top.indices],
                    "top_logprobs": [float(v) for v in top.values], "greedy_ids": gen_ids, "greedy_logprobs": gen_lp})
    return out


# ---------------------------------------------------------------- main


def run(args) -> dict:
    src = resolve_checkpoint(args.checkpoint)
    is_tiny = src.startswith("tiny:") or os.path.exists(os.path.join(src, TINY_CONFIG))
    tok_dir = pick_tokenizer(src, args.tokenizer, args.default_tokenizer)
    if not os.path.exists(os.path.join(tok_dir, "tokenizer.json")):
        raise ExportError("tokenizer %s: no tokenizer.json" % tok_dir)
    out = os.path.abspath(args.onnx)
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, ".tmp-%s-%d" % (os.path.basename(out), os.getpid()))
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    os.makedirs(os.path.join(tmp, "onnx"))
    meta = {"source": args.checkpoint if args.checkpoint.startswith("tiny:") else os.path.abspath(src),
            "quantize": args.quantize, "opset": args.opset, "torch": torch.__version__}
    result = {}
    try:
        if is_tiny:
            policy = load_tiny(src)
            lm = policy.lm
            if not isinstance(lm, TinyLlamaLM):
                raise ExportError("%s is the original tiny model (tiny:vocab=...), which has no KV-cache form; "
                                  "use tiny:arch=llama,... for a model to export" % args.checkpoint)
            need = tokenizer_vocab(tok_dir)
            if lm.config["vocab"] < need:
                raise ExportError("the model's vocabulary (%d) is smaller than the tokenizer's (%d ids in %s)"
                                  % (lm.config["vocab"], need, tok_dir))
            if os.path.isdir(src) and os.path.exists(os.path.join(src, CHECKPOINT_META)):
                with open(os.path.join(src, CHECKPOINT_META)) as fh:
                    meta["step"] = json.load(fh).get("step")
            files = export_tiny_llama(lm, os.path.join(tmp, "onnx"), args.quantize, args.opset)
            config = tiny_llama_config(lm, special_ids(tok_dir))
            config["polar_export"] = meta
            with open(os.path.join(tmp, "config.json"), "w") as fh:
                json.dump(config, fh, indent=2)
            if args.reference:
                with open(args.reference) as fh:
                    req = json.load(fh)
                ref = {"fp32": reference(lm, req["prompts"], int(req.get("greedy", 0)))}
                if args.quantize == "int8":
                    ref["int8"] = reference(quantized_copy(lm), req["prompts"], int(req.get("greedy", 0)))
                with open(args.reference_out, "w") as fh:
                    json.dump(ref, fh)
        else:  # pragma: no cover - Hugging Face checkpoints need transformers (GPU machine)
            if args.quantize:
                raise ExportError("--quantize is implemented for the tiny model only; quantise a Hugging Face "
                                  "export with onnxruntime.quantization.quantize_dynamic")
            if args.reference:
                raise ExportError("--reference is implemented for the tiny model only")
            files = export_hf(src, os.path.join(tmp, "onnx"), tmp, args.opset)
            with open(os.path.join(tmp, "config.json")) as fh:
                config = json.load(fh)
            config["polar_export"] = meta
            with open(os.path.join(tmp, "config.json"), "w") as fh:
                json.dump(config, fh, indent=2)
        for name in TOKENIZER_FILES:
            if name == "generation_config.json":
                continue
            p = os.path.join(tok_dir, name)
            if os.path.exists(p):
                shutil.copy2(p, os.path.join(tmp, name))
        gen = None
        for d in (src, tok_dir):
            if isinstance(d, str) and os.path.isdir(d) and os.path.exists(os.path.join(d, "generation_config.json")):
                with open(os.path.join(d, "generation_config.json")) as fh:
                    gen = json.load(fh)
                break
        if gen is None:
            gen = {k: config[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id") if config.get(k) is not None}
            gen["do_sample"] = False
        with open(os.path.join(tmp, "generation_config.json"), "w") as fh:
            json.dump(gen, fh, indent=2)
        # swap into place: a crash leaves the previous export intact
        if os.path.exists(out):
            old = out + ".old-%d" % os.getpid()
            os.rename(out, old)
            os.rename(tmp, out)
            shutil.rmtree(old)
        else:
            os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    result["dir"] = out
    result["files"] = sorted(os.path.relpath(os.path.join(r, f), out) for r, _, fs in os.walk(out) for f in fs)
    result["sizes"] = {f: os.path.getsize(os.path.join(out, f)) for f in result["files"] if f.startswith("onnx/")}
    result["model_type"] = config.get("model_type")
    result["vocab_size"] = config.get("vocab_size")
    result["layers"] = config.get("num_hidden_layers")
    result["source"] = meta["source"]
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="polar_train.export")
    p.add_argument("--checkpoint", required=True, help="step-N dir, a run's --out dir, or tiny:arch=llama,...")
    p.add_argument("--onnx", required=True, help="output model directory")
    p.add_argument("--quantize", choices=["int8"], default=None)
    p.add_argument("--tokenizer", default=None, help="tokenizer dir (default: the checkpoint's, else --default-tokenizer)")
    p.add_argument("--default-tokenizer", default=None)
    p.add_argument("--opset", type=int, default=DEFAULT_OPSET)
    p.add_argument("--reference", default=None, help="JSON {prompts: [[ids]], greedy: n}: write PyTorch references")
    p.add_argument("--reference-out", default=None)
    args = p.parse_args(argv)
    try:
        if args.reference and not args.reference_out:
            raise ExportError("--reference needs --reference-out")
        emit(dict({"event": "done"}, **run(args)))
        return 0
    except Exception as exc:
        emit({"event": "error", "kind": getattr(exc, "kind", None) or type(exc).__name__,
              "message": str(exc) or type(exc).__name__, "traceback": traceback.format_exc(limit=8)})
        return 1


if __name__ == "__main__":
    sys.exit(main())
