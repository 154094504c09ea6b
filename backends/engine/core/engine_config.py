"""The engine's configuration: one object, built once, handed whole to every part that needs it.

:class:`EngineConfig` is what the engine is built from, already resolved: the model file, the
adapter, the device and every knob. Where the user's settings are read, ``load_engine`` builds it
from them (``backends.engine.backend.engine_config``); tests and benchmarks construct it
directly. The runner reads the model-side fields, the engine core and the scheduler the batching
ones, so a new setting is one field here and the lines that use it (and, for a key of the
``[backends.engine]`` table, its field in ``EngineSettings``).

It is plain data, free of torch: dtypes are names (``"float32"``, ``"bfloat16"``,
``"float16"``), turned into torch dtypes by the model runner.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Everything one engine is built from. The defaults are those of the ``[backends.engine]``
    table, except that nothing is kept on disk (no weight cache, no disk prefix cache) unless
    asked: that is for the settings to decide, and a test or benchmark leaves no files behind."""

    # --- the model runner ------------------------------------------------------------------------
    # A .gguf file or a Hugging Face folder; unset only where no model runner is built (a test
    # double runs the engine).
    model: Path | None = None
    adapter: Path | None = None  # a GGUF LoRA file merged into the weights at load
    device: str = "cpu"
    dtype: str | None = None  # the activations (unset: float32 on CPU, bfloat16 on CUDA)
    # Projection weights: float32, int4-decode, bfloat16, int8 or int4 (unset: loader's choice).
    weights: str | None = None
    kv_dtype: str | None = None  # the KV cache's (unset: model_runner.default_kv_dtype)
    kv_cache_bytes: int | None = None  # unset: sized from free memory
    block_size: int = 16
    weight_cache: bool = False  # keep the loaded model in the user's cache folder
    # Decode attention in the C kernel over the block pool (CPU, float32; the PyTorch path where
    # it cannot be built), and short steps through every layer in one C call where the model
    # allows it (backends.engine.model.fused_step).
    native_attention: bool = True
    fused_step: bool = True
    show_progress: bool = False  # a progress bar while the weights load
    # --- the scheduler and the step loop -------------------------------------------------------
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 2048
    enable_prefix_caching: bool = True
    # Cap on one sequence's prefill chunk per step, so a long prompt cannot stall decodes (0: off).
    long_prefill_token_threshold: int = 0
    max_model_len: int | None = None  # unset: what the KV cache and the model allow
    # Append the tokens a tool-call grammar forces at once instead of decoding them one by one.
    jump_forward: bool = True
    record_kv_usage: bool = False  # per step, the share of held KV slots in use (benchmarks)
    # --- the disk prefix cache (opened by whoever builds the engine) ---------------------------
    disk_cache: bool = False
    disk_cache_mib: int = 1024
