"""The model seam: a policy that maps a packed micro-batch to log-probabilities of its trained tokens.

One implementation, HFPolicy, over any `transformers` AutoModelForCausalLM: a directory, a hub id, or
`tiny:arch=qwen3|qwen3_5|llama,vocab=..,dim=..,layers=..,heads=..,kv_heads=..,seed=..`, a random-weight
model of a real Hugging Face class built from a config (tiny.py: the CPU test models). LoRA goes through
`peft`; checkpoints are `save_pretrained(safe_serialization=True)` plus the tokenizer files.

Packing: each sequence of a packed micro-batch runs separately through the backbone (no padding, exact for
every architecture, including hybrid linear-attention models that a 4D mask would not cover); the
micro-batch still sets the gradient-accumulation granularity and token budget. The head is applied only to
the hidden states that predict trained tokens, in chunks (loss.chunked_logprobs), so [tokens x vocab]
logits are never materialised.
"""
import os
import shutil
from contextlib import contextmanager
from typing import Dict, Optional

import torch
import torch.nn as nn

from transformers.utils import logging as hf_logging  # type: ignore

from .loss import chunked_logprobs
from .schema import ADAPTER_DIR
from .tiny import apply_logit_bias, build_tiny, is_tiny_spec


hf_logging.disable_progress_bar()  # the worker's stderr is a log file, not a terminal


def torch_load(path: str):
    """torch.load of polar's own trainer state (optimizer, scheduler and RNG state)."""
    return torch.load(path, map_location="cpu", weights_only=False)


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
                self.model.save_pretrained(os.path.join(directory, ADAPTER_DIR))
            finally:
                self.model.unmerge_adapter()
        else:
            if state_dict is not None and getattr(self.model.config, "tie_word_embeddings", False):
                # a gathered (FSDP) state dict holds tied weights under both names: save them once, as
                # save_pretrained does for the model's own state dict
                tied = getattr(self.model, "_tied_weights_keys", None) or {}
                state_dict = {k: v for k, v in state_dict.items() if k not in tied}
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
    """The tokenizer and chat template files of the source model (a `tiny:` spec has none)."""
    if is_tiny_spec(source):
        return
    if os.path.isdir(source):
        for name in TOKENIZER_FILES:
            p = os.path.join(source, name)
            if os.path.exists(p) and not os.path.exists(os.path.join(directory, name)):
                shutil.copy2(p, os.path.join(directory, name))
        return
    from transformers import AutoTokenizer  # type: ignore

    AutoTokenizer.from_pretrained(source).save_pretrained(directory)


def load_model(spec: str, dtype: torch.dtype = torch.float32):
    """A transformers causal LM: a `tiny:` spec (tiny.py), a directory or a hub id."""
    if is_tiny_spec(spec):
        return build_tiny(spec, dtype)
    from transformers import AutoModelForCausalLM  # type: ignore

    model = AutoModelForCausalLM.from_pretrained(spec, dtype=dtype)
    model.config.use_cache = False
    return apply_logit_bias(model)


def load_policy(spec: str, device: torch.device, lora: bool, dtype: Optional[torch.dtype] = None) -> "HFPolicy":
    if dtype is None:
        # full fine-tune keeps fp32 master weights (bf16 autocast for compute); a frozen LoRA base is bf16
        dtype = torch.bfloat16 if (lora and device.type == "cuda") else torch.float32
    return HFPolicy(load_model(spec, dtype), spec).to(device)
