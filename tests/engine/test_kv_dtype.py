"""The KV cache's dtype: float16 beside 4-bit weights on the CPU where the C kernel reads it,
the activations' dtype otherwise, and a clear error for a combination the engine cannot run."""

from __future__ import annotations

import pytest
import torch

from agent.errors import UserError
from backends.engine.core.engine_config import EngineConfig
from backends.engine.model.model_runner import ModelRunner, default_kv_dtype
from backends.engine.weights.native.paged_decode import PagedDecode
from backends.gguf.default_model import default_model_path


def test_the_default_follows_the_weights_and_the_kernel() -> None:
    assert default_kv_dtype(torch.float32, "int4", half_kernel=True) == torch.float16
    assert default_kv_dtype(torch.float32, "int8", half_kernel=True) == torch.float16
    assert default_kv_dtype(torch.float32, "int4", half_kernel=False) == torch.float32
    assert default_kv_dtype(torch.float32, "float32", half_kernel=True) == torch.float32
    assert default_kv_dtype(torch.bfloat16, "bfloat16", half_kernel=True) == torch.bfloat16


def test_int4_runner_pools_and_the_override() -> None:
    kernel = PagedDecode.available()
    half = kernel is not None and kernel.reads_half(3, 64)
    runner = ModelRunner(EngineConfig(default_model_path(), kv_cache_bytes=8 << 20, weights="int4"))
    expected = torch.float16 if half else torch.float32
    assert runner.kv_dtype == expected
    assert all(k.dtype == expected and v.dtype == expected for k, v in runner.kv_caches)
    blocks = runner.num_blocks
    runner.close()
    kept = ModelRunner(
        EngineConfig(
            default_model_path(), kv_cache_bytes=8 << 20, weights="int4", kv_dtype="float32"
        )
    )
    assert kept.kv_dtype == torch.float32
    assert all(k.dtype == torch.float32 for k, _ in kept.kv_caches)
    if half:  # the same bytes hold twice the blocks at float16
        assert blocks == 2 * kept.num_blocks
    kept.close()


def test_a_float16_cache_beside_bfloat16_activations_is_refused() -> None:
    with pytest.raises(UserError, match="KV cache"):
        ModelRunner(
            EngineConfig(
                default_model_path(),
                kv_cache_bytes=8 << 20,
                dtype="bfloat16",
                weights="bfloat16",
                kv_dtype="float16",
            )
        )
