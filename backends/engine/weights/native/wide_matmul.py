"""Group matmuls for many activation rows (``wide_matmul.c``, AVX-512 VNNI), through ctypes.

The same 4-bit and 8-bit groups of 32 and the same int16 rounding of the activations as
:mod:`backends.engine.weights.native.group_matmul`, with the weights laid out by output column
instead:
prompt chunks and wide decode batches run at integer multiply-add speed (two products per lane
per instruction) rather than float32 GEMM's. The weights are repacked once, at load.
"""

from __future__ import annotations

import ctypes

import torch

from backends.engine.weights.native.build import load
from backends.engine.weights.native.group_matmul import call_kernel
from backends.local.cpu_features import cpu_flags

GROUP = 32
LANES = 16  # output columns per block: one 512-bit register of int32 sums


class WideMatmul:
    """``wide_q4_matmul`` and ``wide_q8_matmul``; ``available()`` builds them on first use."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self._q4 = library.wide_q4_matmul
        self._q4.restype = ctypes.c_int
        self._q4.argtypes = [ctypes.c_void_p] * 8 + [ctypes.c_int] * 4
        self._q8 = library.wide_q8_matmul
        self._q8.restype = ctypes.c_int
        self._q8.argtypes = [ctypes.c_void_p] * 7 + [ctypes.c_int] * 4

    @staticmethod
    def available() -> WideMatmul | None:
        """The kernels, or None where they cannot be built or this CPU lacks AVX-512 VNNI."""
        flags = cpu_flags()
        if not all(f in flags for f in ("avx512f", "avx512bw", "avx512_vnni")):
            return None
        library = load("wide_matmul")
        if library is None or not library.wide_available():
            return None
        return WideMatmul(library)

    @staticmethod
    def fits(out: int, cols: int) -> bool:
        """Whether a weight of this shape [out, cols] has the kernel's layout."""
        return out % LANES == 0 and cols % GROUP == 0

    @staticmethod
    def pack4(q: torch.Tensor) -> torch.Tensor:
        """uint8 [out, cols] values 0..15 -> [out / 16, cols / 32, 8, 16, 2]: pair p of each
        group in the low nibble, pair p + 8 in the high one."""
        pairs = _by_column_block(q.to(torch.uint8))  # [o, g, 16, 16, 2]
        return (pairs[:, :, :8] | (pairs[:, :, 8:] << 4)).contiguous()

    @staticmethod
    def pack8(q: torch.Tensor) -> torch.Tensor:
        """int8 [out, cols] -> [out / 16, cols / 32, 16, 16, 2]."""
        return _by_column_block(q.to(torch.int8)).contiguous()

    @staticmethod
    def pack_scales(values: torch.Tensor) -> torch.Tensor:
        """float [out, cols / 32] (a scale or low per group) -> [out / 16, cols / 32, 16]."""
        out, groups = values.shape
        blocks = values.float().reshape(out // LANES, LANES, groups)
        return blocks.transpose(1, 2).contiguous()

    def q4(
        self, x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor, low: torch.Tensor
    ) -> torch.Tensor:
        """x [rows, cols] float32 over ``pack4`` weights -> [rows, out] float32."""
        return call_kernel(self._q4, x, w.shape[0] * LANES, w, scale, low)

    def q8(self, x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """x [rows, cols] float32 over ``pack8`` weights -> [rows, out] float32."""
        return call_kernel(self._q8, x, w.shape[0] * LANES, w, scale)


def _by_column_block(q: torch.Tensor) -> torch.Tensor:
    """[out, cols] -> [out / 16, cols / 32, 16 pairs, 16 columns, 2]."""
    out, cols = q.shape
    blocks = q.reshape(out // LANES, LANES, cols // GROUP, GROUP // 2, 2)
    return blocks.permute(0, 2, 3, 1, 4)
