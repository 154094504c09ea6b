"""float32 GEMM on the CPU: MKL on Intel CPUs, oneDNN elsewhere.

``F.linear`` in float32 runs MKL's sgemm. MKL picks its code path by CPU vendor as well as by
features: on an AMD CPU with AVX-512 it runs its AVX2 path, at about half that CPU's peak
(measured on a 2-core AMD EPYC Zen 5 slice, the model's projection shapes at 64-1,024 rows:
MKL 150-200 GFLOP/s, oneDNN 300-410). oneDNN, which PyTorch also ships, dispatches by features
alone. On Intel CPUs MKL keeps the path the engine's figures were first measured on. The
weights stay plain tensors (oneDNN reorders them per call, within 10% of a pre-packed copy), so
a tied LM head still shares its table with the embedding.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from backends.local.cpu_features import cpu_vendor

_CHOICE: list[bool] = []


def onednn_float32() -> bool:
    """Whether float32 projections on this CPU run on oneDNN rather than MKL."""
    if not _CHOICE:
        op = getattr(torch.ops.mkldnn, "_linear_pointwise", None)
        usable = op is not None and torch.backends.mkldnn.is_available()
        _CHOICE.append(usable and cpu_vendor() not in ("", "GenuineIntel"))
    return _CHOICE[0]


def float32_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """x [T, in] float32 @ weight [out, in]^T (+ bias) on this CPU's faster float32 GEMM."""
    if onednn_float32() and x.dim() == 2 and x.shape[0] > 0:
        return torch.ops.mkldnn._linear_pointwise(x.contiguous(), weight, bias, "none", [], "")
    return F.linear(x, weight, bias)
