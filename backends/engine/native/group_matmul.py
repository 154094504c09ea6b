"""Weight-only matmuls over groups of 32 in C (``group_matmul.c``, AVX2), called through ctypes.

4-bit groups (GGUF Q4_0/Q4_1: ``w = q * scale + low``) and 8-bit ones (GGUF Q8_0: ``w = q *
scale``), with the activations rounded to int16 per group of 32 (within about 4e-5 of the
output's scale of the float product over the same weights).
"""

from __future__ import annotations

import ctypes

import torch

from backends.engine.native.build import load

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
        x, y, xq, sums = self._buffers(x, packed.shape[0])
        status = self._q4(
            x.data_ptr(),
            packed.data_ptr(),
            scale.data_ptr(),
            low.data_ptr(),
            y.data_ptr(),
            xq.data_ptr(),
            sums[0].data_ptr(),
            sums[1].data_ptr(),
            *x.shape,
            y.shape[1],
            torch.get_num_threads(),
        )
        return _checked(status, x, y)

    def q8(self, x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """x [rows, cols] float32 over int8 groups [out, cols] -> [rows, out] float32."""
        x, y, xq, sums = self._buffers(x, q.shape[0])
        status = self._q8(
            x.data_ptr(),
            q.data_ptr(),
            scale.data_ptr(),
            y.data_ptr(),
            xq.data_ptr(),
            sums[0].data_ptr(),
            sums[1].data_ptr(),
            *x.shape,
            y.shape[1],
            torch.get_num_threads(),
        )
        return _checked(status, x, y)

    @staticmethod
    def _buffers(
        x: torch.Tensor, out: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty((rows, out), dtype=torch.float32)
        xq = torch.empty(rows * cols, dtype=torch.int16)
        sums = torch.empty((2, rows * cols // GROUP), dtype=torch.float32)
        return x, y, xq, sums


def _checked(status: int, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if status != 0:
        raise ValueError(f"group matmul cannot run x {tuple(x.shape)} into {y.shape[1]} outputs")
    return y


def _has_avx2() -> bool:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("flags"):
                    flags = line.split()
                    return "avx2" in flags and "fma" in flags
    except OSError:
        pass
    return False
