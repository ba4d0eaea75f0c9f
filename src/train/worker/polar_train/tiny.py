"""Tiny random-weight models of real Hugging Face classes, built from a config (no download): the CPU test
models of the trainer, the exporter and the CPU loop.

    tiny:arch=qwen3,vocab=151669,dim=32,layers=2,heads=2,kv_heads=1,seed=0

arch: llama (LlamaForCausalLM, the default: what the embedded backend runs after `polar export`), qwen3
(Qwen3ForCausalLM) or qwen3_5 (Qwen3_5ForCausalLM, Qwen3.5's hybrid of gated-delta-net linear attention and
full attention: `layer_types` alternates linear, full). Keys: vocab, dim (hidden size), layers, heads,
kv_heads, head_dim (0: dim // heads), ffn (0: 2 * dim), max_pos, rope_theta, seed, stop_bias (added to the
logit of stop_id, Qwen3's <|im_end|> by default, at every position: a random model's turns then end after a
few tokens, which a real harness needs). The embedding is tied to the head. Keys and defaults: the `tiny`
block of schema.json (src/train/schema.ts TINY_DEFAULTS).

The stop bias is part of the model: `config.polar_logit_bias` ({id: bias}) is saved with every checkpoint,
`apply_logit_bias` gives the head a fixed (non-persistent, untrained) bias from it whenever polar loads a
model, and the exporter adds the same vector in the ONNX graph, so sampling (embedded backend) and training
compute the same distribution.

Weights: `torch.manual_seed(seed)` before the model is built, then every nn.Linear and nn.Embedding weight
is redrawn from a generator seeded with `seed` (embedding N(0, 1), linear N(0, 1/fan_in)), so the same spec
gives the same weights in every process and the next-token distributions are peaked enough for greedy
decoding to be meaningful (transformers' own init, N(0, 0.02), gives almost uniform logits at this size).
"""
from typing import Dict, Optional

import torch
import torch.nn as nn

from .schema import SCHEMA

ARCHES = ("llama", "qwen3", "qwen3_5")
TINY_DEFAULTS = dict(SCHEMA["tiny"])
RMS_EPS = 1e-6


def is_tiny_spec(spec: str) -> bool:
    return isinstance(spec, str) and spec.startswith("tiny:")


def parse_tiny_spec(spec: str) -> Dict[str, object]:
    cfg: Dict[str, object] = dict(TINY_DEFAULTS)
    body = spec[len("tiny:") :] if spec.startswith("tiny:") else ""
    for part in filter(None, body.split(",")):
        if "=" not in part:
            raise ValueError("tiny model spec: %r is not key=value" % part)
        k, v = part.split("=", 1)
        if k not in cfg:
            raise ValueError("tiny model spec: unknown key %r (known: %s)" % (k, ", ".join(cfg)))
        if k == "arch":
            if v not in ARCHES:
                raise ValueError("tiny model spec: arch must be one of %s (got %r)" % (", ".join(ARCHES), v))
            cfg[k] = v
        elif k == "stop_bias":
            try:
                cfg[k] = float(v)
            except ValueError:
                raise ValueError("tiny model spec: stop_bias=%r is not a number" % v)
        else:
            try:
                cfg[k] = int(v)
            except ValueError:
                raise ValueError("tiny model spec: %s=%r is not an integer" % (k, v))
    if cfg["stop_bias"] and not 0 <= int(cfg["stop_id"]) < int(cfg["vocab"]):
        raise ValueError("tiny model spec: stop_id %d is outside the vocabulary (vocab=%d)" % (cfg["stop_id"], cfg["vocab"]))
    heads, kv = int(cfg["heads"]), int(cfg["kv_heads"])
    if heads % kv:
        raise ValueError("tiny model spec: heads must be a multiple of kv_heads")
    cfg["head_dim"] = int(cfg["head_dim"]) or int(cfg["dim"]) // heads
    cfg["ffn"] = int(cfg["ffn"]) or 2 * int(cfg["dim"])
    if int(cfg["head_dim"]) % 2:
        raise ValueError("tiny model spec: head_dim must be even (rotary embeddings)")
    return cfg


def tiny_config(cfg: Dict[str, object]):
    """The transformers config of a parsed spec."""
    common = dict(
        vocab_size=cfg["vocab"], hidden_size=cfg["dim"], intermediate_size=cfg["ffn"],
        num_hidden_layers=cfg["layers"], num_attention_heads=cfg["heads"], num_key_value_heads=cfg["kv_heads"],
        head_dim=cfg["head_dim"], max_position_embeddings=cfg["max_pos"], rms_norm_eps=RMS_EPS,
        tie_word_embeddings=True, use_cache=False, bos_token_id=None, eos_token_id=None, pad_token_id=None,
        rope_parameters={"rope_type": "default", "rope_theta": float(cfg["rope_theta"])},
    )
    arch = cfg["arch"]
    if arch == "llama":
        from transformers import LlamaConfig  # type: ignore

        return LlamaConfig(attention_bias=False, mlp_bias=False, **common)
    if arch == "qwen3":
        from transformers import Qwen3Config  # type: ignore

        return Qwen3Config(**common)
    from transformers import Qwen3_5TextConfig  # type: ignore

    layers = int(cfg["layers"])
    types = ["linear_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
    hd = int(cfg["head_dim"])
    common.pop("rope_parameters")  # Qwen3.5's own (partial rotary); rope_theta as given
    return Qwen3_5TextConfig(layer_types=types, linear_num_key_heads=cfg["heads"],
                             linear_num_value_heads=cfg["heads"], linear_key_head_dim=hd, linear_value_head_dim=hd,
                             rope_theta=float(cfg["rope_theta"]), **common)


def logit_bias_vector(config, vocab: int) -> Optional[torch.Tensor]:
    """The fixed logit bias of a model whose config carries `polar_logit_bias` ({id: bias}), else None."""
    bias = getattr(config, "polar_logit_bias", None)
    if not bias:
        return None
    vec = torch.zeros(vocab, dtype=torch.float32)
    for k, v in bias.items():
        vec[int(k)] = float(v)
    return vec


def apply_logit_bias(model: nn.Module) -> nn.Module:
    """Gives the head the config's fixed logit bias: a non-persistent buffer (never trained, never saved:
    the config carries it), which nn.Linear's forward and the trainer's chunked head both add."""
    head = model.get_output_embeddings()
    vec = logit_bias_vector(model.config, head.weight.shape[0])
    if vec is None:
        return model
    if getattr(head, "bias", None) is not None:
        raise ValueError("polar_logit_bias on a model whose head has its own bias")
    del head.bias  # the empty parameter slot of nn.Linear(bias=False)
    head.register_buffer("bias", vec.to(device=head.weight.device, dtype=head.weight.dtype), persistent=False)
    return model


def build_tiny(spec: str, dtype: torch.dtype = torch.float32) -> nn.Module:
    """The model of a `tiny:` spec with seeded random weights (see the module docstring)."""
    cfg = parse_tiny_spec(spec)
    config = tiny_config(cfg)
    from transformers import AutoModelForCausalLM  # type: ignore

    seed = int(cfg["seed"])
    torch.manual_seed(seed)
    if float(cfg["stop_bias"]):
        config.polar_logit_bias = {str(int(cfg["stop_id"])): float(cfg["stop_bias"])}
    model = AutoModelForCausalLM.from_config(config)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Embedding):
                module.weight.copy_(torch.randn(module.weight.shape, generator=g))
            elif isinstance(module, nn.Linear) and module.weight is not model.get_input_embeddings().weight:
                module.weight.copy_(torch.randn(module.weight.shape, generator=g) / module.in_features ** 0.5)
    model.config.use_cache = False
    return apply_logit_bias(model.to(dtype))
