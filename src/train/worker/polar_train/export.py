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

Models: a Hugging Face checkpoint of an attention-only decoder (Llama, Qwen2, Qwen3, Mistral: a `polar train`
step-N directory, any model directory, or a `tiny:arch=llama|qwen3,...` spec, tiny.py). The graph is
Decoder below: the model's own modules (embedding, norms, projections, MLP, head) with the attention and
its cache written out so that torch.onnx traces one static graph; the references (--reference) come from
the plain transformers forward, so the tests compare the ONNX model with transformers itself. Hybrid
linear-attention models (Qwen3.5) have a recurrent state instead of a KV cache and are refused.

--quantize int8: weight-only int8 with one symmetric scale per output row (per token for the embedding);
the graph dequantises (Cast + Mul) before each MatMul/Gather, so it computes in fp32 and the file is about
4x smaller. --reference writes the PyTorch model's next-token logprobs, top-5 at the last position and a
greedy continuation for the given prompts (and the same for the int8 model): what the tests compare the
ONNX model against.

One JSON event per line on stdout ({"event": "log" | "done" | "error", ...}), like the training worker.
"""
import argparse
import inspect
import json
import os
import shutil
import sys
import traceback
from typing import Dict, List, Optional

import torch
import torch.nn as nn

from .checkpoint import fresh_dir, replace_dir
from .model import TOKENIZER_FILES, load_model
from .quantize import QEmbedding, quantized_copy
from .schema import CHECKPOINT_META, LATEST
from .tiny import is_tiny_spec, logit_bias_vector

#: attention-only decoders whose layers Decoder runs (model_type in config.json)
EXPORTABLE = ("llama", "qwen2", "qwen3", "mistral")

DEFAULT_OPSET = 17


class ExportError(RuntimeError):
    kind = "export"


def emit(event: dict) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------- a transformers decoder as an ONNX graph with a KV cache


class Decoder(nn.Module):
    """Batched forward with past keys/values over a transformers Llama/Qwen3-style model's own modules
    (transformers `modeling_llama.py` / `modeling_qwen3.py` 5.x: pre-norm layers, q/k norms where the model
    has them, rotate-half RoPE, grouped-query attention, keys cached after rotation)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.lm = model
        cfg = model.config
        self.heads = cfg.num_attention_heads
        self.kv_heads = getattr(cfg, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads
        self.n_layers = cfg.num_hidden_layers
        rot = model.model.rotary_emb
        self.register_buffer("inv_freq", rot.inv_freq.detach().clone().float(), persistent=False)
        self.rope_scale = float(getattr(rot, "attention_scaling", 1.0))
        self.tied = bool(getattr(cfg, "tie_word_embeddings", False))
        # a tiny model's stop bias (tiny.py): in the graph as in training
        bias = logit_bias_vector(cfg, int(cfg.vocab_size))
        self.register_buffer("logit_bias", bias, persistent=False)

    def head(self, h):
        emb = self.lm.model.embed_tokens
        if self.tied:
            logits = emb.head(h) if isinstance(emb, QEmbedding) else h @ emb.weight.t()
            return logits if self.logit_bias is None else logits + self.logit_bias
        return self.lm.lm_head(h)

    def attention(self, layer, x, cos, sin, mask, past_k, past_v):
        attn = layer.self_attn
        b, s, _ = x.shape
        q = attn.q_proj(x).view(b, s, self.heads, self.head_dim)
        k = attn.k_proj(x).view(b, s, self.kv_heads, self.head_dim)
        v = attn.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        if hasattr(attn, "q_norm"):  # Qwen3: RMSNorm over each head's q and k before RoPE
            q, k = attn.q_norm(q), attn.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        c, sn = cos.unsqueeze(1), sin.unsqueeze(1)
        q = q * c + rotate_half(q) * sn
        k = k * c + rotate_half(k) * sn
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        rep = self.heads // self.kv_heads
        kk, vv = k, v
        if rep > 1:
            t = k.shape[2]
            kk = k[:, :, None].expand(b, self.kv_heads, rep, t, self.head_dim).reshape(b, self.heads, t, self.head_dim)
            vv = v[:, :, None].expand(b, self.kv_heads, rep, t, self.head_dim).reshape(b, self.heads, t, self.head_dim)
        scores = (q @ kk.transpose(-1, -2)).float() * float(attn.scaling)
        # a finite minimum, not -inf: a fully masked row (left padding) stays finite instead of NaN
        scores = scores.masked_fill(~mask, torch.finfo(torch.float32).min)
        o = (torch.softmax(scores, dim=-1).to(vv.dtype) @ vv).transpose(1, 2).reshape(b, s, self.heads * self.head_dim)
        return attn.o_proj(o), k, v

    def forward(self, input_ids, attention_mask, position_ids, num_logits_to_keep, *past):
        s = input_ids.shape[1]
        t = attention_mask.shape[1]
        q_pos = torch.arange(s, device=input_ids.device) + (t - s)  # absolute index of each query
        k_pos = torch.arange(t, device=input_ids.device)
        causal = k_pos.unsqueeze(0) <= q_pos.unsqueeze(1)  # [S, T]
        mask = causal[None, None] & (attention_mask[:, None, None, :] > 0)  # [B, 1, S, T]
        freqs = position_ids.unsqueeze(-1).float() * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos() * self.rope_scale, emb.sin() * self.rope_scale
        x = self.lm.model.embed_tokens(input_ids)
        presents = []
        for i, layer in enumerate(self.lm.model.layers):
            a, k, v = self.attention(layer, layer.input_layernorm(x), cos, sin, mask, past[2 * i], past[2 * i + 1])
            x = x + a
            x = x + layer.mlp(layer.post_attention_layernorm(x))
            presents += [k, v]
        h = self.lm.model.norm(x)
        # num_logits_to_keep: 0 keeps every position, k > 0 the last k
        start = (s - num_logits_to_keep) * (num_logits_to_keep > 0).to(num_logits_to_keep.dtype)
        positions = torch.arange(s, device=input_ids.device)
        h = h.index_select(1, positions[positions >= start])
        return (self.head(h), *presents)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def check_exportable(model: nn.Module, source: str) -> None:
    mt = getattr(model.config, "model_type", None)
    if mt not in EXPORTABLE:
        raise ExportError("%s is a %s model: polar export writes attention-only decoders with a KV cache (%s); "
                          "hybrid linear-attention models such as Qwen3.5 have a recurrent state instead"
                          % (source, mt, ", ".join(EXPORTABLE)))


def export_config(model: nn.Module, special: dict) -> dict:
    """config.json for Transformers.js: the model's own config, fp32, with the tokenizer's special ids."""
    c = model.config.to_dict()
    c.pop("dtype", None)
    c.pop("torch_dtype", None)
    rope = c.get("rope_parameters") or {}
    if "rope_theta" in rope:
        c.setdefault("rope_theta", rope["rope_theta"])
    c.update({"architectures": [type(model).__name__], "torch_dtype": "float32", "use_cache": True}, **special)
    if "head_dim" not in c or not c["head_dim"]:
        c["head_dim"] = c["hidden_size"] // c["num_attention_heads"]
    return c


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


def export_model(model: nn.Module, onnx_dir: str, quantized: Optional[nn.Module], opset: int,
                 say=lambda message: None) -> List[str]:
    model = model.eval()
    dec = Decoder(model).eval()
    inputs, outputs, axes = onnx_names(dec.n_layers)
    args = dummy_inputs(dec.n_layers, dec.kv_heads, dec.head_dim, model.config.vocab_size)
    files = []
    path = os.path.join(onnx_dir, "model.onnx")
    say("tracing the decoder into onnx/model.onnx")
    # no constant folding: it would store the tied embedding twice (a folded transposed copy for the head)
    torch_onnx_export(dec, args, path, inputs, outputs, axes, opset, fold=False)
    files.append(path)
    if quantized is not None:
        qpath = os.path.join(onnx_dir, "model_quantized.onnx")
        say("tracing the int8 decoder into onnx/model_quantized.onnx")
        # likewise: folding would turn Cast(int8) * scale back into fp32 weights
        torch_onnx_export(Decoder(quantized).eval(), args, qpath, inputs, outputs, axes, opset, fold=False)
        files.append(qpath)
    return files


# ---------------------------------------------------------------- checkpoint, tokenizer, references


def resolve_checkpoint(src: str) -> str:
    """A spec, a step directory, or a run's --out directory (follows its `latest` file)."""
    if is_tiny_spec(src):
        return src
    if not os.path.isdir(src):
        raise ExportError("checkpoint %s: no such directory" % src)
    latest = os.path.join(src, LATEST)
    # a run directory holds `latest` (and the launcher's config.json) but no weights of its own
    has_weights = any(n.endswith(".safetensors") or n.endswith(".bin") for n in os.listdir(src))
    if os.path.exists(latest) and not os.path.exists(os.path.join(src, CHECKPOINT_META)) and not has_weights:
        with open(latest) as fh:
            return os.path.join(src, fh.read().strip())
    return src


def tokenizer_vocab(tok: dict) -> int:
    """Ids a tokenizer.json (parsed) uses: its largest vocabulary or added-token id, plus one."""
    ids = list(tok.get("model", {}).get("vocab", {}).values()) + [t["id"] for t in tok.get("added_tokens", [])]
    return max(ids) + 1


def special_ids(tok: dict, tok_dir: str) -> dict:
    """bos/eos/pad ids for config.json from tokenizer_config.json + tokenizer.json's added tokens."""
    try:
        added = {t["content"]: t["id"] for t in tok.get("added_tokens", [])}
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
def reference(model: nn.Module, prompts: List[List[int]], greedy: int) -> List[dict]:
    """From the plain transformers forward (no cache): teacher-forced next-token logprobs, last-position
    top-5, and a greedy continuation."""
    model = model.eval()
    out = []
    for ids in prompts:
        lp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].double(), dim=-1)
        nxt = [float(lp[i, ids[i + 1]]) for i in range(len(ids) - 1)]
        top = torch.topk(lp[-1], 5)
        seq, gen_ids, gen_lp, last = list(ids), [], [], lp[-1]
        for step in range(greedy):
            tok = int(torch.argmax(last))
            gen_ids.append(tok)
            gen_lp.append(float(last[tok]))
            seq.append(tok)
            if step < greedy - 1:
                last = torch.log_softmax(model(input_ids=torch.tensor([seq])).logits[0, -1].double(), dim=-1)
        out.append({"prompt": ids, "next_logprobs": nxt, "top_ids": [int(i) for i in top.indices],
                    "top_logprobs": [float(v) for v in top.values], "greedy_ids": gen_ids, "greedy_logprobs": gen_lp})
    return out


# ---------------------------------------------------------------- main


def run(args) -> dict:
    src = resolve_checkpoint(args.checkpoint)
    tok_dir = pick_tokenizer(src, args.tokenizer, args.default_tokenizer)
    if not os.path.exists(os.path.join(tok_dir, "tokenizer.json")):
        raise ExportError("tokenizer %s: no tokenizer.json" % tok_dir)
    out = os.path.abspath(args.onnx)
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    tmp = fresh_dir(parent, os.path.basename(out))
    os.makedirs(os.path.join(tmp, "onnx"))
    meta = {"source": args.checkpoint if is_tiny_spec(args.checkpoint) else os.path.abspath(src),
            "quantize": args.quantize, "opset": args.opset, "torch": torch.__version__}
    result = {}
    stages = 4 + (1 if args.quantize else 0)
    stage = [0]

    def say(message: str) -> None:  # progress: one log event per stage (src/export/export.ts shows them)
        stage[0] += 1
        emit({"event": "log", "message": message, "stage": stage[0], "stages": stages})

    try:
        say("loading the model %s" % (args.checkpoint if is_tiny_spec(args.checkpoint) else src))
        model = load_model(src)
        check_exportable(model, args.checkpoint)
        with open(os.path.join(tok_dir, "tokenizer.json")) as fh:
            tok = json.load(fh)
        need = tokenizer_vocab(tok)
        if model.config.vocab_size < need:
            raise ExportError("the model's vocabulary (%d) is smaller than the tokenizer's (%d ids in %s)"
                              % (model.config.vocab_size, need, tok_dir))
        if os.path.isdir(src) and os.path.exists(os.path.join(src, CHECKPOINT_META)):
            with open(os.path.join(src, CHECKPOINT_META)) as fh:
                meta["step"] = json.load(fh).get("step")
        # the int8 copy (weight-only, deterministic): exported and, with --reference, scored
        qmodel = quantized_copy(model) if args.quantize == "int8" else None
        files = export_model(model, os.path.join(tmp, "onnx"), qmodel, args.opset, say)
        say("writing config.json, the tokenizer and generation_config.json")
        config = export_config(model, special_ids(tok, tok_dir))
        config["polar_export"] = meta
        with open(os.path.join(tmp, "config.json"), "w") as fh:
            json.dump(config, fh, indent=2)
        if args.reference:
            with open(args.reference) as fh:
                req = json.load(fh)
            ref = {"fp32": reference(model, req["prompts"], int(req.get("greedy", 0)))}
            if args.quantize == "int8":
                ref["int8"] = reference(qmodel, req["prompts"], int(req.get("greedy", 0)))
            with open(args.reference_out, "w") as fh:
                json.dump(ref, fh)
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
            gen = {"do_sample": False}
        for k in ("bos_token_id", "eos_token_id", "pad_token_id"):  # the tokenizer's, where the model has none
            if gen.get(k) is None and config.get(k) is not None:
                gen[k] = config[k]
        with open(os.path.join(tmp, "generation_config.json"), "w") as fh:
            json.dump(gen, fh, indent=2)
        say("moving the export into place")
        replace_dir(tmp, out)  # a crash leaves the previous export intact
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
    p.add_argument("--checkpoint", required=True, help="step-N dir, a run's --out dir, a model dir, or tiny:arch=llama,...")
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
