"""What this CPU offers, as Linux lists it in /proc/cpuinfo (read once; empty elsewhere)."""

from __future__ import annotations

import functools
import platform
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")


@functools.cache
def _lines() -> tuple[str, ...]:
    try:
        return tuple(CPUINFO.read_text(encoding="utf-8", errors="replace").splitlines())
    except OSError:
        return ()


def cpuinfo_line(*keys: str) -> str:
    """The first line of /proc/cpuinfo that starts with one of ``keys``, or ""."""
    return next((line for line in _lines() if line.startswith(keys)), "")


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (``avx2``, ``amx_tile``...; ``Features`` on Arm), or none."""
    return frozenset(cpuinfo_line("flags", "Features").partition(":")[2].split())


def cpu_vendor() -> str:
    """The CPU's vendor as Linux names it (``GenuineIntel``, ``AuthenticAMD``), or ""."""
    return cpuinfo_line("vendor_id").partition(":")[2].strip()


def cpu_signature() -> str:
    """What ``-march=native`` compiles for, as one string for a build cache's key: the flags
    line where Linux lists one, else the processor's name."""
    return cpuinfo_line("flags", "Features") or platform.processor()
