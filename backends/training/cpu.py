"""Whether this CPU runs bfloat16 matrix products natively (AVX-512 BF16 or AMX)."""

from __future__ import annotations

from backends.local.cpu_features import cpu_flags

BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def native_bf16() -> bool:
    """True when bfloat16 autocast is faster than float32 here; on AVX2 alone it is far slower."""
    return any(flag in cpu_flags() for flag in BF16_FLAGS)
