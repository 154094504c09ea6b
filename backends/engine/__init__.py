"""clawloop's bundled paged engine: continuous batching over a paged, prefix-cached KV cache.

The structure follows nano-vllm: ``sequence`` ← ``block_manager`` ← ``scheduler`` ←
``llm_engine`` → ``model_runner``. Everything up to the engine is pure Python (integers and lists,
unit-tested without a GPU); only the model runner and its layers touch torch. This package's import
therefore stays torch-free: the heavy parts are ``backend`` and ``model_runner``.
"""

from __future__ import annotations
