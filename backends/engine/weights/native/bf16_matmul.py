"""bfloat16 matmuls on AVX512-BF16 (``bf16_matmul.c``), through ctypes.

float32 activations are rounded to bfloat16 and multiplied with bfloat16 weights, the sums kept
in float32; the result is float32. Every row's result is the same in any batch: the kernel's
order of sums does not depend on the number of rows (oneDNN's does). The weights are laid out
by blocks of 16 output columns once, at load.
"""

from __future__ import annotations

import ctypes

import torch

from backends.engine.weights.native.build import load
from backends.local.cpu_features import cpu_flags

LANES = 16  # output columns per block: one 512-bit register of float32 sums


class Bf16Matmul:
    """``bf16_matmul``; ``available()`` builds it on first use."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self._run = library.bf16_matmul
        self._run.restype = ctypes.c_int
        self._run.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 4

    @staticmethod
    def available() -> Bf16Matmul | None:
        """The kernel, or None where it cannot be built or this CPU lacks AVX512-BF16."""
        flags = cpu_flags()
        if not all(f in flags for f in ("avx512f", "avx512bw", "avx512_bf16")):
            return None
        library = load("bf16_matmul")
        if library is None or not library.bf16_available():
            return None
        return Bf16Matmul(library)

    @staticmethod
    def fits(out: int, cols: int) -> bool:
        """Whether a weight of this shape [out, cols] has the kernel's layout."""
        return out % LANES == 0 and cols % 2 == 0

    @staticmethod
    def pack(weight: torch.Tensor) -> torch.Tensor:
        """bfloat16 [out, cols] -> [out / 16, cols / 2, 16, 2], as int16 (the same bits)."""
        out, cols = weight.shape
        blocks = weight.to(torch.bfloat16).reshape(out // LANES, LANES, cols // 2, 2)
        return blocks.permute(0, 2, 1, 3).contiguous().view(torch.int16)

    @staticmethod
    def rows(packed: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Rows ``ids`` of the weight [len(ids), cols] bfloat16, read from ``pack``'s layout."""
        pairs = packed.shape[1]
        picked = packed[ids // LANES, :, ids % LANES, :]  # [n, cols / 2, 2]
        return picked.reshape(ids.shape[0], pairs * 2).view(torch.bfloat16)

    def __call__(self, x: torch.Tensor, packed: torch.Tensor) -> torch.Tensor:
        """x [rows, cols] float32 over ``pack``'s weights -> [rows, out] float32."""
        x = x.float().contiguous()
        rows, cols = x.shape
        out = packed.shape[0] * LANES
        y = torch.empty((rows, out), dtype=torch.float32)
        if rows == 0:
            return y
        scratch = torch.empty(rows * cols, dtype=torch.int16)
        threads = torch.get_num_threads()
        pointers = (x.data_ptr(), packed.data_ptr(), y.data_ptr(), scratch.data_ptr())
        if self._run(*pointers, rows, cols, out, threads) != 0:
            raise ValueError(f"bf16 matmul cannot run x {tuple(x.shape)} into {out} outputs")
        return y
