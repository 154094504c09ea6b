"""bfloat16 projections on the CPU's AVX512-BF16 instructions (``native/bf16_matmul.c``).

oneDNN's bfloat16 GEMM, which ``F.linear`` runs on the CPU, chooses its blocking by the number
of rows, so a row's sums differ between batch sizes;
:class:`backends.engine.weights.quant.FloatLinear`
makes up for it by running fixed chunks of 64 rows, at up to twice the cost. The C kernel sums
every row in the same order at any batch size, needs no padding, returns float32 without the
rounding to bfloat16, and runs in the fused step (``decode_step.c``) too. Where this CPU lacks
AVX512-BF16 (or a shape does not fit), bfloat16 keeps FloatLinear.
"""

from __future__ import annotations

import torch
from torch import nn

from backends.engine.weights.native.bf16_matmul import Bf16Matmul

_KERNEL: list[Bf16Matmul | None] = []


def bf16_kernel() -> Bf16Matmul | None:
    """The kernel, built once per process (None where this CPU or compiler cannot)."""
    if not _KERNEL:
        _KERNEL.append(Bf16Matmul.available())
    return _KERNEL[0]


class Bf16Linear(nn.Module):
    """A bfloat16 projection in the kernel's column-blocked layout (float32 in and out)."""

    def __init__(
        self, kernel: Bf16Matmul, weight: torch.Tensor, bias: torch.Tensor | None = None
    ) -> None:
        super().__init__()
        self.kernel = kernel
        self.packed = nn.Parameter(kernel.pack(weight), requires_grad=False)
        self.bias = None if bias is None else nn.Parameter(bias.float(), requires_grad=False)

    @classmethod
    def of(cls, weight: torch.Tensor, bias: torch.Tensor | None = None) -> Bf16Linear | None:
        """The projection over ``weight`` [out, in], or None where the kernel cannot run it."""
        kernel = bf16_kernel()
        if kernel is None or weight.device.type != "cpu" or not kernel.fits(*weight.shape):
            return None
        return cls(kernel, weight, bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [T, in] -> [T, out] in x's dtype (computed from x rounded to bfloat16)."""
        out = self.kernel(x, self.packed.data)
        if self.bias is not None:
            out += self.bias
        return out.to(x.dtype)

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        """Weight rows ``ids`` [n, in] bfloat16: the embedding lookup of a tied LM head."""
        return self.kernel.rows(self.packed.data, ids)
