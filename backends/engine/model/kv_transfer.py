"""The disk cache's model side: keying it for a runner's KV, and copying whole blocks between the
runner's pool and the byte buffers the cache stores (:mod:`backends.engine.core.disk_cache`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from backends.engine.core.disk_cache import (
    DEFAULT_MAX_BYTES,
    FORMAT_VERSION,
    DiskKVCache,
    default_directory,
)
from backends.local.cache_files import file_identity


def open_disk_cache(
    runner: Any,
    model: Path,
    adapter: Path | None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    directory: Path | None = None,
) -> DiskKVCache:
    """The disk cache for ``runner``'s KV: keyed by everything its values depend on."""
    import torch

    from backends.engine.core.block_manager import HASH_NAME

    config = runner.config
    parts = {
        "format": FORMAT_VERSION,
        "model": file_identity(model),
        "adapter": file_identity(adapter),
        "weights": runner.weights,
        "kv_dtype": str(runner.kv_dtype),
        "activations": str(runner.dtype),
        "block_size": runner.block_size,
        "shape": f"{config.num_layers}x{config.num_kv_heads}x{config.head_dim}",
        "device": str(runner.device).split(":")[0],
        "torch": torch.__version__,
        "hash": HASH_NAME,
    }
    block_bytes = runner.block_size * config.kv_bytes_per_token(runner.kv_dtype.itemsize)
    key = "\n".join(f"{name}={value}" for name, value in parts.items())
    return DiskKVCache(
        directory or default_directory(), key, runner.block_size, block_bytes, max_bytes
    )


def gather_blocks(kv_caches: list[tuple[Any, Any]], block_ids: list[int]) -> list[memoryview]:
    """Copies of these pool blocks' keys and values, every layer, one buffer per block."""
    import torch

    device = kv_caches[0][0].device
    index = torch.tensor(block_ids, dtype=torch.long, device=device)
    # [blocks, 2 * layers, block_size, kv_heads, head_dim]: K then V of layer 0, then layer 1...
    stacked = torch.stack([c.index_select(0, index) for pair in kv_caches for c in pair], dim=1)
    raw = stacked.cpu().contiguous().view(torch.uint8).reshape(len(block_ids), -1).numpy()
    return [memoryview(row) for row in raw]


def scatter_blocks(
    kv_caches: list[tuple[Any, Any]], block_ids: list[int], values: Sequence[Any]
) -> None:
    """Write buffers made by :func:`gather_blocks` into pool blocks ``block_ids``."""
    import torch

    k0 = kv_caches[0][0]
    shape = (2 * len(kv_caches), *k0.shape[1:])
    # Block by block, straight from each buffer: faster here than staging all and index_copy_.
    for block_id, buffer in zip(block_ids, values, strict=True):
        block = torch.frombuffer(buffer, dtype=torch.uint8).view(k0.dtype).view(shape)
        block = block.to(k0.device)
        for layer, (k_cache, v_cache) in enumerate(kv_caches):
            k_cache[block_id].copy_(block[2 * layer])
            v_cache[block_id].copy_(block[2 * layer + 1])
