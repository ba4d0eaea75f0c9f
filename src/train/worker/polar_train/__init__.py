"""polar's GRPO training worker (PyTorch). Launched by `polar train` (src/train/launch.ts); see docs/train.md.

Needs torch 2.x, transformers 5.x and peft (src/train/worker/requirements.txt; `npm run setup:python`).
"""

__all__ = ["loss", "data", "model", "tiny", "schema", "trainer", "export"]
