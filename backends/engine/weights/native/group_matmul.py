"""Weight-only matmuls over groups of 32 in C (``group_matmul.c``, AVX2), called through ctypes.

4-bit groups (GGUF Q4_0/Q4_1: ``w = q * scale + low``) and 8-bit ones (GGUF Q8_0: ``w = q *
scale``), with the activations rounded to int16 per group of 32 (within about 4e-5 of the
output's scale of the float product over the same weights).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import torch

from backends.engine.weights.native.build import load
from backends.local.cpu_features import cpu_flags

GROUP = 32


class GroupMatmul:
    """``q4_matmul`` and ``q8_matmul``; ``available()`` builds them on first use."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self._q4 = library.q4_matmul
        self._q4.restype = ctypes.c_int
        self._q4.argtypes = [ctypes.c_void_p] * 8 + [ctypes.c_int] * 4
        self._q8 = library.q8_matmul
        self._q8.restype = ctypes.c_int
        self._q8.argtypes = [ctypes.c_void_p] * 7 + [ctypes.c_int] * 4

    @staticmethod
    def available() -> GroupMatmul | None:
        """The kernels, or None where they cannot be built or this CPU lacks AVX2 and FMA."""
        if not _has_avx2():
            return None
        library = load("group_matmul")
        return None if library is None else GroupMatmul(library)

    @staticmethod
    def pack(q: torch.Tensor) -> torch.Tensor:
        """uint8 [out, cols] values 0..15 -> [out, cols / 32, 16]: q[j] | q[j + 16] << 4."""
        rows, cols = q.shape
        grouped = q.reshape(rows, cols // GROUP, GROUP).to(torch.uint8)
        return (grouped[..., :16] | (grouped[..., 16:] << 4)).contiguous()

    def q4(
        self, x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor, low: torch.Tensor
    ) -> torch.Tensor:
        """x [rows, cols] float32 over packed 4-bit groups -> [rows, out] float32."""
        return call_kernel(self._q4, x, packed.shape[0], packed, scale, low)

    def q8(self, x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """x [rows, cols] float32 over int8 groups [out, cols] -> [rows, out] float32."""
        return call_kernel(self._q8, x, q.shape[0], q, scale)


def call_kernel(
    kernel: Callable[..., int], x: torch.Tensor, out: int, *weights: torch.Tensor
) -> torch.Tensor:
    """kernel(x, *weights, y, scratch..., rows, cols, out, threads) into a fresh y."""
    x = x.contiguous()
    rows, cols = x.shape
    y = torch.empty((rows, out), dtype=torch.float32)
    xq = torch.empty(rows * cols, dtype=torch.int16)
    sums = torch.empty((2, rows * cols // GROUP), dtype=torch.float32)
    pointers = [w.data_ptr() for w in (x, *weights, y, xq, sums[0], sums[1])]
    status = kernel(*pointers, rows, cols, out, torch.get_num_threads())
    if status != 0:
        raise ValueError(f"group matmul cannot run x {tuple(x.shape)} into {out} outputs")
    return y


def _has_avx2() -> bool:
    flags = cpu_flags()
    return "avx2" in flags and "fma" in flags
