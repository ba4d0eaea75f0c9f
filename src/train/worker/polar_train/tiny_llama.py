"""A tiny Llama-architecture causal LM in plain torch: the model that is the same on both sides of the CPU
loop. The worker trains it (TinyPolicy, like the `tiny:` model) and `polar export` writes it as an ONNX
decoder with a KV cache that Transformers.js / the embedded backend run (config.json `model_type: llama`).

Selected by `tiny:arch=llama,vocab=151669,dim=32,layers=1,heads=2,kv_heads=1,seed=0` (keys below) or a
checkpoint directory whose polar_tiny.json has `"arch": "llama"`.

The math is Llama's as transformers implements it (so the exported config.json describes the weights
honestly): RMSNorm (fp32 statistics, eps 1e-6), rotary position embeddings on q and k (rotate-half
layout, theta `rope_theta`), grouped-query attention (kv head i // (heads / kv_heads) serves query head
i), SiLU-gated MLP, no biases, a final RMSNorm and a head tied to the token embedding.

One attention routine serves both uses: training runs one packed row (batch 1) with a block-diagonal
causal mask and no cache; the export wrapper runs a batch with past keys/values. Keys are cached after
rotation, as transformers does.
"""
import math
from typing import List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

LLAMA_DEFAULTS = {
    "arch": "llama",
    "vocab": 64,
    "dim": 32,
    "layers": 1,
    "heads": 2,
    "kv_heads": 1,
    "head_dim": 0,  # 0: dim // heads
    "ffn": 0,  # 0: 2 * dim
    "max_pos": 32768,
    "rope_theta": 10000,
    "seed": 0,
}

RMS_EPS = 1e-6


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = RMS_EPS):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int, head_dim: int, ffn: int):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.input_layernorm = RMSNorm(dim)
        self.q_proj = nn.Linear(dim, heads * head_dim, bias=False)
        self.k_proj = nn.Linear(dim, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(dim, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, dim, bias=False)
        self.post_attention_layernorm = RMSNorm(dim)
        self.gate_proj = nn.Linear(dim, ffn, bias=False)
        self.up_proj = nn.Linear(dim, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor,
                past_k: Optional[torch.Tensor] = None, past_v: Optional[torch.Tensor] = None
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x [B,S,D]; cos/sin [B,S,hd]; mask [B or 1,1,S,T] bool (True = may attend); past [B,kv,P,hd].
        Returns (x, keys [B,kv,T,hd], values [B,kv,T,hd]) with T = P + S."""
        b, s, _ = x.shape
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        c, sn = cos.unsqueeze(1), sin.unsqueeze(1)
        q = q * c + rotate_half(q) * sn
        k = k * c + rotate_half(k) * sn
        if past_k is not None:
            k = torch.cat([past_k, k], dim=2)
            v = torch.cat([past_v, v], dim=2)
        rep = self.heads // self.kv_heads
        kk, vv = k, v
        if rep > 1:
            t = k.shape[2]
            kk = k[:, :, None].expand(b, self.kv_heads, rep, t, self.head_dim).reshape(b, self.heads, t, self.head_dim)
            vv = v[:, :, None].expand(b, self.kv_heads, rep, t, self.head_dim).reshape(b, self.heads, t, self.head_dim)
        scores = (q @ kk.transpose(-1, -2)).float() / math.sqrt(self.head_dim)
        # a finite minimum, not -inf: a fully masked row (left padding) stays finite instead of NaN
        scores = scores.masked_fill(~mask, torch.finfo(torch.float32).min)
        att = torch.softmax(scores, dim=-1).to(vv.dtype)
        o = (att @ vv).transpose(1, 2).reshape(b, s, self.heads * self.head_dim)
        x = x + self.o_proj(o)
        h2 = self.post_attention_layernorm(x)
        x = x + self.down_proj(F.silu(self.gate_proj(h2)) * self.up_proj(h2))
        return x, k, v


class TinyLlamaLM(nn.Module):
    """Same interface as model.TinyCausalLM (config dict, hidden(), head_weight, blocks) for TinyPolicy."""

    def __init__(self, vocab: int, dim: int, layers: int, heads: int, kv_heads: int = 1, head_dim: int = 0,
                 ffn: int = 0, max_pos: int = 32768, rope_theta: int = 10000, seed: int = 0, arch: str = "llama"):
        super().__init__()
        head_dim = head_dim or dim // heads
        ffn = ffn or 2 * dim
        if heads % kv_heads:
            raise ValueError("tiny llama: heads must be a multiple of kv_heads")
        if head_dim % 2:
            raise ValueError("tiny llama: head_dim must be even (rotary embeddings)")
        self.config = {"arch": "llama", "vocab": vocab, "dim": dim, "layers": layers, "heads": heads,
                       "kv_heads": kv_heads, "head_dim": head_dim, "ffn": ffn, "max_pos": max_pos,
                       "rope_theta": rope_theta, "seed": seed}
        g = torch.Generator().manual_seed(seed)
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList([LlamaBlock(dim, heads, kv_heads, head_dim, ffn) for _ in range(layers)])
        self.ln_f = RMSNorm(dim)
        # seeded init from our own generator: the same spec gives the same weights in every process
        with torch.no_grad():
            self.embed.weight.copy_(torch.randn(vocab, dim, generator=g))
            for block in self.blocks:
                for lin in (block.q_proj, block.k_proj, block.v_proj, block.o_proj, block.gate_proj,
                            block.up_proj, block.down_proj):
                    lin.weight.copy_(torch.randn(lin.weight.shape, generator=g) / math.sqrt(lin.in_features))
        inv = 1.0 / (float(rope_theta) ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv, persistent=False)
        self.gradient_checkpointing = False

    @property
    def head_weight(self) -> torch.Tensor:
        return self.embed.weight  # tied

    def rope(self, position_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """position_ids [B,S] -> cos, sin [B,S,head_dim]"""
        freqs = position_ids.unsqueeze(-1).float() * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()

    def run_blocks(self, x, cos, sin, mask, past: Optional[List[torch.Tensor]] = None):
        presents: List[torch.Tensor] = []
        for i, block in enumerate(self.blocks):
            pk = past[2 * i] if past is not None else None
            pv = past[2 * i + 1] if past is not None else None
            if self.gradient_checkpointing and torch.is_grad_enabled() and past is None:
                x, k, v = checkpoint(block, x, cos, sin, mask, use_reentrant=False)
            else:
                x, k, v = block(x, cos, sin, mask, pk, pv)
            presents += [k, v]
        return self.ln_f(x), presents

    def hidden(self, input_ids: torch.Tensor, position_ids: torch.Tensor, seg_lens: List[int]) -> torch.Tensor:
        """Packed row [T] (position ids restart per sequence) -> final hidden states [T, D]."""
        seg = torch.repeat_interleave(torch.arange(len(seg_lens)), torch.tensor(seg_lens)).to(input_ids.device)
        t = input_ids.shape[0]
        causal = torch.ones(t, t, dtype=torch.bool, device=input_ids.device).tril()
        allowed = causal & (seg.unsqueeze(0) == seg.unsqueeze(1))  # block-diagonal causal
        cos, sin = self.rope(position_ids.unsqueeze(0))
        x = self.embed(input_ids).unsqueeze(0)
        h, _ = self.run_blocks(x, cos, sin, allowed[None, None])
        return h[0]

    def logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Full logits of one unpacked sequence (tests and references)."""
        h = self.hidden(input_ids, torch.arange(input_ids.shape[0]), [input_ids.shape[0]])
        return h @ self.head_weight.t()


def parse_llama_spec(pairs: dict) -> dict:
    cfg = dict(LLAMA_DEFAULTS)
    for k, v in pairs.items():
        if k not in cfg:
            raise ValueError("tiny model spec (arch=llama): unknown key %r (known: %s)" % (k, ", ".join(cfg)))
        cfg[k] = v if k == "arch" else int(v)
    if cfg["dim"] % cfg["heads"] and not cfg["head_dim"]:
        raise ValueError("tiny model spec: dim must be a multiple of heads (or give head_dim)")
    return cfg
