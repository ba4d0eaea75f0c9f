"""polar's GRPO training worker (PyTorch). Launched by `polar train` (src/train/launch.ts); see docs/train.md.

Compatible with torch 1.13 (Debian's python3-torch, used in CI on CPU) and torch 2.x (the GPU machine).
"""

__all__ = ["loss", "data", "model", "trainer", "tiny_llama", "export"]
