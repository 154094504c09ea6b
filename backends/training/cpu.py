"""Whether this CPU runs bfloat16 matrix products natively (AVX-512 BF16 or AMX)."""

from __future__ import annotations

from pathlib import Path

BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_flags() -> set[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where it cannot be read)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()


def native_bf16() -> bool:
    """True when bfloat16 autocast is faster than float32 here; on AVX2 alone it is far slower."""
    return any(flag in cpu_flags() for flag in BF16_FLAGS)
