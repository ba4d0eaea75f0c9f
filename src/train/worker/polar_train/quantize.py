"""Weight-only int8 quantisation for `polar export --quantize int8` (export.py): one symmetric scale per
output row (per token for the embedding); the modules dequantise before each matmul, so the exported graph
computes in fp32 from a file about 4x smaller."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F


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


def quantized_copy(model: nn.Module) -> nn.Module:
    """A copy of a transformers causal LM whose decoder linears, embedding and head are weight-only int8.
    It is still the transformers model: its own forward computes the dequantised model (the reference)."""
    q = copy.deepcopy(model)
    for layer in q.model.layers:
        for parent in (layer.self_attn, layer.mlp):
            for name, child in list(parent.named_children()):
                if isinstance(child, nn.Linear):
                    setattr(parent, name, QLinear(child))
    tied = getattr(q.config, "tie_word_embeddings", False)
    q.model.embed_tokens = QEmbedding(model.model.embed_tokens)
    q.lm_head = QHead(q.model.embed_tokens, getattr(model.lm_head, "bias", None)) if tied else QLinear(model.lm_head)
    return q


class QHead(nn.Module):
    """The head tied to a QEmbedding: the same int8 rows, stored once."""

    def __init__(self, emb: "QEmbedding", bias=None):
        super().__init__()
        self.emb = [emb]  # a list: not a submodule, so its buffers are not registered twice
        self.bias = bias  # a tiny model's fixed stop bias (tiny.py apply_logit_bias), or None

    def forward(self, h):
        logits = self.emb[0].head(h)
        return logits if self.bias is None else logits + self.bias
