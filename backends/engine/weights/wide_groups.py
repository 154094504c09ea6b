"""A projection's 4-bit or 8-bit groups laid out by output column, for steps of many rows.

The group kernel (:mod:`backends.engine.weights.native.group_matmul`) is built for a few rows, where
reading the weights is the cost. Prompt chunks and wide decode batches are bound by arithmetic
instead; on a CPU with AVX-512 VNNI, :mod:`backends.engine.weights.native.wide_matmul` runs them
over the same groups at integer multiply-add speed, with the same int16 rounding of the activations.
The copy costs the 4-bit (8-bit) bytes once more, far less than the float32 weights a wide step
would otherwise need.

Where the copy exists it runs every step, one row included: measured on a 2-core AVX-512 VNNI
CPU (``bench/wide_kernels.py``, weights read cold, 1 to 512 rows at the bundled model's
projection shapes), it beat the group kernel at all but two of the 45 points (960x576 at 2
rows and 576x576 at 4, by up to 13%), and float32 GEMM at most shapes at every row count.
"""

from __future__ import annotations

import torch
from torch import nn

from backends.engine.weights.native.wide_matmul import WideMatmul

_KERNEL: list[WideMatmul | None] = []


def wide_kernel() -> WideMatmul | None:
    """The wide kernels, built once per process (None where this CPU or compiler cannot)."""
    if not _KERNEL:
        _KERNEL.append(WideMatmul.available())
    return _KERNEL[0]


class WideGroups(nn.Module):
    """The column-blocked copy; ``of4`` / ``of8`` return None where the kernel cannot run it."""

    def __init__(
        self, kernel: WideMatmul, w: torch.Tensor, scale: torch.Tensor, low: torch.Tensor | None
    ) -> None:
        super().__init__()
        self.kernel = kernel
        self.w = nn.Parameter(w, requires_grad=False)
        self.scale = nn.Parameter(scale, requires_grad=False)
        self.low = None if low is None else nn.Parameter(low, requires_grad=False)

    @classmethod
    def of4(cls, q: torch.Tensor, scale: torch.Tensor, low: torch.Tensor) -> WideGroups | None:
        """4-bit groups: q uint8 [out, cols] in 0..15, w = q * scale + low per group of 32."""
        kernel = wide_kernel()
        if kernel is None or not kernel.fits(*q.shape):
            return None
        return cls(kernel, kernel.pack4(q), kernel.pack_scales(scale), kernel.pack_scales(low))

    @classmethod
    def of8(cls, q: torch.Tensor, scale: torch.Tensor) -> WideGroups | None:
        """8-bit groups: q int8 [out, cols], w = q * scale per group of 32."""
        kernel = wide_kernel()
        if kernel is None or not kernel.fits(*q.shape):
            return None
        return cls(kernel, kernel.pack8(q), kernel.pack_scales(scale), None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [T, in] float32 -> [T, out] float32."""
        if self.low is None:
            return self.kernel.q8(x, self.w, self.scale)
        return self.kernel.q4(x, self.w, self.scale, self.low)
