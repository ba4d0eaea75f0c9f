"""The model seam: a policy that maps a packed micro-batch to log-probabilities of its trained tokens.

Two implementations share the trainer:
- HFPolicy: any `transformers` AutoModelForCausalLM (a directory or a hub id), LoRA through `peft`, saved
  with `save_pretrained(safe_serialization=True)` plus the tokenizer: the real path (GPU machine).
- TinyPolicy: a small causal transformer in plain torch (token + learned position embeddings, pre-norm
  blocks, tied head), selected by `tiny:vocab=64,dim=32,layers=2,heads=2,seed=0` or a directory with
  `polar_tiny.json`; `tiny:arch=llama,...` selects tiny_llama.TinyLlamaLM instead, the Llama-architecture
  model `polar export` writes as ONNX for the embedded backend. It is the CPU test path: CI has torch but neither transformers nor peft. Its LoRA
  (`TinyLoRALinear`) is a minimal adapter for tests only; peft is the real LoRA path.

Packing: TinyPolicy runs the whole packed row at once with a block-diagonal causal mask (sequences never
see each other). HFPolicy runs each sequence of the micro-batch separately (no padding, correct for any
architecture, including hybrid linear-attention models that a 4D mask would not cover); the micro-batch
still sets the gradient-accumulation granularity and token budget.

In both, the head is applied only to the hidden states that predict trained tokens, in chunks
(loss.chunked_logprobs), so [tokens x vocab] logits are never materialised.
"""
import json
import math
import os
import shutil
from contextlib import contextmanager
from typing import Dict, List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from .loss import chunked_logprobs

try:  # optional: the GPU machine has it, Debian CI does not
    import safetensors.torch as _st  # type: ignore
except Exception:  # pragma: no cover - depends on the environment
    _st = None

TINY_CONFIG = "polar_tiny.json"
CHECKPOINT_META = "polar_checkpoint.json"


def has_module(name: str) -> bool:
    try:
        __import__(name)
        return True
    except Exception:
        return False


def save_state_dict(state: Dict[str, torch.Tensor], directory: str, stem: str = "model") -> str:
    """safetensors when the package exists, else torch.save; returns the format used."""
    state = {k: v.detach().cpu().contiguous() for k, v in state.items()}
    if _st is not None:
        _st.save_file(state, os.path.join(directory, stem + ".safetensors"))
        return "safetensors"
    torch.save(state, os.path.join(directory, stem + ".pt"))
    return "torch"


def torch_load(path: str):
    """torch.load of polar's own files: weights_only where it suffices (torch >= 1.13), else full unpickling."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception:
        return torch.load(path, map_location="cpu", weights_only=False)


def load_state_dict(directory: str, stem: str = "model") -> Dict[str, torch.Tensor]:
    st_path = os.path.join(directory, stem + ".safetensors")
    if os.path.exists(st_path):
        if _st is None:
            raise RuntimeError("%s is safetensors but the safetensors package is not installed" % st_path)
        return _st.load_file(st_path)
    return torch_load(os.path.join(directory, stem + ".pt"))


# ---------------------------------------------------------------- tiny model (CPU test path)


class TinyLoRALinear(nn.Module):
    """y = W x + (alpha / r) B A x with W frozen, B zero-initialised. Test-path LoRA only (peft is real)."""

    def __init__(self, base: nn.Linear, r: int, alpha: float, seed: int):
        super().__init__()
        self.base = base
        for p in self.base.parameters():
            p.requires_grad_(False)
        g = torch.Generator().manual_seed(seed)
        self.lora_A = nn.Parameter(torch.randn(r, base.in_features, generator=g) / math.sqrt(base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
        self.scaling = alpha / r
        self.enabled = True

    def forward(self, x):
        y = self.base(x)
        if self.enabled:
            y = y + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scaling
        return y

    def merged_weight(self) -> torch.Tensor:
        return self.base.weight + self.scaling * (self.lora_B @ self.lora_A)


class TinyBlock(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.o_proj = nn.Linear(dim, dim, bias=False)
        self.ln2 = nn.LayerNorm(dim)
        self.up_proj = nn.Linear(dim, 4 * dim, bias=False)
        self.down_proj = nn.Linear(4 * dim, dim, bias=False)

    def forward(self, x: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        t, d = x.shape
        h = self.ln1(x)
        hd = d // self.heads
        q = self.q_proj(h).view(t, self.heads, hd).transpose(0, 1)
        k = self.k_proj(h).view(t, self.heads, hd).transpose(0, 1)
        v = self.v_proj(h).view(t, self.heads, hd).transpose(0, 1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
        scores = scores.float().masked_fill(~allowed, float("-inf"))
        att = torch.softmax(scores, dim=-1).to(v.dtype)
        o = (att @ v).transpose(0, 1).reshape(t, d)
        x = x + self.o_proj(o)
        x = x + self.down_proj(F.gelu(self.up_proj(self.ln2(x))))
        return x


class TinyCausalLM(nn.Module):
    def __init__(self, vocab: int, dim: int, layers: int, heads: int, max_pos: int = 4096, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.config = {"vocab": vocab, "dim": dim, "layers": layers, "heads": heads, "max_pos": max_pos, "seed": seed}
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_pos, dim)
        self.blocks = nn.ModuleList([TinyBlock(dim, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(dim)
        nn.init.normal_(self.embed.weight, std=0.5)
        nn.init.normal_(self.pos.weight, std=0.1)
        self.gradient_checkpointing = False

    @property
    def head_weight(self) -> torch.Tensor:
        return self.embed.weight  # tied

    def hidden(self, input_ids: torch.Tensor, position_ids: torch.Tensor, seg_lens: List[int]) -> torch.Tensor:
        if int(position_ids.max()) >= self.config["max_pos"]:
            raise ValueError("sequence longer than the tiny model's max_pos=%d" % self.config["max_pos"])
        seg = torch.repeat_interleave(torch.arange(len(seg_lens)), torch.tensor(seg_lens))
        t = input_ids.shape[0]
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        allowed = causal & (seg.unsqueeze(0) == seg.unsqueeze(1))  # block-diagonal causal
        x = self.embed(input_ids) + self.pos(position_ids)
        for block in self.blocks:
            if self.gradient_checkpointing and torch.is_grad_enabled():
                x = checkpoint(block, x, allowed, use_reentrant=False)
            else:
                x = block(x, allowed)
        return self.ln_f(x)

    def logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Full logits of one unpacked sequence (tests and the naive benchmark baseline only)."""
        h = self.hidden(input_ids, torch.arange(input_ids.shape[0]), [input_ids.shape[0]])
        return h @ self.head_weight.t()


def parse_tiny_spec(spec: str) -> Dict[str, int]:
    """`tiny:vocab=..,dim=..` (the original tiny model) or `tiny:arch=llama,...` (tiny_llama.py)."""
    cfg = {"vocab": 64, "dim": 32, "layers": 2, "heads": 2, "max_pos": 4096, "seed": 0}
    body = spec[len("tiny:") :] if spec.startswith("tiny:") else ""
    pairs = {}
    for part in filter(None, body.split(",")):
        if "=" not in part:
            raise ValueError("tiny model spec: %r is not key=value" % part)
        k, v = part.split("=", 1)
        pairs[k] = v
    if pairs.get("arch", "gpt") == "llama":
        from .tiny_llama import parse_llama_spec

        return parse_llama_spec(pairs)
    if pairs.pop("arch", "gpt") != "gpt":
        raise ValueError("tiny model spec: arch must be gpt (the default) or llama")
    for k, v in pairs.items():
        if k not in cfg:
            raise ValueError("tiny model spec: unknown key %r (known: %s)" % (k, ", ".join(cfg)))
        cfg[k] = int(v)
    if cfg["dim"] % cfg["heads"]:
        raise ValueError("tiny model spec: dim must be a multiple of heads")
    return cfg


class TinyPolicy(nn.Module):
    kind = "tiny"

    def __init__(self, lm: TinyCausalLM, source: str):
        super().__init__()
        self.lm = lm
        self.source = source
        self.lora = False

    @property
    def vocab_size(self) -> int:
        return self.lm.config["vocab"]

    def enable_lora(self, r: int, alpha: float, seed: int = 0) -> None:
        for p in self.lm.parameters():
            p.requires_grad_(False)
        i = 0
        for block in self.lm.blocks:
            for name in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"):
                if not hasattr(block, name):
                    continue
                setattr(block, name, TinyLoRALinear(getattr(block, name), r, alpha, seed + i))
                i += 1
        self.lora = True

    def enable_gradient_checkpointing(self) -> None:
        self.lm.gradient_checkpointing = True

    @contextmanager
    def reference(self):
        """Adapters off: with LoRA the frozen base is the reference policy."""
        mods = [m for m in self.modules() if isinstance(m, TinyLoRALinear)]
        for m in mods:
            m.enabled = False
        try:
            yield
        finally:
            for m in mods:
                m.enabled = True

    def forward(self, input_ids, position_ids, seg_lens, sel_pos, sel_tgt, chunk_size: int = 1024):
        h = self.lm.hidden(input_ids, position_ids, seg_lens)
        return chunked_logprobs(h[sel_pos], self.lm.head_weight, sel_tgt, chunk_size)

    def trainable_state(self) -> Dict[str, torch.Tensor]:
        return {k: v for k, v in self.state_dict().items() if (not self.lora) or "lora_" in k}

    def load_trainable_state(self, state) -> None:
        missing, unexpected = self.load_state_dict(state, strict=not self.lora)
        if unexpected:
            raise RuntimeError("checkpoint holds unexpected tensors: %s" % ", ".join(unexpected[:5]))

    def merged_state(self) -> Dict[str, torch.Tensor]:
        """Plain TinyCausalLM weights (LoRA merged in), loadable without adapters."""
        out = {}
        for name, mod in self.lm.named_modules():
            if isinstance(mod, TinyLoRALinear):
                out[name + ".weight"] = mod.merged_weight().detach()
        for k, v in self.lm.state_dict().items():
            if "lora_" in k:
                continue
            k2 = k.replace(".base.", ".")
            if k2 not in out:
                out[k2] = v
        return out

    def save_pretrained(self, directory: str) -> str:
        with open(os.path.join(directory, TINY_CONFIG), "w") as fh:
            json.dump(self.lm.config, fh)
        return save_state_dict(self.merged_state(), directory)


def build_tiny_lm(cfg: dict) -> nn.Module:
    if cfg.get("arch") == "llama":
        from .tiny_llama import TinyLlamaLM

        return TinyLlamaLM(**cfg)
    return TinyCausalLM(**{k: v for k, v in cfg.items() if k != "arch"})


def load_tiny(spec: str) -> TinyPolicy:
    if os.path.isdir(spec):
        with open(os.path.join(spec, TINY_CONFIG)) as fh:
            cfg = json.load(fh)
        lm = build_tiny_lm(cfg)
        lm.load_state_dict(load_state_dict(spec))
        return TinyPolicy(lm, spec)
    return TinyPolicy(build_tiny_lm(parse_tiny_spec(spec)), spec)


# ---------------------------------------------------------------- Hugging Face models (GPU path)


class HFPolicy(nn.Module):
    kind = "hf"

    def __init__(self, model, source: str):
        super().__init__()
        self.model = model
        self.source = source
        self.lora = False

    @property
    def inner(self):
        return self.model.get_base_model() if self.lora else self.model

    @property
    def vocab_size(self) -> int:
        return int(self.inner.get_output_embeddings().weight.shape[0])

    def enable_lora(self, r: int, alpha: float, target_modules, dropout: float = 0.0) -> None:
        from peft import LoraConfig, get_peft_model  # type: ignore

        cfg = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=target_modules, task_type="CAUSAL_LM")
        self.model = get_peft_model(self.model, cfg)
        self.lora = True

    def enable_gradient_checkpointing(self) -> None:
        try:
            self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        except TypeError:  # older transformers
            self.model.gradient_checkpointing_enable()
        if self.lora and hasattr(self.model, "enable_input_require_grads"):
            self.model.enable_input_require_grads()
        self.model.config.use_cache = False

    @contextmanager
    def reference(self):
        if not self.lora:
            raise RuntimeError("reference() without LoRA: use a separate reference model")
        with self.model.disable_adapter():
            yield

    def _backbone(self):
        inner = self.inner
        if hasattr(inner, "get_decoder"):
            dec = inner.get_decoder()
            if dec is not None:
                return dec
        return inner.model

    def forward(self, input_ids, position_ids, seg_lens, sel_pos, sel_tgt, chunk_size: int = 1024):
        backbone = self._backbone()
        hs = []
        start = 0
        for n in seg_lens:  # one sequence at a time: exact for every architecture, no padding
            ids = input_ids[start : start + n].unsqueeze(0)
            pos = position_ids[start : start + n].unsqueeze(0)
            out = backbone(input_ids=ids, position_ids=pos, use_cache=False)
            hs.append(out.last_hidden_state[0])
            start += n
        h = torch.cat(hs) if len(hs) > 1 else hs[0]
        head = self.inner.get_output_embeddings()
        return chunked_logprobs(h[sel_pos], head.weight, sel_tgt, chunk_size, getattr(head, "bias", None))

    def trainable_state(self) -> Dict[str, torch.Tensor]:
        if self.lora:
            from peft import get_peft_model_state_dict  # type: ignore

            return get_peft_model_state_dict(self.model)
        return self.model.state_dict()

    def load_trainable_state(self, state) -> None:
        if self.lora:
            from peft import set_peft_model_state_dict  # type: ignore

            set_peft_model_state_dict(self.model, state)
        else:
            self.model.load_state_dict(state)

    def save_pretrained(self, directory: str, state_dict: Optional[Dict[str, torch.Tensor]] = None) -> str:
        if self.lora:
            # merge the adapter into a plain checkpoint that transformers and vLLM load as is
            self.model.merge_adapter()
            try:
                base = self.model.get_base_model()
                sd = {}
                for k, v in base.state_dict().items():
                    if "lora_" in k:
                        continue
                    sd[k.replace(".base_layer.", ".")] = v.detach().cpu()
                base.save_pretrained(directory, state_dict=sd, safe_serialization=True)
                self.model.save_pretrained(os.path.join(directory, "adapter"))
            finally:
                self.model.unmerge_adapter()
        else:
            self.model.save_pretrained(directory, state_dict=state_dict, safe_serialization=True)
        copy_tokenizer(self.source, directory)
        return "safetensors"


TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
    "generation_config.json",
    "preprocessor_config.json",
)


def copy_tokenizer(source: str, directory: str) -> None:
    if os.path.isdir(source):
        for name in TOKENIZER_FILES:
            p = os.path.join(source, name)
            if os.path.exists(p) and not os.path.exists(os.path.join(directory, name)):
                shutil.copy2(p, os.path.join(directory, name))
        return
    from transformers import AutoTokenizer  # type: ignore

    AutoTokenizer.from_pretrained(source).save_pretrained(directory)


def load_policy(spec: str, device: torch.device, lora: bool, dtype: Optional[torch.dtype] = None):
    """tiny:... or a polar_tiny.json directory -> TinyPolicy; anything else -> transformers."""
    if spec.startswith("tiny:") or (os.path.isdir(spec) and os.path.exists(os.path.join(spec, TINY_CONFIG))):
        return load_tiny(spec).to(device)
    if not has_module("transformers"):
        raise RuntimeError("model %r needs the transformers package (pip install transformers)" % spec)
    from transformers import AutoModelForCausalLM  # type: ignore

    if dtype is None:
        # full fine-tune keeps fp32 master weights (bf16 autocast for compute); a frozen LoRA base is bf16
        dtype = torch.bfloat16 if (lora and device.type == "cuda") else torch.float32
    import transformers  # type: ignore

    major_minor = tuple(int(x) for x in transformers.__version__.split(".")[:2])
    kwargs = {"dtype": dtype} if major_minor >= (4, 56) else {"torch_dtype": dtype}
    model = AutoModelForCausalLM.from_pretrained(spec, **kwargs)
    model.config.use_cache = False
    return HFPolicy(model, spec).to(device)
