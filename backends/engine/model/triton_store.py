"""Triton kernel that writes the new tokens' keys and values into the paged KV cache.

One program per new token copies its ``kv_heads * head_dim`` keys and values to the cache slot
``slot_mapping[token]`` (= block id * block size + offset); a slot of -1 is skipped (padding
tokens of a captured CUDA graph). The shape follows nano-vllm's ``store_kvcache`` kernel.

Kernels are built on first use: with ``TRITON_INTERPRET=1`` set at that moment they run in
Triton's interpreter on CPU tensors (numpy, float32), which is how the tests exercise them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from agent.errors import UserError

if TYPE_CHECKING:
    import torch

_INSTALL = "pip install triton  (it comes with CUDA builds of torch)"
_KERNELS: dict[bool, Any] = {}


def interpret_mode() -> bool:
    """True when Triton is set to simulate kernels on the CPU (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def check_device(*tensors: torch.Tensor) -> None:
    """Triton kernels need CUDA tensors, or CPU tensors under the interpreter."""
    on_cpu = [t.device.type == "cpu" for t in tensors]
    if any(on_cpu) and not (all(on_cpu) and interpret_mode()):
        raise ValueError(
            "Triton kernels need all tensors on one CUDA device "
            "(or all on the CPU with TRITON_INTERPRET=1 to simulate them)"
        )


def require_triton() -> None:
    """Raises a UserError with the install command where Triton cannot be imported."""
    try:
        import triton.language  # noqa: F401  (imports triton too)
    except ImportError as exc:
        raise UserError(f"The GPU kernels need Triton: {_INSTALL}") from exc


def _kernel() -> Any:
    interpret = interpret_mode()
    if interpret not in _KERNELS:
        require_triton()
        import triton
        import triton.language as tl

        def store_kv_kernel(
            k_ptr,
            v_ptr,
            k_cache_ptr,
            v_cache_ptr,
            slot_ptr,
            k_stride,
            v_stride,
            ROW: tl.constexpr,
            ROW_PADDED: tl.constexpr,
        ):
            token = tl.program_id(0)
            # int64: slot * ROW overflows int32 for caches past 2 GiB elements.
            slot = tl.load(slot_ptr + token).to(tl.int64)
            if slot >= 0:
                cols = tl.arange(0, ROW_PADDED)
                mask = cols < ROW
                key = tl.load(k_ptr + token * k_stride + cols, mask=mask)
                value = tl.load(v_ptr + token * v_stride + cols, mask=mask)
                tl.store(k_cache_ptr + slot * ROW + cols, key, mask=mask)
                tl.store(v_cache_ptr + slot * ROW + cols, value, mask=mask)

        _KERNELS[interpret] = triton.jit(store_kv_kernel)
    return _KERNELS[interpret]


def store_kv(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Write k, v ([tokens, kv_heads, head_dim]) into the caches ([blocks, block_size, kv_heads,
    head_dim]) at ``slot_mapping`` ([tokens] int, -1 = skip)."""
    import triton

    check_device(k, v, k_cache, v_cache, slot_mapping)
    num_tokens, kv_heads, head_dim = k.shape
    row = kv_heads * head_dim
    for name, t in (("k", k), ("v", v)):
        if t.shape != k.shape or t.stride(2) != 1 or t.stride(1) != head_dim:
            raise ValueError(f"store_kv: {name} must be [tokens, kv_heads, head_dim], rows dense")
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        if not cache.is_contiguous() or cache.shape[2:] != (kv_heads, head_dim):
            raise ValueError(f"store_kv: {name} must be contiguous [blocks, block, kv_heads, dim]")
        if cache.dtype != k.dtype:
            raise ValueError(f"store_kv: {name} is {cache.dtype} but k is {k.dtype}")
    if slot_mapping.shape != (num_tokens,):
        raise ValueError(f"store_kv: slot_mapping has shape {tuple(slot_mapping.shape)}")
    if num_tokens == 0:
        return
    _kernel()[(num_tokens,)](
        k,
        v,
        k_cache,
        v_cache,
        slot_mapping,
        k.stride(0),
        v.stride(0),
        ROW=row,
        ROW_PADDED=triton.next_power_of_2(row),
    )
