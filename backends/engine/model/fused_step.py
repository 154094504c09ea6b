"""Short CPU steps through every layer in one C call, where the model's layers allow it.

A decode step of one or a few sequences runs each decoder layer's ~20 small operators; on the
CPU PyTorch's dispatch of them costs as much as the arithmetic. ``decode_step.c`` runs the same
layer (the same 4-bit projections, norms, rotary tables and paged attention) in one call for
all layers. On models whose projections are all 4-bit groups under the C kernel (int4, and
float32 over a 4-bit GGUF) or all bfloat16 under the AVX512-BF16 kernel (Bf16Linear), and that
have no q/k norms, it is used for steps that the C attention kernel takes whole: with int4 on
the wide layout (AVX-512 VNNI) and with bfloat16 every step, prompt chunks included; with
float32 over such groups decode steps of up to WIDE_DUAL_MAX_ROWS rows; elsewhere steps of up
to DUAL_MAX_ROWS, as far as the 4-bit path goes anyway. Anything else keeps the PyTorch path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import torch

from backends.engine.weights.bf16_linear import Bf16Linear
from backends.engine.weights.quant import DUAL_MAX_ROWS, WIDE_DUAL_MAX_ROWS, DualLinear, Int4Linear

# The fused call's widest step on the wide layout: any step the scheduler makes (prompt chunks
# too, their attention in the same kernel in tiles); its workspace grows to the widest seen.
WIDE_MAX_ROWS = 1 << 16

if TYPE_CHECKING:
    from torch import nn

    from backends.engine.model.layers import DecoderLayer
    from backends.engine.model.model import CausalLM
    from backends.engine.weights.native.decode_step import BoundStep, Projection


def bind_fused_step(
    model: CausalLM, kv_caches: list[tuple[torch.Tensor, torch.Tensor]], scale: float
) -> BoundStep | None:
    """The fused step over this model and cache, or None where it does not apply."""
    from backends.engine.weights.native.decode_step import DecodeStepKernel, LayerTensors, Shape

    config = model.config
    if model.dtype != torch.float32 or config.qk_norm:
        return None
    if any(k.dtype not in (torch.float32, torch.float16) for k, _ in kv_caches):
        return None
    layers = []
    for module, (k_pool, v_pool) in zip(model.layers, kv_caches, strict=True):
        layer = cast("DecoderLayer", module)
        found = [_projection(p) for p in (layer.qkv, layer.o_proj, layer.gate_up, layer.down)]
        projections = [p for p in found if p is not None]
        if len(projections) < len(found):
            return None
        qkv, o, gate_up, down = projections
        norms = (layer.input_norm.data, layer.post_norm.data)
        layers.append(LayerTensors(*norms, qkv, o, gate_up, down, k_pool, v_pool))
    kernel = DecodeStepKernel.available()
    if kernel is None:
        return None
    shape = Shape(
        config.hidden_size,
        config.num_heads,
        config.num_kv_heads,
        config.head_dim,
        config.intermediate_size,
        config.rms_norm_eps,
        scale,
    )
    rotary = model.rotary
    max_rows = _max_rows(model)
    return kernel.bind(
        shape, layers, rotary.cos, rotary.sin_signed, max_rows, max_rows == WIDE_MAX_ROWS
    )


def _max_rows(model: CausalLM) -> int:
    """The widest step the fused call takes: any (WIDE_MAX_ROWS, prompt chunks too) where every
    projection is 4-bit groups with the wide layout, or bfloat16 under its kernel;
    WIDE_DUAL_MAX_ROWS of decode rows for float32's copies of such groups (the wide kernel beats
    float32 GEMM at every width, bench/wide_kernels.py; the PyTorch layers keep DualLinear's 16
    rows, so prompt chunks keep float32 GEMM and its exact logits); else as wide as the 4-bit
    path beats float32 GEMM without the wide kernel (DUAL_MAX_ROWS)."""
    projections = [
        projection
        for layer in cast("list[DecoderLayer]", list(model.layers))
        for projection in (layer.qkv, layer.o_proj, layer.gate_up, layer.down)
    ]
    if all(isinstance(m, Int4Linear) and m.columns is not None for m in projections):
        return WIDE_MAX_ROWS
    if all(isinstance(m, Bf16Linear) for m in projections):
        return WIDE_MAX_ROWS
    duals = [m for m in projections if isinstance(m, DualLinear)]
    if len(duals) == len(projections) and all(
        isinstance(m.narrow, Int4Linear) and m.narrow.columns is not None for m in duals
    ):
        return WIDE_DUAL_MAX_ROWS
    return DUAL_MAX_ROWS


def _projection(module: nn.Module) -> Projection | None:
    """A projection's 4-bit groups (or bfloat16 blocks) as the C kernel holds them, or None."""
    from backends.engine.weights.native.decode_step import Projection

    def data(tensor: torch.Tensor | None) -> torch.Tensor | None:
        return None if tensor is None else tensor.data.float().contiguous()

    if isinstance(module, Bf16Linear):
        return Projection(None, None, None, bias=data(module.bias), bf16=module.packed.data)
    narrow = module.narrow if isinstance(module, DualLinear) else module
    if not isinstance(narrow, Int4Linear) or narrow.kernel is None:
        return None

    return Projection(
        narrow.packed.data,
        narrow.scale.data,
        narrow.low.data,
        data(narrow.bias),
        data(narrow.down),
        data(narrow.up),
        _wide(narrow),
    )


def _wide(narrow: Int4Linear) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """The groups' wide layout, where one was built (AVX-512 VNNI)."""
    columns = narrow.columns
    if columns is None or columns.low is None:
        return None
    return columns.w.data, columns.scale.data, columns.low.data
